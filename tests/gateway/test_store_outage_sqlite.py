"""A real gateway whose SQLite store cannot be written for a while (a full disk, a read-only
file): requests that must store something are refused with 503 and the reason, /healthz says
503 with the reason, nothing is acknowledged that was not stored, no traceback is printed, and
once the store can be written again the gateway carries on without a restart."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest

from tests.gateway.process import GatewayProcess, history, new_conversation, send, wait_for
from vigil.clock import SystemClock
from vigil.gateway.activity import GatewayActivity
from tests.store.test_resilience_sqlite import ImmutableFlag, empty_log, fill_up, small_disk, written_files
from vigil.testing.fake_model import FakeModelServer

pytestmark = pytest.mark.slow


@pytest.fixture
def gateway(fake_model: FakeModelServer, vigil_home: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(vigil_home, fake_model)
    yield process
    if process.process is not None and process.process.poll() is None:
        process.stop(signal.SIGKILL)


def _answers(client: httpx.Client, session_id: str) -> list[str]:
    return [m["content"] for m in history(client, session_id)["messages"] if m["role"] == "assistant"]


def _ride_out(
    gateway: GatewayProcess, fake_model: FakeModelServer, breaks: Callable[[], None], mends: Callable[[], None], reason: str
) -> None:
    """Chat, break the store, see writes refused with ``reason``, mend it, chat again."""
    fake_model.set_default_reply("noted")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "before")
        wait_for(lambda: _answers(client, session_id) == ["noted"], what="the first answer")
        breaks()

        refused = client.post(f"/api/conversations/{session_id}/messages", json={"text": "during", "client_id": "d1"})
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"].startswith(f"the session store cannot be written: {reason}"), refused.text
        created = client.post("/api/conversations")
        assert created.status_code == 503 and reason in created.json()["error"], created.text
        health = httpx.get(f"{gateway.url}/healthz")
        assert health.status_code == 503 and reason in health.text, health.text
        assert history(client, session_id)["messages"][-1]["content"] == "noted"  # reading still works

        mends()
        wait_for(lambda: httpx.get(f"{gateway.url}/healthz").status_code == 200, what="/healthz to recover")
        send(client, session_id, "after", client_id="a1")
        wait_for(lambda: _answers(client, session_id) == ["noted", "noted"], what="the answer after recovery")
        users = [m["content"] for m in history(client, session_id)["messages"] if m["role"] == "user"]
    assert users == ["before", "after"]  # the refused message was not stored
    assert gateway.stop() == 0
    printed = "".join(gateway.output)
    assert "Traceback" not in printed, printed


def test_a_full_disk_is_a_503_with_the_reason_until_space_is_freed(
    vigil_home: Path, gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    fillers: list[Path] = []

    def fill() -> None:
        empty_log(vigil_home / "state.db")  # a log with room left would take the next writes
        fillers.append(fill_up(vigil_home))

    with small_disk(vigil_home):  # the whole home, its logs too
        _ride_out(gateway, fake_model, fill, lambda: fillers.pop().unlink(), "disk full")


def test_a_read_only_database_is_a_503_with_the_reason_until_it_is_writable(
    vigil_home: Path, gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    flag = ImmutableFlag(written_files(vigil_home / "state.db"))
    try:
        _ride_out(gateway, fake_model, flag.set, flag.clear, "read-only")
    finally:
        flag.clear()


def test_a_gateway_log_on_a_full_disk_says_so_in_one_line_not_a_traceback_per_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        said: list[str] = []
        log = disk / "logs" / "gateway.log"
        activity = GatewayActivity(said.append, log, clock=SystemClock(), zone="UTC")
        long = "x" * 5000  # more than the log's last page holds: its file must grow
        activity.say(f"before {long}")
        filler = fill_up(disk)
        for n in range(3):
            activity.say(f"lost {n} {long}")
        filler.unlink()
        activity.say("after")
        activity.close()
        written = log.read_text()
    assert len(said) == 5  # stdout still has every line
    assert "before" in written and "after" in written
    err = capfd.readouterr().err
    assert err.count(f"vigil gateway: cannot write {log}") == 1 and "No space left on device" in err, err
    assert "Traceback" not in err
