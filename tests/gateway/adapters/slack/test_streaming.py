"""The answer appears progressively in one message, edited at most once a second, after a
working indicator; the final answer replaces it."""

from __future__ import annotations


from tests.gateway.adapters.slack.conftest import ALICE, SlackHarness, eventually
from vigil.gateway.adapters.slack.editing import WORKING
from vigil.testing.scripting import Reply

ANSWER = "The **first** part, then the second part, and at last the end of it."


async def test_a_streamed_answer_edits_one_message_throttled(slack: SlackHarness) -> None:
    slack.model.queue(Reply.text(ANSWER, chunk_delay=0.15))
    mention = await slack.sender.mention("C0OPS", ALICE, "tell me slowly")
    placeholder = (await eventually(lambda: slack.fake.state.posted("C0OPS", mention.ts), what="the indicator"))[0]
    assert placeholder.text == WORKING  # shown while the agent works
    final = "The *first* part, then the second part, and at last the end of it."
    await eventually(lambda: placeholder.text == final, what="the final answer")
    assert len(slack.fake.state.posted("C0OPS", mention.ts)) == 1  # one message, edited
    partial = placeholder.edits[:-1]
    assert len(partial) >= 2, placeholder.edits  # it grew while streaming
    assert all(final.startswith(edit.removesuffix(" …")) for edit in partial)
    updates = [c.at for c in slack.fake.state.calls_of("chat.update")]
    assert all(b - a >= 0.95 for a, b in zip(updates, updates[1:], strict=False)), updates


async def test_a_turn_with_nothing_to_say_removes_its_indicator(slack: SlackHarness) -> None:
    slack.model.queue(Reply.text(""))
    sent = await slack.sender.message("D0ALICE", ALICE, "say nothing")
    await eventually(lambda: slack.fake.state.calls_of("chat.postMessage"), what="the indicator")
    await eventually(lambda: slack.fake.state.calls_of("chat.delete") or slack.answers("D0ALICE"),
                     what="the indicator removed or an answer")
    assert WORKING not in slack.fake.state.texts("D0ALICE")
    assert slack.stored(sent.event_id) is not None


async def test_a_long_answer_is_split_in_the_thread_and_a_retry_posts_no_part_twice(slack: SlackHarness) -> None:
    paragraphs = [f"Paragraph {n}: " + "all work and no play " * 60 for n in range(9)]
    slack.model.queue(Reply.text("\n\n".join(paragraphs), delay=0.5))
    mention = await slack.sender.mention("C0OPS", ALICE, "write a lot")
    await eventually(lambda: slack.fake.state.posted("C0OPS", mention.ts), what="the indicator")
    slack.fake.state.fault(status=503, count=1, method="chat.postMessage")  # the second part fails once
    parts = await eventually(lambda: len(slack.answers("C0OPS", mention.ts)) >= 4 and slack.answers("C0OPS", mention.ts),
                             what="every part")
    await eventually(slack.settled, what="nothing left to send")
    parts = slack.answers("C0OPS", mention.ts)
    assert all(len(part) <= 3_500 for part in parts)
    assert "".join(parts).replace("\n", "").replace(" ", "") == "".join(paragraphs).replace(" ", "")  # in order, once
    assert [c.status for c in slack.fake.state.calls_of("chat.postMessage")].count(503) == 1
