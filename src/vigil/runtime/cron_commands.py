"""``/cron`` in the REPL (and, later, every chat front end): the profile's jobs from a conversation.

::

    /cron                        list the jobs
    /cron show NAME              one job in full
    /cron runs [NAME]            the latest runs
    /cron add NAME "SCHEDULE" PROMPT...
    /cron pause|resume|remove NAME

Register with ``registry.register(cron_commands.COMMAND)``.
"""

from __future__ import annotations

import asyncio
import shlex

from vigil.runtime.slash import CommandReply, ConversationControl, SlashCommand
from vigil.schedule.cron.errors import CronError

USAGE = 'list | show NAME | runs [NAME] | add NAME "SCHEDULE" PROMPT | pause|resume|remove NAME'


async def handle(control: ConversationControl, args: str) -> CommandReply:
    """Run one ``/cron`` command against the conversation's store."""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        return CommandReply(f"/cron: {exc}", is_error=True)
    try:
        return await asyncio.to_thread(_dispatch, control, words)
    except CronError as exc:
        return CommandReply(str(exc), is_error=True)


def _dispatch(control: ConversationControl, words: list[str]) -> CommandReply:
    # The scheduling modules load on the first /cron: every conversation registers the command.
    from vigil.clock import SystemClock
    from vigil.schedule.cron.format import job_line, job_lines, next_text, run_line
    from vigil.schedule.cron.jobs import JobSpec, new_job
    from vigil.schedule.cron.repo import CronRepo
    from vigil.schedule.cron.schedule import default_zone

    repo = CronRepo(control.store, SystemClock())
    now = repo.clock.now()
    action = words[0].lower() if words else "list"
    rest = words[1:]
    if action == "list":
        jobs = repo.list()
        if not jobs:
            return CommandReply('No cron jobs. Add one: /cron add NAME "every 1h" PROMPT')
        return CommandReply("\n".join(job_line(job, now) for job in jobs))
    if action == "runs":
        records = repo.runs.list(rest[0] if rest else None, limit=10)
        zones = {job.name: job.schedule.tz for job in repo.list()}
        if not records:
            return CommandReply("No runs yet.")
        return CommandReply("\n".join(run_line(r, zones.get(r.job, "UTC")) for r in records))
    if action == "add":
        if len(rest) < 3:
            return CommandReply('usage: /cron add NAME "SCHEDULE" PROMPT', is_error=True)
        job = new_job(
            rest[0],
            JobSpec(schedule=rest[1], prompt=" ".join(rest[2:])),
            now=now,
            default_tz=default_zone(control.settings.timezone),
            skills_dir=control.profile.skills_dir,
        )
        repo.add(job)
        return CommandReply(f"Added cron job {job.name}: {job.schedule.describe()} — next run {next_text(job, now)}")
    if action in ("show", "pause", "resume", "remove"):
        if len(rest) != 1:
            return CommandReply(f"usage: /cron {action} NAME", is_error=True)
        name = rest[0]
        if action == "show":
            return CommandReply("\n".join(job_lines(repo.get(name), now)))
        if action == "remove":
            repo.remove(name)
            return CommandReply(f"Removed cron job {name}.")
        job, changed = repo.pause(name) if action == "pause" else repo.resume(name)
        state = "paused" if job.paused else f"active; next run {next_text(job, now)}"
        return CommandReply(f"{name}: {state}" + ("" if changed else " (unchanged)"))
    return CommandReply(f"unknown /cron action '{action}': {USAGE}", is_error=True)


COMMAND = SlashCommand("cron", "scheduled jobs (each run is a fresh session)", handle, usage=USAGE)
