"""End to end: heartbeat options in the real gateway process, over its web API, with the fake
model over HTTP. A HEARTBEAT_OK answer is in the history marked silent; a heartbeat set --for a
few seconds ends by itself, leaves a note and is gone from the conversation; the gateway's log
says so. A heartbeat whose end came while no gateway ran is cleared when one starts."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.gateway.process import GatewayProcess, history, new_conversation, send, wait_for
from vigil.testing.fake_model import FakeModelServer

pytestmark = pytest.mark.slow


@pytest.fixture
def gateway(fake_model: FakeModelServer, vigil_home: Path):
    process = GatewayProcess(vigil_home, fake_model, env={"VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "1"})
    yield process
    if process.process is not None and process.process.poll() is None:
        process.stop(signal.SIGKILL)


def test_heartbeat_ok_is_silent_and_an_ended_heartbeat_leaves_a_note(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    fake_model.queue("HEARTBEAT_OK", "The build broke.")
    fake_model.set_default_reply("HEARTBEAT_OK")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "/heartbeat every 2s --for 7s check the build")
        wait_for(lambda: any(m["role"] == "note" for m in history(client, session_id)["messages"]),
                 timeout=30, what="the heartbeat's end note")
        view = history(client, session_id)
    answers = [(m["content"], m["silent"]) for m in view["messages"] if m["role"] == "assistant"]
    assert answers[:2] == [("HEARTBEAT_OK", True), ("The build broke.", False)]
    [note] = [m["content"] for m in view["messages"] if m["role"] == "note"]
    assert note.startswith("♥ Heartbeat ended (every 2s, fired")
    assert view["heartbeat"] is None
    assert gateway.stop() == 0
    log = (gateway.home / "logs" / "gateway.log").read_text()
    assert "heartbeat of " in log and " ended" in log


def test_an_end_that_came_while_no_gateway_ran_is_kept_at_the_next_start(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    fake_model.set_default_reply("still building")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "/heartbeat every 1h --for 2h check the build")
        wait_for(lambda: (history(client, session_id)["heartbeat"] or {}).get("ends_at"), what="the heartbeat set")
    assert gateway.stop() == 0
    # two hours pass while nothing runs: the record's end is moved into the past
    from vigil.profiles import get_profile
    from vigil.schedule.heartbeat.record import heartbeat_key
    from vigil.store import open_store

    store = open_store(get_profile(None).state_db)
    try:
        entry = store.get_meta(heartbeat_key(session_id))
        assert store.compare_and_set_meta(heartbeat_key(session_id), entry.value, {**entry.value, "ends_at": 1.0})
    finally:
        store.close()
    gateway.start()
    with gateway.client() as client:
        wait_for(lambda: history(client, session_id)["heartbeat"] is None, timeout=30, what="the ended heartbeat cleared")
        notes = [m for m in history(client, session_id)["messages"] if m["role"] == "note"]
    assert len(notes) == 1 and fake_model.requests == []  # it never fired
