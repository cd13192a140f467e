"""`chat -q` and `cron run` against an endpoint that answers with something else than its API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli, run_vigil
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

NOT_THE_API = "something that is not an OpenAI-compatible response"


def _env(server: FakeModelServer, home: Path) -> dict[str, str]:
    return {"VIGIL_HOME": str(home), "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}


@pytest.fixture(autouse=True)
def _one_retry() -> None:
    assert run_cli("config", "set", "model.max_retries", "1").exit_code == 0


@pytest.mark.parametrize(
    "broken", [Reply.garbled(0), Reply.raw(200, "<html><body>Welcome to nginx!</body></html>")], ids=["bad-data-line", "html"]
)
def test_chat_q_says_what_is_wrong_and_the_session_goes_on(
    fake_model: FakeModelServer, vigil_home: Path, broken: Reply
) -> None:
    fake_model.set_default_reply(broken)
    failed = run_vigil("chat", "-q", "hello", home=vigil_home, env=_env(fake_model, vigil_home))
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert NOT_THE_API in failed.stderr and "gave up after 2 attempts" in failed.stderr
    assert len(fake_model.requests) == 2

    fake_model.set_default_reply("Working again.")
    again = run_vigil("chat", "--continue", "-q", "hello again", home=vigil_home, env=_env(fake_model, vigil_home))
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Working again.\n"
    assert fake_model.last_request.status == 200


def test_chat_q_keeps_text_that_arrived_before_a_bad_line(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.queue(Reply.garbled(2, text=["Here is ", "the start ", "and the rest"]))
    failed = run_vigil("chat", "-q", "hello", home=vigil_home, env=_env(fake_model, vigil_home))
    assert failed.returncode == 1 and "Traceback" not in failed.stderr and NOT_THE_API in failed.stderr
    session_id = failed.stderr.split("session ")[-1].split()[0]
    shown = json.loads(run_cli("sessions", "show", session_id, "--json").output)
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]
    assert shown["messages"][1]["content"].startswith("Here is the start\n\n[cut off:")


def test_cron_run_records_the_provider_error(fake_model: FakeModelServer, vigil_home: Path) -> None:
    env = _env(fake_model, vigil_home)
    added = run_vigil("cron", "add", "j", "--schedule", "every 1h", "--prompt", "report", home=vigil_home, env=env)
    assert added.returncode == 0, added.stderr
    fake_model.set_default_reply(Reply.raw(200, "<html><body>Please log in</body></html>"))
    ran = run_vigil("cron", "run", "j", "--json", home=vigil_home, env=env)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    record = json.loads(ran.stdout)
    assert record["status"] == "failed"
    assert record["error"].startswith("ModelMalformedResponse: ") and "Please log in" in record["error"]
