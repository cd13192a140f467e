"""Running one claimed cron job: a fresh session, one turn, the answer delivered, the run recorded.

Each run is an ordinary session (source ``cron``, titled ``cron: <job>``, with the job name and
run stamp in its model configuration), so its transcript is searchable and exportable like any
other. The session starts empty and its system prompt is built from the profile's files on its
first turn by the normal agent path, so edits to SOUL.md, MEMORY.md or skills show up in the
next run. The job's skills are put in front of the prompt in the user message (the system
prompt stays the profile's normal one, shared with every other session). The ``cron`` tool is
not pinned in cron sessions: a job cannot schedule jobs. No one can approve anything during a
run, so tools that need approval are refused.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

from vigil.agent.turn import Agent
from vigil.clock import Clock, SystemClock
from vigil.config.settings import Settings
from vigil.masking import mask_secrets
from vigil.models.base import ModelClient
from vigil.profiles import Profile
from vigil.schedule import estop
from vigil.schedule.cron.delivery import SILENT_MARKER, DeliveryRouter, Outgoing, is_silent, parse_target
from vigil.schedule.cron.errors import CronError
from vigil.schedule.cron.jobs import CronJob
from vigil.schedule.cron.plan import RUN_TIMEOUT
from vigil.schedule.cron.repo import Claim, CronRepo
from vigil.schedule.cron.runs import FAILED, INTERRUPTED, MANUAL, OK, SILENT, RunRecord
from vigil.schedule.cron.schedule import format_instant
from vigil.prompt.skills import SkillNotFound, find_skill
from vigil.tools.cron import CronTool
from vigil.tools.registry import default_tool_names

log = logging.getLogger(__name__)

SOURCE = "cron"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Prepared:
    cwd: Path
    message: str


def settings_for_cron(settings: Settings) -> Settings:
    """``settings`` with the ``cron`` tool left out of the tools a new session pins."""
    names = [name for name in default_tool_names(settings) if name != CronTool.name]
    return settings.copy_with(update={"tools": settings.tools.copy_with(update={"enabled": names})})


def compose_message(job: CronJob, claim: Claim, skills: list[tuple[str, str]]) -> str:
    """The user message of a run: a header saying what this is, the skills, then the prompt."""
    if claim.running.kind == MANUAL:
        when = f"run by hand at {format_instant(claim.running.claimed_at, job.schedule.tz)}"
    else:
        when = f"scheduled run for {format_instant(claim.running.occurrence, job.schedule.tz)}"
    header = (
        f'[Cron job "{job.name}" — {when}. This is a fresh session with no earlier conversation. '
        f"Your final answer is delivered to {job.deliver}; if there is nothing worth reporting, "
        f"answer with exactly {SILENT_MARKER}.]"
    )
    parts = [header]
    parts.extend(f'<skill name="{name}">\n{text.strip()}\n</skill>' for name, text in skills)
    parts.append(job.prompt)
    return "\n\n".join(parts)


class CronRunner:
    """Executes claims: prepare, run the agent, deliver, finish. Never raises for a failed run."""

    def __init__(
        self,
        *,
        repo: CronRepo,
        client: ModelClient,
        profile: Profile,
        settings: Settings,
        clock: Clock | None = None,
        router: DeliveryRouter | None = None,
        timeout: float = RUN_TIMEOUT,
    ) -> None:
        self.repo = repo
        self.client = client
        self.profile = profile
        self.settings = settings_for_cron(settings)
        self.clock = clock or SystemClock()
        self.router = router or DeliveryRouter(profile.cron_output_dir)
        self.timeout = timeout

    @property
    def store(self) -> Any:
        return self.repo.store

    async def execute(self, claim: Claim) -> RunRecord | None:
        """Run the claimed job and record the outcome; ``None`` when the claim was refunded
        (the emergency stop is on, or the task was cancelled before the agent started)."""
        if await _off(estop.engaged, self.store):
            await _off(self.repo.refund, claim)
            return None
        job, record = claim.job, claim.record
        started = self.clock.now()
        session_id: str | None = None
        try:
            prepared = await _off(self._prepare, job, claim)
            agent = Agent(
                store=self.store,
                client=self.client,
                profile=self.profile,
                settings=self.settings,
                cwd=prepared.cwd,
                clock=self.clock,
                approve=None,
                source=SOURCE,
            )
            session = await agent.new_session(source=SOURCE, title=f"cron: {job.name}")
            session_id = session.id
            await _off(self._link, session.id, session.model_config, claim, started)
            result = await asyncio.wait_for(
                agent.run_turn(session.id, prepared.message, stream=False), self.timeout
            )
        except asyncio.CancelledError:
            if session_id is None:
                await asyncio.shield(_off(self.repo.refund, claim))
                raise
            final = record.finished(
                INTERRUPTED, self.clock.now(), started_at=started, session_id=session_id,
                error="the run was cancelled (the process is stopping)",
            )
            await asyncio.shield(self._finish(claim, final, session_id))
            raise
        except Exception as exc:  # any failure of one run is recorded; the scheduler goes on
            reason = _reason(exc)
            log.warning("cron job %s failed: %s", job.name, reason.splitlines()[0])
            final = record.finished(
                FAILED, self.clock.now(), started_at=started, session_id=session_id, error=reason
            )
            await self._finish(claim, final, session_id)
            return final

        status = SILENT if is_silent(result.answer) else OK
        delivery = await self.router.deliver(
            Outgoing(
                job=job.name,
                target=parse_target(job.deliver),
                answer=result.answer,
                stamp=record.stamp,
                title=f"cron: {job.name} — {format_instant(record.when, job.schedule.tz)}",
                session_id=session_id,
            )
        )
        final = record.finished(
            status, self.clock.now(), started_at=started, session_id=session_id,
            answer=result.answer, delivery=delivery.to_json(),
            detail=_join(record.detail, "" if result.stop == "answered" else f"turn ended: {result.stop}"),
        )
        await self._finish(claim, final, session_id)
        return final

    # -- steps --------------------------------------------------------------------------------
    def _prepare(self, job: CronJob, claim: Claim) -> _Prepared:
        skills = []
        for name in job.skills:
            try:
                info = find_skill(self.profile.skills_dir, name)
            except SkillNotFound as exc:
                raise CronError(f"cannot load the job's skill: {exc}") from None
            skills.append((info.name, info.path.read_text(encoding="utf-8")))
        # The profile home is never a working directory: a job without one (or with one inside
        # a vigil home, set before that was refused) works in a workspace of its own.
        cwd = self.profile.agent_workdir(Path(job.workdir), f"cron-{job.name}") if job.workdir \
            else self.profile.workspace(f"cron-{job.name}")
        if not cwd.is_dir():
            raise CronError(f"the job's working directory {cwd} does not exist")
        return _Prepared(cwd, compose_message(job, claim, skills))

    def _link(self, session_id: str, config: dict[str, Any], claim: Claim, started: float) -> None:
        linked = {**config, "cron_job": claim.job.name, "cron_run": claim.record.stamp}
        self.store.update_session(session_id, model_config=linked)
        self.repo.runs.put(
            RunRecord(**{**claim.record.to_json(), "started_at": started, "session_id": session_id})
        )

    async def _finish(self, claim: Claim, final: RunRecord, session_id: str | None) -> None:
        if session_id is not None:
            reason = INTERRUPTED if final.status == INTERRUPTED else SOURCE
            await _off(self.store.end_session, session_id, reason, ended_at=self.clock.now())
        await _off(self.repo.finish, claim, final, error=final.error)


async def _off(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(fn, *args, **kwargs)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "the run took too long and was stopped"
    # Line breaks are kept: some errors end with a how-to-fix hint laid out in lines.
    text = "\n".join(" ".join(line.split()) for line in mask_secrets(str(exc)).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _join(*parts: str) -> str:
    return "; ".join(part for part in parts if part)
