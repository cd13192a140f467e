"""The stored system prompt: replayed verbatim, refreshed on request, repaired when damaged."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.agent.conftest import AgentFactory
from tests.cli.helpers import run_cli
from vigil.prompt.epoch import REFRESH_KEY
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.records import RecordedRequest
from vigil.testing.scripting import Reply, ToolCallSpec


def _system_segment(request: RecordedRequest) -> bytes:
    return request.segments[0]


def _extends_cached(previous: RecordedRequest, current: RecordedRequest) -> bool:
    """``current`` starts with all of ``previous`` and the provider served that from cache."""
    n = len(previous.segments)
    return current.segments[:n] == previous.segments and current.cached_tokens >= sum(previous.segment_tokens)


async def test_twenty_turns_replay_the_same_prompt_bytes(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    agent = await make_agent()
    session = await agent.new_session()
    for i in range(20):
        if i == 7:
            fake_model.queue(Reply.tool_calls(ToolCallSpec("skills_list", {})), "listed")
        else:
            fake_model.queue(f"answer {i}")
        await agent.run_turn(session.id, f"message {i}")
    systems = {_system_segment(r) for r in fake_model.requests}
    assert len(systems) == 1
    assert all(r.full_prefix_hit for r in fake_model.requests[1:])


async def test_soul_edit_waits_for_refresh_then_costs_one_miss(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    agent.profile.soul_path.write_text("You are Old Persona.")
    first = await agent.new_session()
    second = await agent.new_session()
    last: dict[str, RecordedRequest] = {}
    for session in (first, second):
        for i in range(2):
            fake_model.queue("fine")
            await agent.run_turn(session.id, f"{session.id} turn {i}")
            last[session.id] = fake_model.last_request
    tools_before = agent.store.get_session(first.id).tool_names
    history_before = [m.content for m in agent.store.get_messages(first.id)]

    agent.profile.soul_path.write_text("You are New Persona.")
    fake_model.queue("still old")
    await agent.run_turn(first.id, "after edit")
    assert b"Old Persona" in _system_segment(fake_model.last_request)
    assert _extends_cached(last[first.id], fake_model.last_request)

    result = run_cli("sessions", "refresh-prompts")
    assert result.exit_code == 0
    assert "every session in this profile (2 session(s) with a stored prompt)" in result.output
    assert "conversation history is kept" in result.output

    # the same long-running agent (history and prompt in memory) honours it without restart
    start = len(fake_model.requests)
    fake_model.queue(Reply.tool_calls(ToolCallSpec("skills_list", {})), "refreshed")
    await agent.run_turn(first.id, "after refresh")
    refresh_turn = fake_model.requests[start:]
    assert all(b"New Persona" in _system_segment(r) for r in refresh_turn)
    misses = [r for r in refresh_turn if r.cached_tokens == 0]
    assert len(misses) == 1 and misses[0] is refresh_turn[0]
    assert _extends_cached(refresh_turn[0], refresh_turn[1])
    fake_model.queue("hit again")
    await agent.run_turn(first.id, "next")
    assert fake_model.last_request.full_prefix_hit
    assert b"New Persona" in _system_segment(fake_model.last_request)

    # a process started later honours the same request for the other session, once
    later = await make_agent()
    fake_model.queue("second refreshed")
    await later.run_turn(second.id, "hello again")
    assert b"New Persona" in _system_segment(fake_model.last_request)
    assert fake_model.last_request.cached_tokens == 0 or fake_model.last_request.segments[:1] != last[second.id].segments[:1]
    assert fake_model.last_request.cached_tokens < sum(last[second.id].segment_tokens)
    fake_model.queue("and cached")
    await later.run_turn(second.id, "once more")
    assert fake_model.last_request.full_prefix_hit

    after = agent.store.get_session(first.id)
    assert after.tool_names == tools_before and after.id == first.id
    assert [m.content for m in agent.store.get_messages(first.id)][: len(history_before)] == history_before


async def test_new_sessions_after_a_request_do_not_rebuild_again(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    run_cli("sessions", "refresh-prompts")
    rebuilt: list[str] = []
    session = await agent.new_session()
    for i in range(3):
        fake_model.queue("ok")
        await agent.run_turn(session.id, f"t{i}", on_event=lambda e: rebuilt.append(getattr(e, "reason", "")) if type(e).__name__ == "PromptRebuilt" else None)
    assert rebuilt == ["new session"]


async def test_session_scoped_refresh_and_start_hook(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    agent = await make_agent()
    started: list[str] = []
    agent.session_start_hooks.append(lambda s: started.append(s.id))
    one = await agent.new_session()
    other = await agent.new_session()
    for session in (one, other):
        fake_model.queue("ok")
        await agent.run_turn(session.id, "hi")
    agent.profile.soul_path.write_text("Brand new soul.")
    out = json.loads(run_cli("sessions", "refresh-prompts", "--session", one.id[:8], "--json").output)
    assert out["scope"] == "session" and out["target_session"] == one.id and out["requested_session"] == one.id
    assert out["sessions_with_prompt"] == 1 and isinstance(out["epoch"], int) and out["redirected"] is False

    fake_model.queue("ok")
    await agent.run_turn(other.id, "other turn")
    assert b"Brand new soul." not in _system_segment(fake_model.last_request)
    fake_model.queue("ok")
    await agent.run_turn(one.id, "one turn")
    assert b"Brand new soul." in _system_segment(fake_model.last_request)
    assert started == [one.id, other.id]


async def test_bad_session_refs_record_nothing(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    agent = await make_agent()
    a = agent.store.create_session(source="cli", session_id="abc000000001")
    agent.store.create_session(source="cli", session_id="abc000000002")
    before = agent.store.get_meta(REFRESH_KEY)
    unknown = run_cli("sessions", "refresh-prompts", "--session", "fff")
    assert unknown.exit_code == 1 and "no session matches 'fff'" in unknown.output
    ambiguous = run_cli("sessions", "refresh-prompts", "--session", "abc")
    assert ambiguous.exit_code == 1 and "ambiguous" in ambiguous.output
    assert agent.store.get_meta(REFRESH_KEY) == before
    assert agent.store.get_session(a.id).model_config == {}


async def test_session_refresh_lands_on_the_newest_continuation(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    root = await agent.new_session()
    fake_model.queue("ok")
    await agent.run_turn(root.id, "hi")
    agent.store.end_session(root.id, "compression")
    middle = agent.store.create_session(source="cli", parent_id=root.id)
    agent.store.end_session(middle.id, "compression")
    newest = agent.store.create_session(source="cli", parent_id=middle.id)
    result = run_cli("sessions", "refresh-prompts", "--session", root.id)
    assert result.exit_code == 0
    assert f"continues in {newest.id}" in result.output
    data = json.loads(run_cli("sessions", "refresh-prompts", "--session", root.id, "--json").output)
    assert data["requested_session"] == root.id and data["target_session"] == newest.id
    assert data["redirected"] is True


async def test_repair_fixes_exactly_the_damaged_prompts(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    sessions = []
    for day in range(4):  # distinct start dates give distinct prompts (one row each)
        agent.clock = agent.prompts.clock = _Frozen(1_800_000_000 + day * 86_400)
        sessions.append(await agent.new_session())
        fake_model.queue("ok")
        await agent.run_turn(sessions[-1].id, "hi")
    hashes = [agent.store.get_session(s.id).system_prompt_hash for s in sessions]
    assert len(set(hashes)) == 4
    db = sqlite3.connect(agent.profile.state_db)
    with db:
        db.execute("DELETE FROM system_prompts WHERE hash = ?", (hashes[0],))
        db.execute("UPDATE system_prompts SET text = '' WHERE hash = ?", (hashes[1],))
        db.execute("UPDATE system_prompts SET text = text || 'tampered' WHERE hash = ?", (hashes[2],))
    db.close()

    dry = json.loads(run_cli("sessions", "repair-prompts", "--dry-run", "--json").output)
    assert {d["session_id"]: d["problem"] for d in dry["damaged"]} == {
        sessions[0].id: "missing",
        sessions[1].id: "empty",
        sessions[2].id: "hash mismatch",
    }
    assert dry["repaired"] == []
    assert len(json.loads(run_cli("sessions", "repair-prompts", "--dry-run", "--json").output)["damaged"]) == 3

    healthy_before = agent.store.get_session(sessions[3].id)
    fixed = json.loads(run_cli("sessions", "repair-prompts", "--json").output)
    assert sorted(fixed["repaired"]) == sorted(s.id for s in sessions[:3])
    assert json.loads(run_cli("sessions", "repair-prompts", "--json").output)["damaged"] == []
    assert agent.store.get_session(sessions[3].id) == healthy_before
    later = await make_agent()
    for s in sessions:
        fake_model.queue("works")
        assert (await later.run_turn(s.id, "after repair")).answer == "works"


class _Frozen:
    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


async def test_a_request_landing_during_a_rebuild_is_not_lost(
    make_agent: AgentFactory, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild is held while it reads SOUL.md, and a session refresh is requested exactly
    then. The next turn must rebuild once more, not forget the request. (A FIFO used to hold
    the read; profile files that are not regular files are refused now, so the real reader
    is wrapped with a gate instead.)"""
    import threading

    from vigil.prompt import builder
    from vigil.prompt.epoch import read_refresh_state
    from vigil.prompt.maintenance import request_refresh

    agent = await make_agent()
    session = await agent.new_session()
    fake_model.queue("ok")
    await agent.run_turn(session.id, "hi")
    run_cli("sessions", "refresh-prompts")

    soul = agent.profile.soul_path
    reading, gate = threading.Event(), threading.Event()
    real_read = builder.read_capped

    def gated_read(path, label, max_chars):  # type: ignore[no-untyped-def]
        if label == "SOUL.md":
            reading.set()
            gate.wait(10)
        return real_read(path, label, max_chars)

    monkeypatch.setattr(builder, "read_capped", gated_read)
    rebuilt = threading.Thread(
        target=agent.prompts.rebuild, args=(session.id, read_refresh_state(agent.store), "test")
    )
    rebuilt.start()
    assert reading.wait(10)
    outcome = request_refresh(agent.store, session.id)  # lands while the rebuild reads SOUL.md
    soul.write_text("Persona written during the rebuild.")
    gate.set()
    rebuilt.join(timeout=10)
    monkeypatch.setattr(builder, "read_capped", real_read)
    soul.write_text("Persona after the late request.")

    stored = agent.store.get_session(session.id).model_config
    assert stored["prompt_refresh_request"] == outcome.epoch > stored["prompt_epoch"]
    fake_model.queue("ok")
    await agent.run_turn(session.id, "next")
    assert b"Persona after the late request." in _system_segment(fake_model.last_request)
