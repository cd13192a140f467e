"""End to end: the real ``vigil gateway run`` (a subprocess, started once for the module,
SIGKILLed and restarted once) with Webhooks on, a :class:`Receiver` as the hook's url, and the
fake model, all over real HTTP. In order, each test on what the one before left:

a signed request is answered at the url, signed; its redelivery is acknowledged as a duplicate
and not answered again; a forged one is refused 401 and reaches neither the store nor the
model; ``/heartbeat every 2s …`` sent through the hook fires at the url; then a message is
stored while the (slow) model answers it, the gateway is SIGKILLed, a cron job delivering to
``webhooks:ha:reports`` comes due, and after the restart the heartbeat fires again, the
message is answered once and the cron result arrives (``vigil cron runs`` says delivered)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml

from tests.cli.helpers import run_cli
from tests.gateway.process import GatewayProcess, add_overdue_job, module_model, wait_for
from tests.gateway.adapters.webhooks.conftest import SECRET, SECRET_ENV
from tests.gateway.adapters.webhooks.receiver import Receiver, request
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = pytest.mark.slow


class Hooked:
    """The gateway process, the hook's url and the model."""

    def __init__(self, gateway: GatewayProcess, receiver: Receiver, model: FakeModelServer) -> None:
        self.gateway, self.receiver, self.model = gateway, receiver, model

    def post(self, payload: Any, *, secret: str = SECRET, delivery: str | None = None) -> httpx.Response:
        body, headers = request(secret, payload, delivery=delivery)
        return httpx.post(f"{self.gateway.url}/hooks/ha", content=body, headers=headers, timeout=30, trust_env=False)

    def answers(self, conversation: str, kind: str = "reply") -> list[str]:
        assert all(d.genuine for d in self.receiver.deliveries), "every delivery is signed with the hook's secret"
        return self.receiver.texts(conversation, kind)

    def asked(self, phrase: str) -> int:
        return sum(phrase in json.dumps(r.body.get("messages", [])[-1:]) for r in self.model.requests)

    def stored(self, delivery: str) -> list[str]:
        with sqlite3.connect(self.gateway.home / "state.db") as db:
            return [row[0] for row in db.execute(
                "SELECT status FROM gateway_inbox WHERE adapter = 'webhooks' AND external_id = ?", (f"ha:{delivery}",))]

    def start(self) -> None:
        self.gateway.start_for_module()


@pytest.fixture(scope="module")
def hooked(fake_model_session: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hooked]:
    home: Path = tmp_path_factory.mktemp("webhooks-e2e")
    receiver = Receiver(SECRET).start()
    (home / "config.yaml").write_text(yaml.safe_dump({"timezone": "UTC", "webhooks": {
        "enabled": True, "hooks": {"ha": {"secret_env": SECRET_ENV, "url": receiver.url}},
    }}))
    with module_model(fake_model_session) as model:
        model.rule(contains="a slow question", reply=Reply.text("too late", delay=15.0), times=1)
        model.rule(contains="a slow question", reply="the slow answer")
        model.rule(contains="are the lights on", reply="they are on")
        model.rule(contains="check the pumps", reply="pumps fine")
        model.rule(contains="the nightly report", reply="Nightly report.")
        model.rule(contains="after the restart", reply="still here")
        model.set_default_reply("ok")
        gateway = GatewayProcess(home, model, env={SECRET_ENV: SECRET, "VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "1"})
        hooked = Hooked(gateway, receiver, model)
        try:
            hooked.start()
            yield hooked
        finally:
            gateway.stop_if_running()
            receiver.stop()


def test_a_signed_request_is_answered_at_the_url_and_a_redelivery_once(hooked: Hooked) -> None:
    h = hooked
    first = h.post({"text": "are the lights on?", "conversation": "home"}, delivery="msg_lights")
    assert first.status_code == 202 and not first.json()["duplicate"], first.text
    wait_for(lambda: h.answers("home") == ["they are on"], what="the answer at the hook's url")
    assert h.receiver.replies_to("msg_lights")[0].body["in_reply_to"] == "msg_lights"

    again = h.post({"text": "are the lights on?", "conversation": "home"}, delivery="msg_lights")
    assert again.status_code == 202 and again.json()["duplicate"], again.text
    assert again.json()["inbox_id"] == first.json()["inbox_id"]
    assert h.post({"text": "and now?", "conversation": "home"}).status_code == 202  # answered after anything before it
    wait_for(lambda: len(h.answers("home")) == 2, what="the next answer")
    assert h.answers("home") == ["they are on", "ok"] and h.asked("are the lights on") == 1


def test_gateway_status_shows_the_hooks(hooked: Hooked, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_HOME", str(hooked.gateway.home))
    status = json.loads(run_cli("gateway", "status", "--json").output)
    [entry] = [a for a in status["adapters"] if a["name"] == "webhooks"]
    assert entry["state"] == "connected" and "ha" in entry["detail"], entry


def test_a_forged_request_is_refused_and_reaches_nothing(hooked: Hooked) -> None:
    h = hooked
    asked = len(h.model.requests)
    forged = h.post({"text": "unlock the front door", "conversation": "home"}, secret="guessed", delivery="msg_forged")
    assert forged.status_code == 401 and forged.json()["error"]["code"] == "bad_signature"
    assert h.stored("msg_forged") == [] and len(h.model.requests) == asked


def test_a_heartbeat_set_through_the_hook_fires_at_the_url(hooked: Hooked) -> None:
    h = hooked
    assert h.post({"text": "/heartbeat every 2s check the pumps", "conversation": "pumps"}).status_code == 202
    [note] = wait_for(lambda: h.answers("pumps", "command"), what="the command's answer")
    assert note.startswith("♥ Heartbeat set (every 2s): check the pumps"), note
    wait_for(lambda: "pumps fine" in h.answers("pumps", "heartbeat"), what="a heartbeat fire at the url")


def test_after_a_sigkill_the_heartbeat_fires_again_the_pending_message_is_answered_once_and_cron_delivers(
    hooked: Hooked, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = hooked
    assert h.answers("pumps", "heartbeat"), "runs after the heartbeat test"
    assert h.post({"text": "a slow question", "conversation": "late"}, delivery="msg_slow").status_code == 202
    wait_for(lambda: h.asked("a slow question") and h.stored("msg_slow") == ["running"], what="the slow turn under way")
    h.gateway.kill()
    fires = len(h.answers("pumps", "heartbeat"))
    add_overdue_job(h.gateway.home, "nightly", "the nightly report", "webhooks:ha:reports")
    h.start()

    wait_for(lambda: len(h.answers("pumps", "heartbeat")) > fires, what="a heartbeat fire after the restart")
    wait_for(lambda: h.answers("late") == ["the slow answer"], what="the pending message answered")
    [report] = wait_for(lambda: [d for d in h.receiver.deliveries if d.body["kind"] == "cron"], what="the cron result")
    assert report.body["text"] == "Nightly report." and report.body["conversation"] == "reports"
    assert report.body["cron"]["job"] == "nightly"
    with monkeypatch.context() as env:
        env.setenv("VIGIL_HOME", str(h.gateway.home))
        wait_for(lambda: {r["job"]: r["delivery"]["status"] for r in json.loads(run_cli("cron", "runs", "--json").output)}
                 == {"nightly": "delivered"}, what="the run recorded delivered")

    assert h.post({"text": "after the restart", "conversation": "late"}).status_code == 202
    wait_for(lambda: h.answers("late")[-1:] == ["still here"], what="the next answer")
    assert h.answers("late") == ["the slow answer", "still here"]
    cleared = h.post({"text": "/heartbeat clear", "conversation": "pumps"})
    assert cleared.status_code == 202
