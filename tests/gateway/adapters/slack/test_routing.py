"""Where Slack messages go and where their answers land: DMs, channel mentions, threads, one
conversation per thread and person; redeliveries answered once."""

from __future__ import annotations

import time

from tests.gateway.adapters.slack.conftest import ALICE, BOB, SlackHarness, eventually
from vigil.gateway.adapters.slack.editing import WORKING
from vigil.testing.slack_api.events import Sent
from vigil.testing.scripting import Reply


def session_of(h: SlackHarness, sent: Sent) -> str:
    entry = h.stored(sent.event_id)
    assert entry is not None
    return entry.session_id or ""


async def answered(h: SlackHarness, channel: str, thread: str | None, count: int = 1) -> list[str]:
    return await eventually(lambda: len(h.answers(channel, thread)) >= count and h.answers(channel, thread),
                            what=f"{count} answer(s) in {channel} {thread}")


async def test_a_dm_is_answered_in_the_dm_and_its_threads_are_their_own_conversations(slack: SlackHarness) -> None:
    slack.model.queue("hello Alice", "in the thread", "top level again")
    first = await slack.sender.message("D0ALICE", ALICE, "hi there")
    assert first.response.status_code == 200
    assert await answered(slack, "D0ALICE", "") == ["hello Alice"]
    threaded = await slack.sender.message("D0ALICE", ALICE, "a side question", thread_ts=first.ts)
    assert await answered(slack, "D0ALICE", first.ts) == ["in the thread"]
    again = await slack.sender.message("D0ALICE", ALICE, "back to the main chat")
    assert await answered(slack, "D0ALICE", "", 2) == ["hello Alice", "top level again"]
    assert session_of(slack, first) == session_of(slack, again) != session_of(slack, threaded)
    assert slack.model.requests[2].last_user_text == "back to the main chat"


async def test_a_channel_mention_is_answered_in_a_thread_on_it_and_the_thread_goes_on(slack: SlackHarness) -> None:
    slack.model.queue("**Deploy** is _green_: see [the board](https://ci.example/board?a=1&b=2)", "still green")
    mention = await slack.sender.mention("C0OPS", ALICE, "how is the deploy?")
    assert (await slack.model.wait_for_requests_async(1))[0].last_user_text == "how is the deploy?"  # the mention is cut
    assert await answered(slack, "C0OPS", mention.ts) == [
        "*Deploy* is _green_: see <https://ci.example/board?a=1&amp;b=2|the board>"
    ]
    assert slack.answers("C0OPS", "") == []  # nothing at the channel's top level
    reply = await slack.sender.message("C0OPS", ALICE, "and now?", thread_ts=mention.ts)
    assert await answered(slack, "C0OPS", mention.ts, 2)
    assert session_of(slack, reply) == session_of(slack, mention)


async def test_in_a_channel_only_mentions_and_known_threads_are_for_the_agent(slack: SlackHarness) -> None:
    chatter = await slack.sender.message("C0OPS", ALICE, "lunch anyone?")
    elsewhere = await slack.sender.message("C0OPS", ALICE, "+1", thread_ts=chatter.ts)
    own = await slack.sender.event({"type": "message", "user": slack.fake.state.bot_user, "text": "I said",
                                    "ts": slack.fake.state.new_ts(), "channel": "D0ALICE", "channel_type": "im"})
    bot = await slack.sender.event({"type": "message", "bot_id": "B0OTHER", "text": "beep", "ts": "1.2",
                                    "channel": "D0ALICE", "channel_type": "im", "subtype": "bot_message"})
    for sent in (chatter, elsewhere, own, bot):
        assert sent.response.status_code == 200
        assert slack.stored(sent.event_id) is None
    assert slack.model.requests == []


async def test_each_person_in_a_thread_has_their_own_conversation(slack: SlackHarness) -> None:
    slack.model.queue("for Alice", "for Bob")
    alice = await slack.sender.mention("C0OPS", ALICE, "my question")
    await answered(slack, "C0OPS", alice.ts)
    bob = await slack.sender.mention("C0OPS", BOB, "mine too", thread_ts=alice.ts)
    assert await answered(slack, "C0OPS", alice.ts, 2) == ["for Alice", "for Bob"]
    assert session_of(slack, alice) != session_of(slack, bob)
    assert slack.stored(bob.event_id).sender == BOB


async def test_a_redelivery_of_an_answered_event_gets_no_second_answer(slack: SlackHarness) -> None:
    slack.model.queue("the one answer")
    sent = await slack.sender.message("D0ALICE", ALICE, "answer me once")
    await answered(slack, "D0ALICE", "")
    for retry in (1, 2, 3):
        again = await slack.sender.resend(sent, retry)
        assert again.status_code == 200
    await slack.sender.message("D0ALICE", ALICE, "answer me once", event_id=sent.event_id, ts=sent.ts)
    slack.model.queue("the second message")
    await slack.sender.message("D0ALICE", ALICE, "something new")
    assert await answered(slack, "D0ALICE", "", 2) == ["the one answer", "the second message"]
    assert len(slack.model.requests) == 2


async def test_slack_is_acknowledged_at_once_while_the_agent_thinks(slack: SlackHarness) -> None:
    slack.model.queue(Reply.text("worth the wait", delay=1.5))
    started = time.monotonic()
    sent = await slack.sender.message("D0ALICE", ALICE, "a hard question")
    assert sent.response.status_code == 200 and time.monotonic() - started < 1.0  # Slack waits 3 s at most
    assert slack.stored(sent.event_id) is not None
    assert slack.fake.state.texts("D0ALICE") == [WORKING] or not slack.answers("D0ALICE")
    assert await answered(slack, "D0ALICE", "") == ["worth the wait"]
