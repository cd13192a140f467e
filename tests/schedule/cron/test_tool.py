"""The agent's `cron` tool and the `/cron` slash command."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from vigil.agent.turn import Agent
from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.runtime.controller import ConversationController
from vigil.runtime import cron_commands
from vigil.schedule.cron.repo import CronRepo
from vigil.store import SQLiteStore
from vigil.store.records import ToolCall
from vigil.tools.base import ToolContext
from vigil.tools.registry import ALL_TOOL_NAMES, run_tool_call


async def call(ctx: ToolContext, **args: object):  # type: ignore[no-untyped-def]
    return await run_tool_call(ToolCall("c1", "cron", json.dumps(args)), ctx, ALL_TOOL_NAMES)


async def test_list_add_remove(store: SQLiteStore, profile: Profile) -> None:
    chat = store.create_session(source="cli")
    ctx = ToolContext(profile=profile, settings=Settings(timezone="Europe/Berlin"), store=store, session_id=chat.id)
    assert (await call(ctx, action="list")).content == "no cron jobs"
    added = await call(ctx, action="add", name="water", schedule="0 9 * * *", prompt="Remind me to water the plants")
    assert not added.is_error and "water — cron 0 9 * * * (Europe/Berlin)" in added.content
    listed = await call(ctx, action="list")
    assert listed.content.startswith("1 job(s):") and "water" in listed.content
    bad = await call(ctx, action="add", name="x", schedule="every 5s", prompt="p")
    assert bad.is_error and "too short" in bad.content
    missing = await call(ctx, action="add", name="x", prompt="p")
    assert missing.is_error and "argument 'schedule' is required" in missing.content
    removed = await call(ctx, action="remove", name="water")
    assert "removed the cron job 'water'" in removed.content
    assert (await call(ctx, action="remove", name="water")).is_error


async def test_refuses_inside_a_cron_session(store: SQLiteStore, profile: Profile) -> None:
    run = store.create_session(source="cron")
    ctx = ToolContext(profile=profile, settings=Settings(), store=store, session_id=run.id)
    result = await call(ctx, action="add", name="x", schedule="every 1h", prompt="p")
    assert result.is_error and "a cron job cannot manage cron jobs" in result.content
    assert CronRepo(store).list() == []


@dataclass
class _Control:
    store: SQLiteStore
    profile: Profile
    settings: Settings


async def test_slash_command(store: SQLiteStore, profile: Profile) -> None:
    control = _Control(store, profile, Settings())
    assert "No cron jobs" in (await cron_commands.handle(control, "")).text  # type: ignore[arg-type]
    reply = await cron_commands.handle(control, 'add morning "0 7 * * *" Summarize my inbox')  # type: ignore[arg-type]
    assert not reply.is_error and "Added cron job morning" in reply.text
    job = CronRepo(store).get("morning")
    assert job.prompt == "Summarize my inbox" and job.schedule.expr == "0 7 * * *"
    assert "paused" in (await cron_commands.handle(control, "pause morning")).text  # type: ignore[arg-type]
    assert "Summarize my inbox" in (await cron_commands.handle(control, "show morning")).text  # type: ignore[arg-type]
    assert (await cron_commands.handle(control, "show nothing")).is_error  # type: ignore[arg-type]
    assert (await cron_commands.handle(control, 'add bad "every 1s" p')).is_error  # type: ignore[arg-type]
    assert "Removed" in (await cron_commands.handle(control, "remove morning")).text  # type: ignore[arg-type]
    assert cron_commands.COMMAND.name == "cron"


async def test_slash_add_through_the_controller_uses_the_configured_zone(
    store: SQLiteStore, profile: Profile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The REPL's `/cron add` goes through ConversationController, which must expose the
    profile and settings the command reads (the machine's zone is UTC, the config's Tokyo)."""
    monkeypatch.setenv("TZ", "UTC")
    settings = Settings(timezone="Asia/Tokyo")
    agent = Agent(store=store, client=None, profile=profile, settings=settings, cwd=profile.home)  # type: ignore[arg-type]
    controller = ConversationController(agent)
    assert controller.profile is profile and controller.settings is settings
    reply = await controller.command('/cron add daily "0 9 * * *" morning report')
    assert not reply.is_error and "(Asia/Tokyo)" in reply.text, reply.text
    assert CronRepo(store).get("daily").schedule.tz == "Asia/Tokyo"
