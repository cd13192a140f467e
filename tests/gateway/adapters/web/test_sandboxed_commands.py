"""A web-chat conversation's commands run in the sandbox: one that writes outside its
workspace fails there, and runs outside only after the person approves it on the page."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.gateway.process import new_conversation
from tests.gateway.adapters.web.conftest import EventReader, WebGateway, post_message
from tests.tools.sandbox_helpers import outside_tmp_dir, require_sandbox
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec


@pytest.fixture
def outside() -> Iterator[Path]:
    yield from outside_tmp_dir("vigil-web-sandbox-")


@pytest.mark.parametrize("approve", [False, True], ids=["denied", "approved"])
def test_a_write_outside_the_workspace_needs_the_persons_approval(
    gateway: WebGateway, fake_model_env: FakeModelServer, outside: Path, approve: bool,
) -> None:
    require_sandbox()
    target = outside / "x"
    # What the parser lets through (nothing dangerous about it) and only the sandbox stops.
    command = f"echo hi > {target}"
    fake_model_env.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": command})), "Done.")
    api = gateway.api()
    conversation = new_conversation(api)
    reader = EventReader(gateway, conversation)
    try:
        assert post_message(api, conversation, "write it", "w-1").status_code == 202
        request = reader.wait_for("approval_request")
        assert not target.exists()  # tried in the sandbox first: it could not write
        assert request["description"] == (
            f"run outside the sandbox a command that failed inside it (it writes outside its workspace): {command}"
        )
        answered = api.post(f"/api/approvals/{request['id']}", json={"approve": approve})
        assert answered.status_code == 200
        finished = reader.wait_for("tool_finished")
        reader.wait_for("turn_ended")
    finally:
        reader.close()
    assert "Read-only file system" in finished["content"]
    if approve:
        assert target.read_text() == "hi\n"
    else:
        assert not target.exists() and "declined to run it outside the sandbox" in finished["content"]
