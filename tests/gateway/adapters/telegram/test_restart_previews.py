"""A gateway restarted after the answer streamed into its preview, but before the outbox sent
the reply, finishes that preview: the user sees the answer once, in one message. The first
gateway's outbox is stopped (it "falls behind"), the gateway stops, and a fresh one starts on
the same store (the in-memory preview is gone, as after a SIGKILL)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.adapters.telegram.conftest import OWNER, Factory, TelegramHarness, eventually
from vigil.gateway.adapters import previews
from vigil.gateway.adapters.previews import DurablePreviews
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import PENDING, NewOutbound, RouteKey
from vigil.testing.scripting import Reply

PREFIX = "telegram.preview."


def replies_queued(h: TelegramHarness) -> bool:
    return any(e.kind == "reply" for e in h.store.gateway.outbox_list(statuses=(PENDING,)))


async def stalled_then_restarted(make_telegram: Factory, h: TelegramHarness) -> TelegramHarness:
    """Stop ``h`` (its reply still queued) and start a fresh gateway on the same store."""
    await h.gateway.stop(1.0)
    assert replies_queued(h), "the reply went out before the restart"
    return await make_telegram()


@pytest.fixture(autouse=True)
def _quick_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(previews, "SETTLE", 0.1)


async def test_an_answer_shown_before_a_restart_is_not_sent_again(make_telegram: Factory) -> None:
    h = await make_telegram()
    await h.gateway.outbox.stop()  # the outbox has fallen behind: the reply waits in the store
    # the whole answer at once, then the turn runs on past the first preview: it shows all of it
    h.model.queue(Reply.text(["The answer is 42.", ""], chunk_delay=0.5))
    h.fake.message(OWNER, OWNER, "what is the answer?")
    await eventually(lambda: h.fake.texts(OWNER) == ["The answer is 42."] and replies_queued(h),
                     what="the answer in the preview and its reply queued")
    [preview] = h.fake.sent(OWNER)

    h2 = await stalled_then_restarted(make_telegram, h)
    await eventually(lambda: not h2.outbox_pending(), what="the reply delivered by the new gateway")
    assert h2.fake.texts(OWNER) == ["The answer is 42."]  # once, not twice
    assert [m.message_id for m in h2.fake.sent(OWNER)] == [preview.message_id]
    assert len(h2.fake.calls("sendMessage")) == 1
    await eventually(lambda: not h2.store.list_meta(PREFIX), what="the preview's record deleted")


async def test_a_partial_preview_is_completed_after_a_restart(make_telegram: Factory) -> None:
    h = await make_telegram()
    await h.gateway.outbox.stop()
    words = [f"word{n} " for n in range(30)]
    h.model.queue(Reply.text(words, chunk_delay=0.02))
    h.fake.message(OWNER, OWNER, "a long answer please")
    await eventually(lambda: replies_queued(h), what="the reply queued")
    [preview] = h.fake.sent(OWNER)

    h2 = await stalled_then_restarted(make_telegram, h)
    await eventually(lambda: not h2.outbox_pending(), what="the reply delivered")
    [message] = h2.fake.sent(OWNER)
    assert message.message_id == preview.message_id and message.text == "".join(words)


async def test_a_turn_cut_off_by_the_restart_finishes_in_its_old_preview(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.queue(Reply.text([f"w{n} " for n in range(200)], chunk_delay=0.03), "The whole answer.")
    h.fake.message(OWNER, OWNER, "think long")
    await eventually(lambda: h.fake.texts(OWNER), what="the preview")
    await h.gateway.stop(0.05)  # the turn is cut off: its message is answered at the next start
    [preview] = h.fake.sent(OWNER)

    h2 = await make_telegram()
    await eventually(lambda: h2.gateway.answered and not h2.outbox_pending(), what="the resumed turn's answer")
    [message] = h2.fake.sent(OWNER)
    assert message.message_id == preview.message_id and message.text == "The whole answer."


async def test_records_of_finished_conversations_do_not_pile_up(make_telegram: Factory) -> None:
    h = await make_telegram()
    stale = {"chat": "999", "thread": "", "user": "", "message": 7, "input": "x", "kind": "user", "session": None}
    h.store.set_meta(PREFIX + "999.7", stale)  # left by a run long gone; chat 999 owes nothing
    h.model.queue("One.", "Two.")
    h.fake.message(OWNER, OWNER, "first")
    await h.answered(OWNER, 1)
    h.fake.message(OWNER, OWNER, "second")
    assert await h.answered(OWNER, 2) == ["One.", "Two."]
    await eventually(lambda: not h.store.list_meta(PREFIX + str(OWNER)), what="the delivered previews' records deleted")
    assert h.store.get_meta(PREFIX + "999.7") is not None  # only a start looks at old runs' records
    await h.gateway.stop(1.0)
    h2 = await make_telegram()
    assert h2.store.list_meta(PREFIX) == []
    assert h2.store.gateway.route_get(RouteKey("telegram", str(OWNER))) is not None



async def test_a_heartbeat_answer_streamed_before_a_restart_is_not_sent_again(
    make_telegram: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    h = await make_telegram()
    h.model.queue(Reply.text(["Deploy is ", "green."], chunk_delay=0.3))  # the preview shows the start
    h.model.set_default_reply("Still green.")
    h.fake.message(OWNER, OWNER, "/heartbeat every 1s --loud check the deploy")
    await eventually(lambda: h.fake.texts(OWNER), what="the command's answer")
    await h.gateway.outbox.stop()

    def first_heartbeat() -> int | None:
        queued = [e.id for e in h.store.gateway.outbox_list(statuses=(PENDING,)) if e.kind == "heartbeat"]
        return min(queued) if queued else None

    entry = await eventually(first_heartbeat, what="the heartbeat's answer queued")
    preview = h.fake.sent(OWNER)[1]
    assert preview.text.startswith("Deploy is")
    await h.gateway.stop(1.0)

    h2 = await make_telegram()
    await eventually(lambda: entry in {e.id for e in h2.store.gateway.outbox_list(statuses=("sent",))},
                     what="the heartbeat's answer delivered by the new gateway")
    texts = h2.fake.texts(OWNER)
    assert texts.count("Deploy is green.") == 1 and "Deploy is " not in texts
    assert h2.fake.sent(OWNER)[1].message_id == preview.message_id and h2.fake.sent(OWNER)[1].text == "Deploy is green."


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=8)
record_like = st.fixed_dictionaries({}, optional={
    "chat": json_values, "thread": json_values, "user": json_values, "message": json_values,
    "input": json_values, "kind": json_values, "session": json_values, "shown": json_values, "shown_len": json_values})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(json_values, record_like), owes=st.booleans())
def test_any_record_left_in_the_store_is_read_or_dropped_at_start(tmp_path_factory: pytest.TempPathFactory,
                                                                  value: object, owes: bool) -> None:
    store = SQLiteStore(tmp_path_factory.mktemp("store") / "state.db", durable=False)
    route = RouteKey("telegram", "5")
    try:
        store.set_meta(PREFIX + "5.1", value)
        if owes:  # chat 5 is owed an answer: a record that reads as its preview is kept
            entry = store.gateway.outbox_add(NewOutbound(route, "x", kind="heartbeat"), now=0.0)
        loaded = DurablePreviews("telegram", lambda: SimpleNamespace(store=store))  # the one part of a gateway it uses
        asyncio.run(loaded.load())
        kept = store.list_meta(PREFIX)
        assert not kept or (owes and isinstance(value, dict) and "chat" in value and "message" in value)
        if owes:
            asyncio.run(loaded.find(entry))
        loaded.adopt(route, "user", "")
    finally:
        store.close()
