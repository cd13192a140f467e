"""End to end: the real gateway process, its web API and the fake model over HTTP."""

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


def _answers(client, session_id: str) -> list[str]:
    return [m["content"] for m in history(client, session_id)["messages"]
            if m["role"] == "assistant" and not m["tool_calls"]]


def test_messages_over_the_web_api_are_answered_in_order(gateway: GatewayProcess, fake_model: FakeModelServer) -> None:
    fake_model.queue("answer one", "answer two", "answer three")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        for text in ("one", "two", "three"):
            send(client, session_id, text)
        wait_for(lambda: len(_answers(client, session_id)) == 3, what="three answers")
        view = history(client, session_id)
    users = [m["content"] for m in view["messages"] if m["role"] == "user"]
    assert users == ["one", "two", "three"]
    assert _answers_of(view) == ["answer one", "answer two", "answer three"]
    assert gateway.stop() == 0
    log = (gateway.home / "logs" / "gateway.log").read_text()
    assert log.count("user turn in") == 3
    assert gateway.token not in log  # the login token is printed, never logged


def _answers_of(view) -> list[str]:
    return [m["content"] for m in view["messages"] if m["role"] == "assistant" and not m["tool_calls"]]


def test_a_web_heartbeat_fires_unprompted_and_again_after_sigkill(gateway: GatewayProcess, fake_model: FakeModelServer) -> None:
    fake_model.set_default_reply("nothing new")
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "/heartbeat every 2s check the build")
        wait_for(lambda: any(m["heartbeat"] for m in history(client, session_id)["messages"]), what="a heartbeat turn")
        view = history(client, session_id)
        assert view["heartbeat"]["interval"] == 2 and view["heartbeat"]["status"] == "active"
    gateway.kill()
    fired = view["heartbeat"]["fire_count"]
    requests_before = len(fake_model.requests)
    gateway.start()  # no new message is sent
    with gateway.client() as client:
        wait_for(lambda: history(client, session_id)["heartbeat"]["fire_count"] > fired + 1, what="fires after restart")
        heartbeat_turns = [m for m in history(client, session_id)["messages"] if m["heartbeat"]]
    assert len(fake_model.requests) > requests_before
    assert heartbeat_turns[0]["header"].startswith("[Heartbeat — recurring instruction, fires every 2s]")


def test_a_message_accepted_just_before_sigkill_is_answered_once(gateway: GatewayProcess, fake_model: FakeModelServer) -> None:
    from vigil.testing.scripting import Reply

    gateway.start()
    fake_model.queue(Reply.text(["slow"] * 20, chunk_delay=0.5))
    with gateway.client() as client:
        session_id = new_conversation(client)
        accepted = send(client, session_id, "answer me", client_id="key-1")
        assert not accepted["duplicate"]
        fake_model.wait_for_requests(1, timeout=20)
        gateway.kill()  # mid-turn: the answer is still streaming
    fake_model.queue("the one answer")
    gateway.start()
    with gateway.client() as client:
        again = send(client, session_id, "answer me", client_id="key-1")  # the client's retry
        assert again["duplicate"] and again["inbox_id"] == accepted["inbox_id"]
        wait_for(lambda: "the one answer" in _answers(client, session_id), what="the answer after restart")
        final = [a for a in _answers(client, session_id) if a == "the one answer"]
    assert final == ["the one answer"]
    assert gateway.stop() == 0
