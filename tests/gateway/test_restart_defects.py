"""Restarts that once went wrong in the gateway core: a cut-off turn asked its question twice,
and a message that only waited in the queue counted as an attempt."""

from __future__ import annotations

import signal

import pytest

from tests.gateway.operations import configure, gateway, interrupted_then_restarted
from tests.gateway.process import GatewayProcess, new_conversation, send
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = pytest.mark.slow

__all__ = ["gateway"]  # the fixture, imported for pytest


def test_a_message_whose_turn_sigterm_interrupted_is_in_the_history_once_after_restart(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    _, messages = interrupted_then_restarted(gateway, fake_model)
    assert [m["content"] for m in messages if m["role"] == "user"] == ["answer me"]


def test_a_message_that_only_waited_in_the_queue_is_not_counted_as_started(
    gateway: GatewayProcess, fake_model: FakeModelServer
) -> None:
    """Counted as started, a message queued behind a long turn at three SIGTERMs in a row is
    given up ("vigil gave up on this message after 3 attempts") without ever having run."""
    configure(gateway, "gateway.stop_timeout", "0.2")
    fake_model.queue(Reply.text(["slow "] * 40, chunk_delay=0.5))
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        running = send(client, session_id, "a long job")["inbox_id"]
        queued = send(client, session_id, "a quick question")["inbox_id"]
        fake_model.wait_for_requests(1, timeout=30)
        assert gateway.stop(signal.SIGTERM) == 0
    assert len(fake_model.requests) == 1  # the queued message never reached the model
    store = SQLiteStore(gateway.home / "state.db")
    try:
        started, waited = store.gateway.inbox_get(running), store.gateway.inbox_get(queued)
    finally:
        store.close()
    assert started is not None and started.attempts == 1
    assert waited is not None and waited.attempts == 0, waited

