"""A gateway restarted between the turn's end and the reply going out (or in the middle of the
turn) replaces the turn's working placeholder with the answer: one message in the thread, and
no "… working" left behind. The first gateway's outbox is stopped (it "falls behind"), that
gateway stops, and a fresh one starts on the same store (the in-memory placeholder is gone, as
after a SIGKILL)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.gateway.adapters.slack.conftest import ALICE, SlackHarness, eventually
from vigil.gateway.adapters import previews
from vigil.gateway.adapters.slack.editing import WORKING
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import PENDING
from vigil.testing.scripting import Reply

PREFIX = "slack.preview."


@pytest.fixture(autouse=True)
def _quick_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(previews, "SETTLE", 0.1)


def store_of(h: SlackHarness) -> SQLiteStore:
    store = h.gateway.store
    assert isinstance(store, SQLiteStore)
    return store


def pending(h: SlackHarness, kind: str = "reply") -> bool:
    return any(e.kind == kind for e in store_of(h).gateway.outbox_list(statuses=(PENDING,)))


def shown(h: SlackHarness, channel: str, thread: str) -> list[str]:
    return h.fake.state.texts(channel, thread)


async def test_the_answer_replaces_the_placeholder_posted_before_a_restart(make_slack: Callable[..., Any]) -> None:
    h = await make_slack()
    await h.gateway.outbox.stop()  # the outbox has fallen behind: the reply waits in the store
    h.model.queue(Reply.text("All done, nothing to worry about."))
    mention = await h.sender.mention("C0OPS", ALICE, "check it")
    await eventually(lambda: pending(h) and shown(h, "C0OPS", mention.ts), what="the placeholder and the reply queued")
    [placeholder] = h.fake.state.posted("C0OPS", mention.ts)
    await h.serving.halt()
    assert pending(h), "the reply went out before the restart"

    h2 = await make_slack()
    await eventually(lambda: not pending(h2), what="the reply delivered by the new gateway")
    assert shown(h2, "C0OPS", mention.ts) == ["All done, nothing to worry about."]  # once, no "… working"
    assert [m.ts for m in h2.fake.state.posted("C0OPS", mention.ts)] == [placeholder.ts]
    assert WORKING not in h2.fake.state.texts()
    await eventually(lambda: not store_of(h2).list_meta(PREFIX), what="the placeholder's record deleted")


async def test_a_turn_cut_off_by_the_restart_answers_in_its_old_placeholder(make_slack: Callable[..., Any]) -> None:
    h = await make_slack()
    h.model.queue(Reply.text([f"w{n} " for n in range(200)], chunk_delay=0.03), "The whole answer.")
    sent = await h.sender.message("D0ALICE", ALICE, "think long")
    await eventually(lambda: h.fake.state.posted("D0ALICE"), what="the placeholder")
    [placeholder] = h.fake.state.posted("D0ALICE")
    await h.serving.halt()  # the turn is cut off: the message is answered at the next start
    assert h.stored(sent.event_id) is not None

    h2 = await make_slack()
    await eventually(lambda: h2.gateway.answered and not pending(h2), what="the resumed turn's answer")
    assert [(m.ts, m.text) for m in h2.fake.state.posted("D0ALICE")] == [(placeholder.ts, "The whole answer.")]
