"""A cron job as stored in ``state_meta`` under ``cron:job:<name>``: definition and run state.

The record is one JSON object. Every change is a pure function from one record to the next,
applied by :mod:`vigil.schedule.cron.repo` with compare-and-set, so two processes can never
both act on the same version of a job.

Definition: name, prompt, schedule (with its zone), delivery target, skills, working
directory, catch-up policy, grace, repeat limit, paused flag. Run state: when it is next due,
how many scheduled runs it made, the last run and its status, the failure streak and the
back-off, what is running now, and whether it is retired (a one-shot that ran or was missed,
a repeat limit reached).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable

from vigil.schedule.cron.delivery import parse_target
from vigil.schedule.cron.errors import DamagedJob, InvalidJob
from vigil.schedule.cron.schedule import Schedule, parse_duration, parse_schedule
from vigil.profiles import vigil_home
from vigil.prompt.skills import SkillNotFound, find_skill

JOB_PREFIX = "cron:job:"
RECORD_FORMAT = 1
CATCH_UP = ("run", "skip")
PROMPT_CAP = 20_000
MAX_REPEAT = 1_000_000

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

# Retirement reasons.
DONE = "done"  # a one-shot ran, or the repeat limit was reached
MISSED = "missed"  # a one-shot's time passed beyond its grace


def job_key(name: str) -> str:
    """The ``state_meta`` key of a job."""
    return JOB_PREFIX + name


def check_name(name: str) -> str:
    """``name`` if it is a valid job name; :class:`InvalidJob` otherwise."""
    if not _NAME_RE.fullmatch(name or ""):
        raise InvalidJob(
            f"invalid job name '{name}': use letters, digits, '.', '_' and '-' "
            "(at most 64, starting with a letter or digit)"
        )
    return name


@dataclass(frozen=True, slots=True)
class Running:
    """A run in progress. ``prev_state`` (scheduled runs) is what a refund restores."""

    run_key: str
    kind: str  # "scheduled" | "manual"
    occurrence: float | None
    owner: str
    claimed_at: float
    lease_until: float
    version: int
    prev_state: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CronJob:
    """One job. ``next_due`` is the next occurrence not yet handled (``None``: retired)."""

    name: str
    prompt: str
    schedule: Schedule
    deliver: str = "local"
    skills: tuple[str, ...] = ()
    workdir: str | None = None
    catch_up: str = "run"
    grace: float | None = None
    repeat: int | None = None
    paused: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0
    version: int = 1
    # -- run state --
    next_due: float | None = None
    runs: int = 0
    failures: int = 0
    backoff_until: float | None = None
    last_run_at: float | None = None
    last_status: str | None = None
    last_error: str | None = None
    last_session: str | None = None
    retired: str | None = None
    running: Running | None = None
    counts: dict[str, int] = field(default_factory=dict)

    # -- reading ----------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether occurrences are being scheduled (not paused, not retired)."""
        return not self.paused and self.retired is None and self.next_due is not None

    @property
    def state(self) -> str:
        """``active``, ``paused``, ``running``, ``backoff`` or the retirement (``done``, ``missed``)."""
        if self.running is not None:
            return "running"
        if self.retired is not None:
            return self.retired
        if self.paused:
            return "paused"
        if self.backoff_until is not None and self.failures:
            return "backoff"
        return "active"

    def grace_for(self, occurrence: float) -> float:
        """How late ``occurrence`` may run: the job's grace, else half the period (clamped)."""
        if self.grace is not None:
            return self.grace
        return self.schedule.default_grace(occurrence, self.created_at)

    # -- definition changes -------------------------------------------------------------------
    def paused_at(self, now: float) -> "CronJob":
        return replace(self, paused=True, updated_at=now, version=self.version + 1)

    def resumed_at(self, now: float) -> "CronJob":
        """Start again from ``now``: occurrences missed while paused are not made up."""
        next_due = self.next_due
        if self.schedule.recurring and self.retired is None:
            next_due = self.schedule.next_after(now)
        return replace(self, paused=False, next_due=next_due, updated_at=now, version=self.version + 1)

    def bumped(self, now: float) -> "CronJob":
        return replace(self, updated_at=now, version=self.version + 1)

    # -- serialisation --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        # Field by field rather than dataclasses.asdict, which deep-copies every value: a
        # burst of claims encodes thousands of records at once.
        data = {name: getattr(self, name) for name in _JOB_FIELDS}
        data["schedule"] = self.schedule.to_json()
        data["skills"] = list(self.skills)
        data["running"] = None if self.running is None else _running_json(self.running)
        data["counts"] = dict(self.counts)
        data["format"] = RECORD_FORMAT
        return data

    @classmethod
    def from_json(cls, data: Any) -> "CronJob":
        """Decode a stored record; raises :class:`DamagedJob`."""
        if not isinstance(data, dict):
            raise DamagedJob("a cron job record must be a JSON object")
        try:
            fields = {k: v for k, v in data.items() if k != "format"}
            running = fields.get("running")
            return cls(
                **{
                    **fields,
                    "schedule": Schedule.from_json(fields["schedule"]),
                    "skills": tuple(fields.get("skills") or ()),
                    "running": Running(**running) if running else None,
                    "counts": dict(fields.get("counts") or {}),
                }
            )
        except (TypeError, ValueError, KeyError) as exc:
            name = data.get("name", "?")
            raise DamagedJob(f"damaged cron job record '{name}': {exc}") from None


_JOB_FIELDS = tuple(f.name for f in fields(CronJob))
_RUNNING_FIELDS = tuple(f.name for f in fields(Running))


def _running_json(running: Running) -> dict[str, Any]:
    data = {name: getattr(running, name) for name in _RUNNING_FIELDS}
    if running.prev_state is not None:
        data["prev_state"] = dict(running.prev_state)
    return data


# -- building and editing from user input ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a person gives when adding or editing a job; ``None`` means "not given"."""

    schedule: str | None = None
    prompt: str | None = None
    tz: str | None = None
    deliver: str | None = None
    skills: tuple[str, ...] | None = None
    workdir: str | None = None
    catch_up: str | None = None
    grace: str | None = None
    repeat: int | None = None


def new_job(name: str, spec: JobSpec, *, now: float, default_tz: str, skills_dir: Path | None) -> CronJob:
    """Validate ``spec`` completely and build the job; raises a :class:`CronError` subclass."""
    check_name(name)
    if spec.schedule is None or spec.prompt is None:
        raise InvalidJob("a job needs a schedule and a prompt")
    schedule = parse_schedule(spec.schedule, tz=spec.tz or default_tz, now=now)
    job = CronJob(name=name, prompt="", schedule=schedule, created_at=now, updated_at=now)
    job = _apply(job, spec, now=now, skills_dir=skills_dir)
    return replace(job, next_due=schedule.next_after(now) if schedule.recurring else schedule.at)


def edited_job(job: CronJob, spec: JobSpec, *, now: float, skills_dir: Path | None) -> CronJob:
    """``job`` with the given fields changed; a new schedule or zone restarts it from ``now``."""
    changed = job
    if spec.schedule is not None or spec.tz is not None:
        schedule = parse_schedule(spec.schedule or job.schedule.text, tz=spec.tz or job.schedule.tz, now=now)
        changed = replace(
            job,
            schedule=schedule,
            next_due=schedule.next_after(now) if schedule.recurring else schedule.at,
            retired=None,
            backoff_until=None,
        )
    changed = _apply(changed, spec, now=now, skills_dir=skills_dir)
    if changed.repeat is not None and changed.runs >= changed.repeat and changed.retired is None:
        changed = replace(changed, retired=DONE, next_due=None)
    return replace(changed, updated_at=now, version=job.version + 1)


def _apply(job: CronJob, spec: JobSpec, *, now: float, skills_dir: Path | None) -> CronJob:
    updates: dict[str, Any] = {}
    if spec.prompt is not None:
        prompt = spec.prompt.strip()
        if not prompt:
            raise InvalidJob("the prompt is empty: say what the job should do")
        if len(prompt) > PROMPT_CAP:
            raise InvalidJob(f"the prompt is too long ({len(prompt)} characters; at most {PROMPT_CAP})")
        updates["prompt"] = prompt
    if spec.deliver is not None:
        updates["deliver"] = str(parse_target(spec.deliver))
    if spec.skills is not None:
        updates["skills"] = tuple(_check_skills(spec.skills, skills_dir))
    if spec.workdir is not None:
        updates["workdir"] = _check_workdir(spec.workdir) if spec.workdir else None
    if spec.catch_up is not None:
        if spec.catch_up not in CATCH_UP:
            raise InvalidJob(f"invalid catch-up policy '{spec.catch_up}': use run or skip")
        updates["catch_up"] = spec.catch_up
    if spec.grace is not None:
        updates["grace"] = None if spec.grace in ("", "default") else float(parse_duration(spec.grace, what="grace"))
    if spec.repeat is not None:
        if not 0 <= spec.repeat <= MAX_REPEAT:
            raise InvalidJob(f"invalid repeat limit {spec.repeat}: use 1 or more (0 removes the limit)")
        updates["repeat"] = spec.repeat or None
    job = replace(job, **updates)
    if job.repeat is not None and not job.schedule.recurring:
        raise InvalidJob("--repeat applies to recurring schedules, not to a one-shot")
    return job


def _check_skills(names: Iterable[str], skills_dir: Path | None) -> list[str]:
    out: list[str] = []
    for name in names:
        if skills_dir is not None:
            try:
                name = find_skill(skills_dir, name).name
            except SkillNotFound as exc:
                raise InvalidJob(str(exc)) from None
        if name not in out:
            out.append(name)
    return out


def _check_workdir(path: str) -> str:
    try:
        resolved = Path(path).expanduser().resolve()
        is_dir = resolved.is_dir()
    except (OSError, RuntimeError) as exc:  # a name too long, a symlink loop ...
        shown = path if len(path) <= 60 else path[:59] + "…"
        raise InvalidJob(f"the working directory '{shown}' cannot be used: {getattr(exc, 'strerror', None) or exc}") from None
    if not is_dir:
        raise InvalidJob(f"the working directory {resolved} does not exist or is not a directory")
    home = Path(os.path.realpath(vigil_home()))
    if resolved == home or home in resolved.parents:
        raise InvalidJob(
            f"the working directory {resolved} lies inside vigil's home ({home}), where the agent's "
            "commands never work: leave the working directory out and the job works in a workspace of its own"
        )
    return str(resolved)
