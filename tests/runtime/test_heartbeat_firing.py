"""When a heartbeat fires: idle only, user input first, coalescing, re-anchoring, and the
injected message itself (header, no-busywork note, unchanged prompt and tools)."""

from __future__ import annotations

import asyncio

import pytest

from tests.runtime.conftest import Runtime, RuntimeFactory
from vigil.agent.events import TextDelta
from vigil.config.settings import Settings
from vigil.runtime.conversation_events import TurnEnded
from vigil.schedule.heartbeat.text import ASK_FOR_SILENCE, heartbeat_message
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

MIN = 60


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_fires_as_an_ordinary_user_message_with_a_full_cache_hit(
    rt: Runtime, fake_model: FakeModelServer, provider: str
) -> None:
    reply = await rt.command("/heartbeat every 15m Check whether the CI run for PR #1234 finished")
    assert reply.startswith("♥ Heartbeat set (every 15m): Check whether the CI run for PR #1234 finished")
    before = fake_model.requests[-1]
    fake_model.queue("CI is still running. Nothing to report yet.")
    await rt.advance(15 * MIN - 1)
    assert rt.heartbeat_turns() == []
    await rt.advance(1)

    [began] = rt.heartbeat_turns()
    assert began.header == "[Heartbeat — recurring instruction, fires every 15m]"
    assert began.text.startswith(began.header + "\nCheck whether the CI run") and began.text.endswith(ASK_FOR_SILENCE)
    deltas = "".join(e.text for e in rt.events if isinstance(e, TextDelta))
    assert deltas.endswith("CI is still running. Nothing to report yet.")
    stored = rt.store.get_messages(rt.session_id)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[2].content == heartbeat_message(rt.heartbeat())

    request = fake_model.requests[-1]
    assert request.full_prefix_hit  # the whole previous request was read from the cache
    assert request.segments[0] == before.segments[0]  # system prompt and tools, byte for byte
    hb = rt.heartbeat()
    assert hb.fire_count == 1 and hb.last_fire == rt.clock.now() and hb.next_due == rt.clock.now() + 15 * MIN


async def test_only_between_turns_and_once_right_after_a_long_turn(rt: Runtime, fake_model: FakeModelServer) -> None:
    await rt.command("/hb every 10m check")
    sent = len(fake_model.requests)
    fake_model.queue(Reply.text("slow answer", delay=0.4))
    long_turn = rt.conversation.submit("long job")
    await fake_model.wait_for_requests_async(sent + 1)
    await rt.clock.advance(35 * MIN)  # due (three times over) while the agent is busy
    assert rt.heartbeat_turns() == [] and rt.conversation.running_turn
    await long_turn
    await rt.settle()
    assert rt.order() == ["hello", "long job", "♥"]
    assert rt.heartbeat().fire_count == 1
    # re-anchored at the actual fire, not at the missed due times
    assert rt.heartbeat().next_due == rt.heartbeat().last_fire + 10 * MIN


async def test_queued_user_messages_go_first(rt: Runtime, fake_model: FakeModelServer) -> None:
    await rt.command("/hb every 10m check")
    sent = len(fake_model.requests)
    fake_model.queue(Reply.text("slow", delay=0.3))
    first = rt.conversation.submit("first")
    await fake_model.wait_for_requests_async(sent + 1)
    await rt.clock.advance(10 * MIN)
    second = rt.conversation.submit("second")
    third = rt.conversation.submit("third")
    await asyncio.gather(first, second, third)
    await rt.settle()
    assert rt.order() == ["hello", "first", "second", "third", "♥"]


async def test_missed_intervals_coalesce_into_one_fire(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    await rt.advance(3 * 10 * MIN + 7 * MIN)  # three whole intervals and some
    assert len(rt.heartbeat_turns()) == 1
    fired_at = rt.clock.now()
    assert rt.heartbeat().next_due == fired_at + 10 * MIN
    await rt.advance(10 * MIN - 1)
    assert len(rt.heartbeat_turns()) == 1
    await rt.advance(1)
    assert len(rt.heartbeat_turns()) == 2 and rt.heartbeat().fire_count == 2


async def test_missed_while_the_process_was_down(make_runtime: RuntimeFactory) -> None:
    first = await make_runtime()
    await first.send("hello")
    await first.command("/hb every 10m check")
    session_id = first.session_id
    await first.conversation.close()
    await first.scheduler.stop()
    await first.clock.advance(5 * 10 * MIN)  # nobody owns the conversation
    assert first.heartbeat(session_id).fire_count == 0

    second = await make_runtime(session_id=session_id)  # e.g. `vigil chat --resume`
    await second.settle()
    assert len(second.heartbeat_turns()) == 1 and second.heartbeat().fire_count == 1


async def test_pause_and_resume_without_a_stale_fire(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    paused = await rt.command("/hb pause")
    assert paused.startswith("♥ Heartbeat paused (every 10m): check")
    await rt.advance(25 * MIN)
    assert rt.heartbeat_turns() == []
    status = await rt.command("/hb")
    assert "— paused" in status and "none while paused" in status
    resumed = await rt.command("/heartbeat resume")
    assert resumed.startswith("♥ Heartbeat resumed (every 10m): next fire at ") and "(in 10m)" in resumed
    assert rt.heartbeat_turns() == []  # the overdue slot is not sent at once
    await rt.advance(10 * MIN - 1)
    assert rt.heartbeat_turns() == []
    await rt.advance(1)
    assert len(rt.heartbeat_turns()) == 1
    assert "already active" in await rt.command("/hb resume")


async def test_clear_stops_it(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    cleared = await rt.command("/hb clear")
    assert cleared == "♥ Heartbeat cleared (every 10m, fired 0 times)."
    await rt.advance(60 * MIN)
    assert rt.heartbeat_turns() == [] and rt.heartbeat() is None
    assert await rt.command("/hb clear") == "No heartbeat to clear in this conversation."
    assert (await rt.conversation.send("/hb pause")).reply.is_error


async def test_replace_takes_over_the_schedule(rt: Runtime) -> None:
    await rt.command("/hb every 10m old instruction")
    await rt.advance(10 * MIN)
    assert rt.heartbeat().fire_count == 1
    await rt.advance(5 * MIN)
    reply = await rt.command("/hb every 1h new instruction")
    assert reply.startswith("♥ Heartbeat set (every 1h): new instruction")
    assert "replaces the previous heartbeat (every 10m: old instruction)" in reply
    hb = rt.heartbeat()
    assert hb.prompt == "new instruction" and hb.fire_count == 0 and hb.next_due == rt.clock.now() + 3600
    await rt.advance(30 * MIN)  # the old 10m timer is gone
    assert len(rt.heartbeat_turns()) == 1
    await rt.advance(30 * MIN)
    assert len(rt.heartbeat_turns()) == 2 and "new instruction" in rt.heartbeat_turns()[-1].text


async def test_status_shows_everything(rt: Runtime) -> None:
    assert (await rt.command("/hb")).startswith("No heartbeat in this conversation.")
    await rt.command("/hb every 15m watch the deploy")
    await rt.advance(15 * MIN)
    await rt.advance(2 * MIN)
    status = await rt.command("/heartbeat status")
    lines = status.splitlines()
    assert lines[0] == "♥ Heartbeat (every 15m) — active"
    assert "prompt:    watch the deploy" in status
    assert "next fire: at " in status and "(in 13m)" in status
    assert "fired:     once; last fire: at " in status and "(2m ago)" in status


@pytest.mark.parametrize("typed", ["/heartbeat", "/hb"])
@pytest.mark.parametrize(
    ("args", "rule"),
    [
        ("every 0m check", "is zero"),
        ("every 59s check", "the minimum interval is 60 seconds"),
        ("every 10x check", "is not an interval"),
        ("every -5m check", "is negative"),
        ("every 3000000d check", "is too long: the maximum interval is 365 days"),
        ("every 15m", "missing prompt"),
        ("every 15m    ", "missing prompt"),
        ("every", "missing interval"),
        ("sometimes 15m check", "unknown /heartbeat subcommand"),
        ("pause now", "takes no arguments"),
    ],
)
async def test_invalid_commands_name_the_rule_and_change_nothing(rt: Runtime, typed: str, args: str, rule: str) -> None:
    await rt.command("/hb every 10m keep me")
    before = rt.store.get_meta(f"heartbeat:{rt.session_id}")
    outcome = await rt.send(f"{typed} {args}")
    assert outcome.reply.is_error and rule in outcome.reply.text.lower() and "Usage: /heartbeat every" in outcome.reply.text
    assert rt.store.get_meta(f"heartbeat:{rt.session_id}") == before


async def test_setting_before_the_first_message_starts_the_conversation(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    assert runtime.controller.session_id is None
    assert (await runtime.command("/hb every 5m check")).startswith("♥ Heartbeat set (every 5m)")
    await runtime.advance(5 * MIN)
    assert len(runtime.heartbeat_turns()) == 1 and runtime.heartbeat().fire_count == 1


async def test_a_failed_turn_still_counts(rt: Runtime, fake_model: FakeModelServer) -> None:
    await rt.command("/hb every 10m check")
    fake_model.queue(Reply.error(400, "bad request"))
    await rt.advance(10 * MIN)
    [ended] = [e for e in rt.ended() if e.kind == "heartbeat"]
    assert isinstance(ended, TurnEnded) and ended.error is not None
    assert rt.heartbeat().fire_count == 1 and rt.heartbeat().pending is None


async def test_an_interrupted_heartbeat_turn_still_counts(rt: Runtime, fake_model: FakeModelServer) -> None:
    await rt.command("/hb every 10m check")
    sent = len(fake_model.requests)
    fake_model.queue(Reply.text("never finishes", delay=5))
    await rt.clock.advance(10 * MIN)
    await fake_model.wait_for_requests_async(sent + 1)
    assert rt.conversation.interrupt()
    await rt.settle()
    assert [e.cancelled for e in rt.ended() if e.kind == "heartbeat"] == [True]
    assert rt.heartbeat().fire_count == 1


async def test_an_absurd_stored_record_is_still_shown_and_can_be_cleared(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    key = f"heartbeat:{rt.session_id}"
    absurd = dict(rt.store.get_meta(key).value)
    absurd.update(interval=3_000_000 * 86_400, next_due=rt.clock.now() + 3_000_000 * 86_400)
    rt.store.set_meta(key, absurd)  # as an older vigil without the maximum stored it
    await rt.conversation.send("/hb pause")
    await rt.conversation.send("/hb resume")
    status = await rt.command("/hb status")
    assert status.startswith("♥ Heartbeat (every 3000000d) — active") and "impossible time" in status
    assert (await rt.command("/hb every 10m fixed")).startswith("♥ Heartbeat set (every 10m): fixed")


async def test_a_damaged_record_gets_a_one_line_error_and_can_be_cleared(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    rt.store.set_meta(f"heartbeat:{rt.session_id}", {"prompt": 3})
    for command in ("/hb status", "/hb pause", "/hb resume"):
        outcome = await rt.send(command)
        assert outcome.reply.is_error and "\n" not in outcome.reply.text
        assert "cannot be read" in outcome.reply.text and "/heartbeat clear removes it" in outcome.reply.text
    assert await rt.command("/hb clear") == "♥ Heartbeat cleared (its record was damaged)."
    assert rt.store.get_meta(f"heartbeat:{rt.session_id}") is None


async def test_a_heartbeat_turn_never_asks_for_approval_even_in_a_front_end_that_could(
    rt: Runtime, fake_model: FakeModelServer
) -> None:
    asked: list[str] = []

    async def approve(tool: str, what: str) -> bool:
        asked.append(what)
        return True

    rt.agent.approve = approve  # the REPL's prompt: there for the user's own turns
    await rt.command("/hb every 10m tidy up")
    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("terminal", {"command": "mkfs.ext4 /dev/sdz"})), "refused, as it should be"
    )
    await rt.advance(10 * MIN)
    assert asked == []
    [result] = [m for m in rt.store.get_messages(rt.session_id) if m.role == "tool"]
    assert result.content.startswith("refused:") and "no one can approve" in result.content


async def test_slash_times_carry_the_profiles_zone(make_runtime: RuntimeFactory) -> None:
    """Like the cron lists, times are shown in the profile's zone, named (T0 is 08:00 UTC)."""
    rt = await make_runtime(settings=Settings(timezone="Asia/Tokyo"))
    await rt.send("hello")
    done = await rt.command("/hb every 15m watch the deploy")
    assert "First fire at 2027-01-15 17:15:00 JST (in 15m)" in done
    await rt.advance(15 * MIN)
    status = await rt.command("/heartbeat status")
    assert "next fire: at 2027-01-15 17:30:00 JST (in 15m)" in status
    assert "last fire: at 2027-01-15 17:15:00 JST (now)" in status
