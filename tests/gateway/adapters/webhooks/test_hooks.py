"""Webhooks inside a real gateway (see ``conftest``): a signed request is stored and answered
at the hook's url, signed; a conversation key keeps a conversation; what is not signed, not
fresh or not for a hook is refused with a JSON error and nothing stored; deliveries are retried
through the outbox while the url fails, and given up at once when it refuses."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from tests.gateway.adapters.webhooks.conftest import HooksHarness
from tests.gateway.adapters.webhooks.receiver import signed
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.testing.waiting import eventually


async def test_a_signed_request_is_answered_at_the_hooks_url_signed(hooks: HooksHarness, fake_model: FakeModelServer) -> None:
    fake_model.set_default_reply("the lights are on")
    response = await hooks.post({"text": "are the lights on?", "conversation": "kitchen"}, delivery="msg_1")
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["accepted"] and not body["duplicate"] and body["conversation"] == "kitchen" and body["inbox_id"] > 0
    [answer] = await eventually(lambda: hooks.receiver.replies_to("msg_1"), what="the answer at the url")
    assert answer.genuine, "the delivery's signature must match the hook's secret"
    assert answer.body["kind"] == "reply" and answer.body["text"] == "the lights are on"
    assert answer.body["hook"] == "ha" and answer.body["conversation"] == "kitchen"
    assert answer.headers["webhook-id"].startswith("vigil_")
    assert abs(int(answer.headers["webhook-timestamp"]) - time.time()) < 60


async def test_the_same_key_continues_one_conversation_and_no_key_starts_one(hooks: HooksHarness) -> None:
    first = (await hooks.post({"text": "one", "conversation": "garden"})).json()
    await eventually(lambda: hooks.receiver.texts("garden"), what="the first answer")
    second = (await hooks.post({"text": "two", "conversation": "garden"})).json()
    alone = (await hooks.post({"text": "three"}, delivery="build-42")).json()
    assert first["session_id"] and second["session_id"] == first["session_id"]
    assert alone["conversation"] == "build-42" and alone["session_id"] != first["session_id"]
    assert (await hooks.post({"text": "four", "conversation": "build-42"})).json()["session_id"] == alone["session_id"]


async def test_data_is_shown_to_the_agent_after_the_text(hooks: HooksHarness, fake_model: FakeModelServer) -> None:
    response = await hooks.post({"text": "the build failed", "data": {"job": "tests", "exit": 2}}, delivery="ci-7")
    assert response.status_code == 202
    await eventually(lambda: hooks.receiver.replies_to("ci-7"), what="the answer")
    told = json.dumps(fake_model.requests[-1].body["messages"][-1])
    assert "the build failed" in told and '\\"job\\": \\"tests\\"' in told


async def test_forged_stale_and_misaddressed_requests_are_refused_and_nothing_is_stored(
    hooks: HooksHarness, fake_model: FakeModelServer
) -> None:
    payload = {"text": "open the door"}
    body = json.dumps(payload).encode()
    cases = {
        "wrong secret": (await hooks.post(payload, secret="not-the-secret"), 401, "bad_signature"),
        "unsigned": (await hooks.post_raw(body, {"content-type": "application/json"}), 401, "unsigned"),
        "body changed": (await hooks.post_raw(b'{"text": "open all doors"}', signed("s3cret-for-the-tests", body)),
                         401, "bad_signature"),
        "stale": (await hooks.post(payload, timestamp=int(time.time()) - 3600), 401, "stale"),
        "from the future": (await hooks.post(payload, timestamp=int(time.time()) + 3600), 401, "stale"),
        "bad id": (await hooks.post(payload, delivery="no spaces please"), 400, "bad_id"),
        "unknown hook": (await hooks.post(payload, hook="nope"), 404, "no_hook"),
        "not JSON": (await hooks.post_raw(b"{text", signed("s3cret-for-the-tests", b"{text")), 400, "not_json"),
        "no text": (await hooks.post({"conversation": "x"}), 422, "no_text"),
        "typo": (await hooks.post({"txt": "hi"}), 422, "unknown_field"),
        "bad key": (await hooks.post({"text": "hi", "conversation": "a b"}), 422, "bad_conversation"),
        "too large": (await hooks.post({"text": "x" * 300_000}), 413, "too_large"),
    }
    for what, (response, status, code) in cases.items():
        assert response.status_code == status, (what, response.text)
        assert response.json()["error"]["code"] == code, what
    async with httpx.AsyncClient(base_url=hooks.url, trust_env=False) as client:
        got = await client.get("/hooks/ha")
    assert got.status_code == 405 and got.json()["error"]["code"] == "method"
    assert hooks.count("gateway_inbox") == 0 and fake_model.requests == []


async def test_a_delivery_the_url_fails_is_retried_and_one_it_refuses_is_given_up(
    hooks: HooksHarness, fake_model: FakeModelServer
) -> None:
    fake_model.set_default_reply("done")
    hooks.receiver.refusals[:] = [503]
    assert (await hooks.post({"text": "retry me"}, delivery="r1")).status_code == 202
    [answer] = await eventually(lambda: hooks.receiver.replies_to("r1"), what="the answer after a retry")
    assert answer.genuine and hooks.receiver.refused == 1

    hooks.receiver.refusals[:] = [400]
    assert (await hooks.post({"text": "refuse me"}, delivery="r2")).status_code == 202
    def failed() -> list[str]:
        return [e.last_error or "" for e in hooks.outbox("failed")]

    [error] = await eventually(failed, what="the refused delivery marked failed")
    assert "answered HTTP 400" in error and hooks.receiver.refused == 2
    assert hooks.receiver.replies_to("r2") == []


async def test_a_hook_without_a_url_keeps_its_answers_in_the_conversation(
    hooks: HooksHarness, fake_model: FakeModelServer
) -> None:
    fake_model.set_default_reply("noted")
    response = await hooks.post({"text": "log this", "conversation": "log"}, hook="quiet")
    assert response.status_code == 202
    session = response.json()["session_id"]
    view = await eventually(lambda: _answered(hooks, session), what="the answer in the conversation")
    assert view == ["noted"] and hooks.receiver.deliveries == []
    assert [e.route.chat for e in hooks.outbox("sent")] == ["quiet"]


def _answered(hooks: HooksHarness, session: str) -> list[str]:
    return [e.text for e in hooks.outbox("sent") if e.session_id == session and e.kind == "reply"]


async def test_a_command_waiting_for_approval_is_told_to_the_url(
    hooks: HooksHarness, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    target = tmp_path / "disk"
    target.mkdir()
    command = f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"
    fake_model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": command})), "done as you said")
    assert (await hooks.post({"text": "format the spare disk", "conversation": "ops"}, delivery="fmt")).status_code == 202
    [asked] = await eventually(lambda: hooks.receiver.texts("ops", "approval_request"), what="the approval request")
    [request] = [d for d in hooks.receiver.deliveries if d.body["kind"] == "approval_request"]
    assert request.genuine and "mkfs.ext4" in asked and "web chat" in asked
    assert hooks.run.gateway.resolve_approval(request.body["approval"]["id"], False)  # as the web chat does
    await eventually(lambda: hooks.receiver.replies_to("fmt"), what="the answer after the denial")
    assert not (target / "ran").exists()
