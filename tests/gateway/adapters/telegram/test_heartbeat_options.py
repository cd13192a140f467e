"""Heartbeat options through the real gateway and the fake Telegram Bot API: ``HEARTBEAT_OK``
stays out of the chat but in the history, ``--loud`` delivers it, an ended heartbeat says so
in the chat, and a quiet window covering now holds the heartbeat back while another fires."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.gateway.adapters.telegram.conftest import FRIEND, OWNER, Factory, eventually
from vigil.store.gateway.gateway_tables import RouteKey

CHAT = RouteKey("telegram", str(OWNER))


@pytest.fixture(autouse=True)
def _fast_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")


def _answers(h, session_id: str) -> list[str]:
    return [m.content for m in h.store.get_messages(session_id) if m.role == "assistant" and m.content]


async def test_heartbeat_ok_is_stored_but_not_sent_to_the_chat(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.queue("HEARTBEAT_OK", "**HEARTBEAT_OK**", "The CI run failed: 2 tests.")
    h.model.set_default_reply("HEARTBEAT_OK")
    h.fake.message(OWNER, OWNER, "/heartbeat every 1s check the CI run")
    session = await eventually(lambda: h.route_session(CHAT), what="the conversation")
    await eventually(lambda: "The CI run failed: 2 tests." in h.fake.texts(OWNER), timeout=20, what="the real news")
    h.fake.message(OWNER, OWNER, "/heartbeat clear")
    await eventually(lambda: any("Heartbeat cleared" in t for t in h.fake.texts(OWNER)), what="cleared")
    texts = h.fake.texts(OWNER)
    assert texts[0].startswith("♥ Heartbeat set (every 1s): check the CI run")
    assert "HEARTBEAT_OK (nothing changed) is stored but not pushed to you" in texts[0]
    assert not any("HEARTBEAT_OK" in t for t in texts[1:]), texts  # never pushed, not even as a preview
    answers = _answers(h, session)
    assert answers[:3] == ["HEARTBEAT_OK", "**HEARTBEAT_OK**", "The CI run failed: 2 tests."]  # the history is whole
    asked = h.model.requests[0].body["messages"][-1]["content"]
    assert "answer exactly HEARTBEAT_OK" in str(asked)
    assert h.fake.actions(OWNER) == []  # no "typing…" for a heartbeat turn that may say nothing


async def test_a_loud_heartbeat_delivers_every_answer(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.set_default_reply("HEARTBEAT_OK")
    h.fake.message(OWNER, OWNER, "/heartbeat every 1s --loud check the CI run")
    await eventually(lambda: "HEARTBEAT_OK" in h.fake.texts(OWNER), timeout=20, what="a loud answer")
    assert "HEARTBEAT_OK" not in str(h.model.requests[0].body["messages"][-1]["content"])


async def test_an_ended_heartbeat_is_cleared_and_says_so_in_the_chat(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.set_default_reply("Deploy still running.")
    h.fake.message(OWNER, OWNER, "/heartbeat every 1s --for 3s watch the deploy")
    session = await eventually(lambda: h.route_session(CHAT), what="the conversation")
    ended = await eventually(
        lambda: [t for t in h.fake.texts(OWNER) if t.startswith("♥ Heartbeat ended")], timeout=20, what="the end note"
    )
    assert "watch the deploy" in ended[0]
    assert h.gateway.heartbeat_repo.get(session) is None
    notes = [m.content for m in h.store.get_messages(session) if m.role == "note"]
    assert notes == ended
    fired = len(h.model.requests)
    assert 1 <= fired <= 3
    h.fake.message(OWNER, OWNER, "/heartbeat")
    await eventually(lambda: any(t.startswith("No heartbeat") for t in h.fake.texts(OWNER)), what="status")
    # the model never saw the note: every request's history is made of user/assistant turns only
    assert all("Heartbeat ended" not in str(r.body["messages"]) for r in h.model.requests)


async def test_a_quiet_window_covering_now_holds_the_heartbeat_back(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.rule(contains="watch the quiet one", reply="quiet one ran")
    h.model.set_default_reply("Still going.")
    now = datetime.now().astimezone()
    window = f"{(now - timedelta(hours=1)):%H:%M}-{(now + timedelta(hours=2)):%H:%M}"
    h.fake.message(OWNER, OWNER, f"/heartbeat every 1s --quiet {window} --loud watch the quiet one")
    quiet = await eventually(lambda: h.route_session(CHAT), what="the quiet conversation")
    h.fake.message(FRIEND, FRIEND, "/heartbeat every 1s --loud watch the busy one")
    await eventually(lambda: h.fake.texts(FRIEND).count("Still going.") >= 3, timeout=20, what="three fires elsewhere")
    assert not any("watch the quiet one" in str(r.body["messages"]) for r in h.model.requests)
    heartbeat = h.gateway.heartbeat_repo.get(quiet)
    assert heartbeat.fire_count == 0 and heartbeat.quiet == window
    assert h.gateway.heartbeats.next_fire(quiet) == heartbeat.fire_at() > now.timestamp() + 3600
    h.fake.message(OWNER, OWNER, "/hb status")
    status = await eventually(lambda: [t for t in h.fake.texts(OWNER) if "(after the quiet window)" in t], what="status")
    assert f"quiet:     {window}" in status[0]
