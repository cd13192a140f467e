"""The ``cron`` tool: list, add and remove the profile's scheduled jobs from a conversation.

Cron runs never get this tool (a job cannot schedule jobs); should one be called from a cron
session anyway, it refuses.
"""

from __future__ import annotations

import asyncio
from typing import Any

from vigil import platforms as registry
from vigil.schedule.cron.errors import CronError
from vigil.tools.base import Tool, ToolContext, ToolFailure, ToolResult


class CronTool(Tool):
    name = "cron"
    description = (
        "Manage scheduled jobs. Each run of a job is a fresh session (no memory of this "
        "conversation) that gets the prompt, runs with your tools, and delivers its answer. "
        "action=list shows the jobs; action=add needs name, schedule and prompt; "
        "action=remove needs name. Schedules: 'every 2h', a 5-field cron expression "
        "('0 9 * * 1-5'), a delay for a one-shot ('30m'), or an ISO 8601 time. Write the prompt "
        "so it stands alone. Use a heartbeat instead when the work needs this conversation."
    )
    parameters = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["list", "add", "remove"]},
            "name": {"type": "string", "description": "Job name: letters, digits, '.', '_', '-'."},
            "schedule": {"type": "string", "description": "When to run (see the tool description)."},
            "prompt": {"type": "string", "description": "What each run should do, self-contained."},
            "timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Berlin (default: the user's)."},
            "deliver": {"type": "string", "description": f"Where answers go: {registry.deliver_help(brief=True)}."},
            "skills": {"type": "array", "items": {"type": "string"}, "description": "Skills to load for each run."},
        },
        "required": ["action"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.store is None:
            raise ToolFailure("cron is not available: this run has no session store")
        return await asyncio.to_thread(self._run, args, ctx)

    def _run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        # The scheduling modules load only when the tool runs: every turn offers the tool.
        from vigil.clock import SystemClock
        from vigil.schedule.cron.format import job_line
        from vigil.schedule.cron.jobs import JobSpec, new_job
        from vigil.schedule.cron.repo import CronRepo
        from vigil.schedule.cron.schedule import default_zone

        assert ctx.store is not None
        if ctx.session_id is not None and ctx.store.get_session(ctx.session_id).source == "cron":
            raise ToolFailure("refused: a cron job cannot manage cron jobs")
        repo = CronRepo(ctx.store, SystemClock())
        action = args["action"]
        try:
            if action == "list":
                jobs = repo.list()
                if not jobs:
                    return ToolResult("no cron jobs")
                return ToolResult("\n".join([f"{len(jobs)} job(s):"] + [job_line(j, repo.clock.now()) for j in jobs]))
            name = _required(args, "name")
            if action == "remove":
                _, removed = repo.remove(name)
                return ToolResult(f"removed the cron job '{name}' ({removed} run record(s) deleted)")
            spec = JobSpec(
                schedule=_required(args, "schedule"),
                prompt=_required(args, "prompt"),
                tz=args.get("timezone") or None,
                deliver=args.get("deliver") or None,
                skills=tuple(args["skills"]) if args.get("skills") else None,
            )
            job = new_job(
                name,
                spec,
                now=repo.clock.now(),
                default_tz=default_zone(ctx.settings.timezone),
                skills_dir=ctx.profile.skills_dir,
            )
            repo.add(job)
            return ToolResult(f"added: {job_line(job, repo.clock.now())}")
        except CronError as exc:
            raise ToolFailure(str(exc)) from None


def _required(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolFailure(f"argument '{name}' is required for action '{args['action']}'")
    return value
