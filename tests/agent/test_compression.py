"""Conversation compression over real HTTP against the fake model, for both API styles."""

from __future__ import annotations

import json
from typing import Any

from tests.agent.conftest import AgentFactory
from vigil.agent.compression import (
    FAILED_AT,
    RETRY_AFTER_MESSAGES,
    SUMMARY_REQUEST_MARKER,
    choose_split,
    render_transcript,
)
from vigil.agent.events import Compressed, TurnEvent
from vigil.agent.turn import Agent, TurnResult
from vigil.config.settings import AgentSettings, Settings, ToolSettings
from vigil.store.records import MessageRecord, ToolCall
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.records import RecordedRequest
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.usage import Usage

FILL = "lorem ipsum dolor sit amet " * 7
SUMMARY = (
    "## Goal\nPlan the cedar garden beds.\n## Decisions\nRaised beds, drip irrigation.\n"
    "## Progress\nLayout drafted.\n## Open items\nOrder the soil.\n## Relevant files\nnone"
)
TOOLS = ["read_file", "write_file"]


def small_window(tools: list[str] = TOOLS) -> Settings:
    """Compression at 1000 estimated tokens: about six turns of the conversations below."""
    return Settings(
        agent=AgentSettings(compression_threshold=0.5), tools=ToolSettings(enabled=tools)
    )


async def small_agent(make_agent: AgentFactory, tools: list[str] = TOOLS) -> Agent:
    return await make_agent(settings=small_window(tools), context_window=2000)


def turn_text(i: int) -> str:
    return f"turn {i}: {FILL}"


async def chat(agent: Agent, session_id: str, turns: range, **kwargs: Any) -> list[TurnResult]:
    """Run one turn per number, following the conversation into continuations."""
    results = []
    for i in turns:
        result = await agent.run_turn(session_id, turn_text(i), **kwargs)
        session_id = result.session_id
        results.append(result)
    return results


def summary_calls(fake_model: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in fake_model.requests if SUMMARY_REQUEST_MARKER in r.last_user_text]


def same_message(copy: MessageRecord, original: MessageRecord) -> bool:
    return (copy.role, copy.content, copy.tool_calls, copy.tool_call_id, copy.tool_name) == (
        original.role, original.content, original.tool_calls, original.tool_call_id, original.tool_name
    )


def assert_calls_closed(messages: list[MessageRecord]) -> None:
    """Every assistant tool call is followed, before anything else, by its results."""
    for i, message in enumerate(messages):
        if message.role == "tool":
            assert i > 0 and messages[i - 1].role in ("assistant", "tool"), "orphaned tool result"
        if message.tool_calls:
            results = messages[i + 1 : i + 1 + len(message.tool_calls)]
            assert [r.tool_call_id for r in results] == [c.id for c in message.tool_calls]


async def test_long_conversation_compresses_into_a_continuation(
    make_agent: AgentFactory, fake_model: FakeModelServer, provider: str
) -> None:
    agent = await small_agent(make_agent)
    agent.profile.soul_path.write_text(f"Persona version one. {FILL * 3}")
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply=SUMMARY)
    fake_model.rule(contains="turn 6:", reply="sixth answer, from the continuation")
    fake_model.set_default_reply("answer " + FILL)
    started: list[str] = []
    agent.session_start_hooks.append(lambda s: started.append(s.id))
    root = await agent.new_session()

    early = await chat(agent, root.id, range(1, 6))
    assert all(r.session_id == root.id and r.compressed_from is None for r in early)
    assert not summary_calls(fake_model)
    before = agent.store.get_messages(root.id)

    # The compression turn runs on a restarted agent whose config offers other tools: the
    # continuation keeps the conversation's pinned ones.
    agent.profile.soul_path.write_text(f"Persona version two. {FILL * 3}")
    restarted = await small_agent(make_agent, tools=["read_file"])
    hooked: list[tuple[str, str]] = []

    async def moved(parent_id: str, child_id: str) -> None:
        hooked.append((parent_id, child_id))

    restarted.compression_hooks.append(moved)
    events: list[TurnEvent] = []
    result = await restarted.run_turn(root.id, turn_text(6), on_event=events.append)

    parent = agent.store.get_session(root.id)
    child = agent.store.get_session(result.session_id)
    assert result.compressed_from == root.id and child.id != root.id
    assert result.answer == "sixth answer, from the continuation"
    assert parent.end_reason == "compression" and child.end_reason is None
    assert child.parent_id == root.id and child.title == parent.title == turn_text(1)[:59] + "…"
    assert child.tool_names == parent.tool_names == tuple(TOOLS)
    assert child.source == parent.source and child.model == parent.model
    assert child.model_config["cwd"] == parent.model_config["cwd"]
    assert child.model_config["compressed_from"] == root.id
    # the prompt bookkeeping is the child's own: one fresh build on its first turn
    assert [e["reason"] for e in child.model_config["prompt_events"]] == ["new session"]
    assert [e for e in events if isinstance(e, Compressed)] == [Compressed(root.id, child.id, "auto")]
    assert hooked == [(root.id, child.id)]
    assert started == [root.id]  # no session-start hook for a continuation

    # the parent is untouched; the child holds summary, kept messages, then this turn
    assert agent.store.get_messages(root.id) == before
    messages = agent.store.get_messages(child.id)
    assert messages[0].role == "summary"
    assert messages[0].content.startswith(f"[Summary of the earlier conversation (session {root.id})]")
    assert SUMMARY in messages[0].content
    kept = messages[1:-2]
    assert kept and kept[0].role == "user" and len(kept) < len(before)
    assert all(same_message(c, o) for c, o in zip(kept, before[-len(kept):], strict=True))
    assert [(m.role, m.content) for m in messages[-2:]] == [
        ("user", turn_text(6)), ("assistant", "sixth answer, from the continuation"),
    ]

    # the summary call saw the older turns, not the kept ones, and no tools
    (summary_call,) = summary_calls(fake_model)
    assert "turn 1:" in summary_call.last_user_text
    assert kept[0].content not in summary_call.last_user_text
    assert "tools" not in summary_call.body

    # the answering request: summary and kept turns, no old turns, a freshly built prompt
    answering = fake_model.requests[-1]
    assert answering.index == summary_call.index + 1 and answering.last_user_text == turn_text(6)
    body = json.dumps(answering.body)
    assert "Plan the cedar garden beds." in body and kept[0].content in body
    assert "turn 1:" not in body
    assert "Persona version two." in body and "Persona version one." not in body
    assert "write_file" in body  # the pinned tools, not the restarted agent's
    assert "Persona version two." in agent.store.get_prompt(child.system_prompt_hash)
    parent_prompt = agent.store.get_prompt(parent.system_prompt_hash)
    assert "Persona version one." in parent_prompt and "version two" not in parent_prompt

    # the conversation goes on in the child, replaying its prompt: a full cached prefix
    fake_model.rule(contains="turn 7:", reply="seventh answer")
    (seventh,) = await chat(restarted, child.id, range(7, 8))
    assert seventh.session_id == child.id and seventh.compressed_from is None
    assert seventh.answer == "seventh answer"
    assert fake_model.requests[-1].full_prefix_hit
    assert len(summary_calls(fake_model)) == 1


async def test_a_second_compression_summarises_the_first_summary(
    make_agent: AgentFactory, fake_model: FakeModelServer, provider: str
) -> None:
    agent = await small_agent(make_agent)
    first, second = SUMMARY, SUMMARY.replace("Layout drafted.", "Beds built; soil ordered.")
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply=first, times=1)
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply=second, times=1)
    fake_model.set_default_reply("answer " + FILL)
    root = await agent.new_session()

    results = await chat(agent, root.id, range(1, 12))
    compressed = [r for r in results if r.compressed_from is not None]
    assert len(compressed) == 2
    newest = results[-1].session_id
    chain = agent.store.parent_chain(newest)
    assert [s.id for s in chain] == [root.id, compressed[0].session_id, newest]
    assert [s.end_reason for s in chain] == ["compression", "compression", None]
    assert agent.store.newest_continuation(root.id) == newest

    calls = summary_calls(fake_model)
    assert len(calls) == 2
    assert "Layout drafted." in calls[1].last_user_text  # the earlier summary, summarised again
    messages = agent.store.get_messages(newest)
    assert [m.role for m in messages].count("summary") == 1
    assert "Beds built; soil ordered." in messages[0].content and "Layout drafted." not in messages[0].content


async def test_tool_calls_are_never_separated_from_their_results(
    make_agent: AgentFactory, fake_model: FakeModelServer, provider: str
) -> None:
    agent = await small_agent(make_agent)
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply=SUMMARY)
    big = "x" * 1200  # the last turn alone is larger than the share kept verbatim
    for i in range(1, 5):
        calls = [ToolCallSpec("write_file", {"path": f"note{i}.txt", "content": f"note {i}"}, id=f"call_{i}")]
        if i == 4:
            calls += [
                ToolCallSpec("write_file", {"path": "big.txt", "content": big}, id="call_big"),
                ToolCallSpec("read_file", {"path": "big.txt"}, id="call_read"),
            ]
        fake_model.rule(contains=f"turn {i}:", reply=Reply.tool_calls(*calls), times=1)
    fake_model.set_default_reply("done")
    root = await agent.new_session()
    results, session_id = [], root.id
    for i in range(1, 6):
        results.append(await agent.run_turn(session_id, f"turn {i}: write the notes"))
        session_id = results[-1].session_id

    (compressing,) = [r for r in results if r.compressed_from is not None]
    assert compressing is results[-1]
    before = agent.store.get_messages(root.id)
    messages = agent.store.get_messages(compressing.session_id)
    kept = messages[1:-2]
    # exactly the last user turn is kept, whole: its three tool calls and all their results
    last_turn = before[max(i for i, m in enumerate(before) if m.role == "user"):]
    assert len(kept) == len(last_turn) and all(map(same_message, kept, last_turn))
    assert [m.role for m in kept] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert_calls_closed(messages)
    assert_calls_closed(before[: len(before) - len(kept)])
    assert "call_big" in json.dumps(fake_model.requests[-1].body)


async def test_failed_summary_keeps_the_conversation_and_holds_off_retries(
    make_agent: AgentFactory, fake_model: FakeModelServer, provider: str
) -> None:
    agent = await small_agent(make_agent)
    # one attempt is four calls (three retries); after that the summary would work
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply=Reply.error(500), times=4)
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply=SUMMARY)
    fake_model.set_default_reply("answer " + FILL)
    root = await agent.new_session()
    events: list[TurnEvent] = []

    results = await chat(agent, root.id, range(1, 7), on_event=events.append)
    assert len(summary_calls(fake_model)) == 4
    assert all(r.session_id == root.id and r.compressed_from is None for r in results)
    assert results[-1].answer.startswith("answer") and results[-1].stop == "answered"
    session = agent.store.get_session(root.id)
    assert session.end_reason is None and len(agent.store.list_sessions()) == 1
    failed_at = session.model_config[FAILED_AT]
    assert failed_at == 10  # five turns were stored when the sixth tried
    assert not any(isinstance(e, Compressed) for e in events)

    # still over the budget, but no retry until the conversation grew by enough messages
    turns_to_wait = RETRY_AFTER_MESSAGES // 2
    held = await chat(agent, root.id, range(7, 7 + turns_to_wait - 1))
    assert all(r.session_id == root.id for r in held)
    assert len(summary_calls(fake_model)) == 4
    (retried,) = await chat(agent, root.id, range(7 + turns_to_wait - 1, 7 + turns_to_wait))
    assert retried.compressed_from == root.id and len(summary_calls(fake_model)) == 5
    child = agent.store.get_session(retried.session_id)
    assert FAILED_AT not in child.model_config


async def test_empty_summary_is_a_failure(
    make_agent: AgentFactory, fake_model: FakeModelServer, provider: str
) -> None:
    agent = await make_agent()
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply=Reply.text(""))
    root = await agent.new_session()
    await chat(agent, root.id, range(1, 4))

    outcome = await agent.compress(root.id)
    assert not outcome.ok and outcome.child_id is None and "empty summary" in (outcome.failure or "")
    assert agent.store.get_session(root.id).end_reason is None
    assert len(agent.store.list_sessions()) == 1
    (after,) = await chat(agent, root.id, range(4, 5))
    assert after.session_id == root.id and after.answer == "ok"


async def test_manual_compress_below_the_threshold(
    make_agent: AgentFactory, fake_model: FakeModelServer, provider: str
) -> None:
    agent = await make_agent()  # the default 128k window: nowhere near the threshold
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply=SUMMARY)
    root = await agent.new_session()

    alone = await agent.compress(root.id)  # nothing said yet
    assert not alone.ok and "nothing to summarise" in (alone.failure or "")
    await chat(agent, root.id, range(1, 2))
    single = await agent.compress(root.id)  # the last turn is always kept
    assert not single.ok and not summary_calls(fake_model)
    assert FAILED_AT not in agent.store.get_session(root.id).model_config

    await chat(agent, root.id, range(2, 4))
    assert all(r.compressed_from is None for r in await chat(agent, root.id, range(4, 5)))
    hooked: list[tuple[str, str]] = []
    agent.compression_hooks.append(lambda p, c: hooked.append((p, c)))
    agent.compression_hooks.append(lambda p, c: 1 / 0)  # a broken hook does not undo anything
    events: list[TurnEvent] = []
    outcome = await agent.compress(root.id, on_event=events.append)

    assert outcome.ok and outcome.parent_id == root.id and outcome.reason == "manual"
    assert outcome.summary == SUMMARY and outcome.usage.output_tokens > 0
    assert events == [Compressed(root.id, outcome.child_id, "manual")]
    assert hooked == [(root.id, outcome.child_id)]
    messages = agent.store.get_messages(outcome.child_id)
    assert outcome.summarised + outcome.kept == len(agent.store.get_messages(root.id)) == 8
    assert len(messages) == 1 + outcome.kept and outcome.kept >= 2

    # a turn addressed to the compressed session lands in its continuation
    fake_model.rule(contains="turn 5:", reply="fifth answer")
    result = await agent.run_turn(root.id, turn_text(5))
    assert result.session_id == outcome.child_id and result.compressed_from is None
    assert result.answer == "fifth answer"
    again = await agent.compress(root.id)  # follows too, and compresses the continuation
    assert again.ok and again.parent_id == outcome.child_id


def _record(seq: int, role: str, content: str = "x", calls: tuple[ToolCall, ...] = ()) -> MessageRecord:
    return MessageRecord(
        id=seq, session_id="s", seq=seq, role=role, content=content, tool_calls=calls,
        tool_call_id=None, tool_name=None, created_at=0.0, usage=Usage(), meta={},
    )


def test_split_points_are_user_messages_only() -> None:
    call = (ToolCall("c1", "read_file", "{}"),)
    records = [
        _record(1, "summary", "s" * 400),
        _record(2, "user"), _record(3, "assistant", "", call), _record(4, "tool"), _record(5, "assistant"),
        _record(6, "user"), _record(7, "assistant", "", call), _record(8, "tool", "t" * 4000),
        _record(9, "assistant"),
    ]
    assert choose_split(records, keep_tokens=10_000) == 5  # all fits, but one turn must go
    assert choose_split(records, keep_tokens=10) == 5  # the last turn stays, however large
    assert choose_split(records[:5], keep_tokens=10) is None  # only the summary is older
    assert choose_split(records[1:], keep_tokens=10_000) == 4
    assert choose_split([_record(1, "assistant")], keep_tokens=10) is None



def test_transcript_keeps_the_earlier_summary_and_drops_the_oldest_messages_for_length() -> None:
    records = [_record(1, "summary", "[Summary of the earlier conversation (session p)]\nGoal: beds")]
    records += [_record(i, "user", f"message {i} " + "y" * 300) for i in range(2, 40)]
    records.append(_record(40, "tool", "z" * 50_000))
    text = render_transcript(records, char_budget=6_000)
    assert len(text) <= 6_000
    assert text.startswith("[summary of the conversation before this transcript]") and "Goal: beds" in text
    assert "earlier message(s) left out for length" in text
    assert "message 2 " not in text and "message 39 " in text
    assert "characters omitted" in text  # the huge tool result was cut in the middle
