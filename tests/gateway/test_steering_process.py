"""``/steer`` through the real gateway (the web API, a real ``vigil gateway run``): guidance sent
while a tool call runs reaches the model's next request — after the tool's result, before the
turn's answer — and is stored in the conversation; its sender is told it was taken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gateway.operations import answers, users
from tests.gateway.process import GatewayProcess, new_conversation, send, wait_for
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

pytestmark = pytest.mark.slow

HOLD = "touch started; while [ ! -e go ]; do sleep 0.02; done; echo built"
"""A tool call that says it runs, then stays in flight until the test lets it finish."""


def _workspace(home: Path, session_id: str) -> Path | None:
    store = SQLiteStore(home / "state.db")
    try:
        cwd = store.get_session(session_id).model_config.get("cwd")
    finally:
        store.close()
    return Path(cwd) if cwd else None


def test_guidance_sent_during_a_tool_call_reaches_the_next_request_and_is_stored(
    vigil_home: Path, fake_model: FakeModelServer
) -> None:
    fake_model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": HOLD})), "built it; en français")
    gateway = GatewayProcess(vigil_home, fake_model).start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "build the project")
        workspace = wait_for(lambda: (lambda w: w if w and (w / "started").exists() else None)(
            _workspace(vigil_home, session_id)), what="the tool call running")
        send(client, session_id, "/steer answer in French")  # handed to the running turn before 202
        (workspace / "go").touch()
        wait_for(lambda: answers(client, session_id) == ["built it; en français"], what="the turn's answer")
        assert users(client, session_id) == ["build the project", "answer in French"]
    last = fake_model.requests[-1].body["messages"]
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "user"]
    assert "built" in json.dumps(last[-2]) and last[-1]["content"] == "answer in French"
    assert gateway.stop() == 0
    store = SQLiteStore(vigil_home / "state.db")
    try:
        told = [e.text for e in store.gateway.outbox_list() if e.session_id == session_id]
    finally:
        store.close()
    assert any(text.startswith("↪ Steered: “answer in French”") for text in told), told


def test_queue_drop_withdraws_a_waiting_message_and_records_it(
    vigil_home: Path, fake_model: FakeModelServer
) -> None:
    fake_model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": HOLD})), "built", "tested")
    gateway = GatewayProcess(vigil_home, fake_model).start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "build the project")
        workspace = wait_for(lambda: (lambda w: w if w and (w / "started").exists() else None)(
            _workspace(vigil_home, session_id)), what="the tool call running")
        send(client, session_id, "run the tests")
        dropped = send(client, session_id, "deploy to production")["inbox_id"]
        send(client, session_id, "/queue drop 2")
        (workspace / "go").touch()
        wait_for(lambda: answers(client, session_id) == ["built", "tested"], what="both answers")
        assert users(client, session_id) == ["build the project", "run the tests"]
    assert gateway.stop() == 0
    store = SQLiteStore(vigil_home / "state.db")
    try:
        entry = store.gateway.inbox_get(dropped)
        told = [e.text for e in store.gateway.outbox_list() if e.session_id == session_id]
    finally:
        store.close()
    assert entry is not None and entry.error == "withdrawn with /queue before it was handled"
    assert any("Withdrew 1 waiting message: “deploy to production”" in text for text in told), told
