"""Delivery semantics of the real gateway process: a message that keeps killing the process is
set aside after a bounded number of deaths while other conversations go on (and `vigil gateway
retry` sends it again), a message sent while the model endpoint refuses connections or
answers 503 is answered once the endpoint is back, and a message sent before any model is configured tells
the person how to set one up and is answered once one is."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.cli.helpers import run_cli
from tests.gateway.operations import answers, log_text, users
from tests.gateway.process import GatewayProcess, free_port, new_conversation, send, wait_for
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import ANSWERED, POISON_DEATHS, SET_ASIDE
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

POISON = "poison pill"
REFUSED_FOR = 10.0 if os.environ.get("VIGIL_DELIVERY_FULL") else 5.0
"""Seconds the model endpoint refuses connections (the acceptance test's 10 with
``VIGIL_DELIVERY_FULL=1``; shorter in the suite, for its time budget)."""
OVERLOADED_FOR = 60.0 if os.environ.get("VIGIL_DELIVERY_FULL") else 3.0
"""Seconds the model endpoint answers 503 (the acceptance test's minute with
``VIGIL_DELIVERY_FULL=1``)."""


def write_config(home: Path, config: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(json.dumps(config))


def inbox(home: Path, entry_id: int) -> Any:
    store = SQLiteStore(home / "state.db")
    try:
        return store.gateway.inbox_get(entry_id)
    finally:
        store.close()


class Watcher:
    """A conversation's live events, collected in a thread from its SSE stream (open once
    the constructor returns)."""

    def __init__(self, gateway: GatewayProcess, session_id: str) -> None:
        self.seen: list[dict[str, Any]] = []
        opened = threading.Event()
        threading.Thread(target=self._read, args=(gateway, session_id, opened), daemon=True).start()
        assert opened.wait(15), "the event stream did not open"

    def _read(self, gateway: GatewayProcess, session_id: str, opened: threading.Event) -> None:
        try:
            with gateway.client() as client, client.stream(
                "GET", f"/api/conversations/{session_id}/events", timeout=httpx.Timeout(60, read=None)
            ) as stream:
                for line in stream.iter_lines():
                    opened.set()  # ": connected" comes first
                    if line.startswith("data:"):
                        self.seen.append(json.loads(line[5:]))
        except httpx.HTTPError:
            pass

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [item for item in list(self.seen) if item.get("type") == kind]


def crash_on(marker: str, gateway: GatewayProcess) -> Any:
    """The test hook: a rule condition of the fake model that SIGKILLs the gateway whenever a
    turn sends it a message containing ``marker`` (as a message that crashes the process it
    runs in would). Nothing of it is in vigil: the process just dies under that turn."""

    def condition(last_user_text: str) -> bool:
        process = gateway.process
        if marker in last_user_text and process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            return True
        return False

    return condition


def start_or_die(gateway: GatewayProcess) -> bool:
    """Start the gateway as a service manager would; ``False`` when it died while starting."""
    try:
        gateway.start()
    except AssertionError:
        gateway.process.wait(10)  # type: ignore[union-attr]
        return False
    return True


def test_a_message_that_kills_the_gateway_is_set_aside_while_other_conversations_are_answered(
    vigil_home: Path, fake_model: FakeModelServer
) -> None:
    write_config(vigil_home, {"gateway": {"retry_max_delay": 1}})  # suspects wait 1 s after a start
    gateway = GatewayProcess(vigil_home, fake_model)
    fake_model.set_default_reply("fine")
    fake_model.rule(match=crash_on(POISON, gateway), reply="never seen")
    fake_model.rule(contains="slow one", reply=Reply.text(["slow", " but", " sure"], chunk_delay=0.2))
    gateway.start()
    with gateway.client() as client:
        poisoned, bystander, slow = (new_conversation(client) for _ in range(3))
        send(client, bystander, "hello before")
        wait_for(lambda: answers(client, bystander) == ["fine"], what="the first answer")
        send(client, slow, "a slow one")  # streaming when the process dies
        entry = send(client, poisoned, POISON)["inbox_id"]
    deaths = 0
    while inbox(vigil_home, entry).status != SET_ASIDE:
        gateway.process.wait(30)  # type: ignore[union-attr]  # it dies under the poison's turn
        deaths += 1
        assert deaths <= POISON_DEATHS, f"not set aside after {deaths} deaths: {inbox(vigil_home, entry)}"
        if start_or_die(gateway):
            wait_for(lambda: gateway.process.poll() is not None or inbox(vigil_home, entry).status == SET_ASIDE,  # type: ignore[union-attr]
                     timeout=30, what="the next death or the set-aside")
    assert deaths == POISON_DEATHS
    if gateway.process.poll() is not None:  # type: ignore[union-attr]
        gateway.start()
    with gateway.client() as client:
        send(client, bystander, "hello after")
        wait_for(lambda: answers(client, bystander) == ["fine", "fine"], what="the bystander answered after")
        wait_for(lambda: answers(client, slow) == ["slow but sure"], what="the slow answer, once")
        assert users(client, slow) == ["a slow one"]
        metrics = client.get("/metrics").text
    assert 'vigil_gateway_inbox_set_aside_total{reason="deaths"} 1.0' in metrics
    assert f"message {entry} from web" in log_text(gateway) and "set aside as poison" in log_text(gateway)
    store = SQLiteStore(vigil_home / "state.db")
    try:
        [notice] = [o for o in store.gateway.outbox_list(limit=1000) if o.inbox_id == entry]
    finally:
        store.close()
    assert notice.kind == "notice" and f"/retry {entry}" in notice.text and "set this message aside" in notice.text

    # Sent again, by hand: it runs again (and answers, this time).
    listed = run_cli("gateway", "retry", "--json")
    assert [item["id"] for item in json.loads(listed.output)["set_aside"]] == [entry], listed.output
    fake_model.reset()
    fake_model.set_default_reply("fine")
    fake_model.rule(contains=POISON, reply="cured")
    done = run_cli("gateway", "retry", str(entry), "--json")
    assert done.exit_code == 0 and json.loads(done.output)["status"] == "pending", done.output
    with gateway.client() as client:
        wait_for(lambda: answers(client, poisoned) == ["cured"], what="the poison answered after the retry")
        assert users(client, poisoned) == [POISON]
    assert inbox(vigil_home, entry).status == ANSWERED
    again = run_cli("gateway", "retry", str(entry), "--json")
    assert again.exit_code == 1 and json.loads(again.output)["error"]["kind"] == "refused"
    assert "was not set aside: it is answered" in json.loads(again.output)["error"]["message"]
    unknown = run_cli("gateway", "retry", "99999")
    assert unknown.exit_code == 1 and "there is no message 99999" in unknown.output
    assert gateway.stop() == 0


@pytest.fixture
def model_later() -> Iterator[FakeModelServer]:
    """A fake model endpoint on a fixed free port that is not serving yet."""
    server = FakeModelServer(port=free_port(), default_reply="I am back")
    yield server
    server.stop()


def test_a_message_sent_while_the_model_refuses_connections_is_answered_once_it_is_back(
    vigil_home: Path, model_later: FakeModelServer
) -> None:
    write_config(vigil_home, {"gateway": {"retry_max_delay": 1}})
    gateway = GatewayProcess(vigil_home, model_later).start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        watcher = Watcher(gateway, session_id)
        entry = send(client, session_id, "are you there?")["inbox_id"]
        sent = time.monotonic()
        wait_for(lambda: watcher.of("waiting"), what="the conversation saying it waits")
        assert watcher.of("waiting")[0]["text"].startswith("waiting for the model (retrying, next try in ")
        status = wait_for(lambda: (lambda out: out if "waiting for the model" in out else None)(
                              run_cli("gateway", "status").output),
                          timeout=15, what="gateway status showing the waiting message")
        assert "1 message(s) waiting for the model (retrying, " in status and "cannot reach" in status
        time.sleep(max(0.0, REFUSED_FOR - (time.monotonic() - sent)))  # then the endpoint comes back
        model_later.start()
        back = time.monotonic()
        wait_for(lambda: answers(client, session_id) == ["I am back"], timeout=15, what="the answer")
        took = time.monotonic() - back
        print(f"answered {took:.2f} s after the endpoint came back (back-off cap 1 s)")
        assert took < 1 + 2.0  # the cap, plus a turn and a slow machine's slack
        assert users(client, session_id) == ["are you there?"]
        assert len(model_later.requests) == 1
    assert inbox(vigil_home, entry).status == ANSWERED
    assert gateway.stop() == 0
    assert "waits, retrying with back-off for up to 3600 s: cannot reach the model endpoint" in log_text(gateway)


def test_a_message_sent_while_the_model_answers_503_is_answered_once_it_recovers(
    vigil_home: Path, fake_model: FakeModelServer
) -> None:
    write_config(vigil_home, {"gateway": {"retry_max_delay": 1}})
    fake_model.set_default_reply(Reply.error(503, "overloaded, try again later"))
    gateway = GatewayProcess(vigil_home, fake_model).start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        watcher = Watcher(gateway, session_id)
        entry = send(client, session_id, "still there?")["inbox_id"]
        sent = time.monotonic()
        wait_for(lambda: watcher.of("waiting"), what="the conversation saying it waits")
        time.sleep(max(0.0, OVERLOADED_FOR - (time.monotonic() - sent)))  # the outage lasts this long
        fake_model.set_default_reply("recovered")
        back = time.monotonic()
        wait_for(lambda: answers(client, session_id) == ["recovered"], timeout=15, what="the answer")
        took = time.monotonic() - back
        print(f"answered {took:.2f} s after {OVERLOADED_FOR:g} s of 503s (back-off cap 1 s), "
              f"{len(fake_model.requests)} requests")
        assert took < 1 + 2.0  # the cap, plus a turn and a slow machine's slack
        assert users(client, session_id) == ["still there?"]
        assert [r.status for r in fake_model.requests].count(200) == 1  # answered once
    assert inbox(vigil_home, entry).status == ANSWERED
    assert gateway.stop() == 0


def test_without_a_model_the_person_is_told_how_to_set_one_up_and_the_message_waits(
    vigil_home: Path, fake_model: FakeModelServer
) -> None:
    write_config(vigil_home, {"gateway": {"retry_max_delay": 1}})
    unset = {name: "" for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                                   "VIGIL_MODEL")}
    gateway = GatewayProcess(vigil_home, fake_model, env={**unset, "MY_MODEL_KEY": fake_model.api_key}).start()
    fake_model.set_default_reply("now I can answer")
    with gateway.client() as client:
        session_id = new_conversation(client)
        watcher = Watcher(gateway, session_id)
        entry = send(client, session_id, "hello?")["inbox_id"]
        notices = wait_for(lambda: [e for e in watcher.of("reply") if e.get("kind") == "notice"],
                           what="the set-up notice in the conversation")
        text = notices[0]["text"]
        assert "No model is configured" in text and "There are three ways to get one" in text
        assert "Your message is kept" in text
        assert answers(client, session_id) == []
        for key, value in (("model.base_url", fake_model.base_url), ("model.api_key_env", "MY_MODEL_KEY"),
                           ("model.name", "fake-model")):
            done = run_cli("config", "set", key, value)
            assert done.exit_code == 0, done.output
        gateway.process.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
        wait_for(lambda: answers(client, session_id) == ["now I can answer"], timeout=20, what="the answer")
        assert users(client, session_id) == ["hello?"]
        assert len([e for e in watcher.of("reply") if e.get("kind") == "notice"]) == 1
    assert inbox(vigil_home, entry).status == ANSWERED
    assert gateway.stop() == 0

