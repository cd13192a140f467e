"""What to do with a job at a given moment, as pure functions of its record.

:func:`plan_due` decides, for a job whose next occurrence has come: run it (on time or late
within its grace; after a longer outage once, coalesced, when ``catch_up`` is ``run``), skip it
(``catch_up: skip`` after an outage; the previous run still going; a failure back-off), or
retire it (a one-shot past its grace). It also recovers a run whose owner died. The decision
carries the next record; :mod:`vigil.schedule.cron.repo` swaps it in with compare-and-set.
:func:`claim_chunks` cuts the jobs due at one moment into the batches a worker claims them in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from vigil.backoff import Backoff
from vigil.schedule.cron.jobs import DONE, MISSED, CronJob, Running
from vigil.schedule.cron.runs import (
    FAILED,
    INTERRUPTED,
    MANUAL,
    OK,
    RUNNING,
    SCHEDULED,
    SILENT,
    SKIPPED_BACKOFF,
    SKIPPED_MISSED,
    SKIPPED_OVERLAP,
    RunRecord,
    stamp_of,
)
from vigil.schedule.cron.schedule import format_instant

RUN_TIMEOUT = 3600.0
"""A run taking longer is cancelled and recorded as failed."""
LEASE = RUN_TIMEOUT + 600.0
"""A claim older than this is abandoned whoever holds it (its owner is gone or stuck)."""
BACKOFF_BASE = 60.0
BACKOFF_MAX = 3600.0
CLAIM_CHUNK = 100
"""Jobs due at one moment are claimed at most this many to a store transaction."""

OwnerAlive = Callable[[str], bool]


def backoff_seconds(failures: int) -> float:
    """The pause after ``failures`` failures in a row: 1m, 2m, 4m ... at most 1h."""
    if failures <= 0:
        return 0.0
    return Backoff(BACKOFF_BASE, BACKOFF_MAX, jitter=None).delay(failures - 1)  # a schedule, shown as such


@dataclass(frozen=True, slots=True)
class Decision:
    """The next record of a job and the run-log entries to write with it.

    ``run`` is set when an occurrence was claimed for running (its record has status
    ``running``); ``records`` are finished entries (skips, misses); ``interrupted`` is a run
    found abandoned, whose record must be marked so.
    """

    job: CronJob
    run: RunRecord | None = None
    records: tuple[RunRecord, ...] = ()
    interrupted: Running | None = None


def is_abandoned(running: Running, now: float, alive: OwnerAlive) -> bool:
    """Whether a run in progress was left behind: its lease ran out or its process is gone."""
    return now >= running.lease_until or not alive(running.owner)


def claim_chunks(names: Sequence[str], owner: str, size: int = CLAIM_CHUNK) -> list[list[str]]:
    """``names`` (distinct: the jobs due at one moment) cut into chunks of at most ``size``,
    in an order of ``owner``'s own.

    Every worker sharing the store cuts a burst alike (by name) but takes the chunks in the
    order of a hash of its owner token, so workers that wake up together mostly claim
    different chunks at the same time instead of all racing for the same rows; a chunk that
    another worker took first is then found claimed by one read, before any swap.
    """
    if len(names) <= size:
        return [list(names)] if names else []
    ordered = sorted(names)
    count = -(-len(ordered) // size)
    even = -(-len(ordered) // count)  # 201 jobs go in chunks of 67, not 100 + 100 + 1
    chunks = [ordered[start : start + even] for start in range(0, len(ordered), even)]
    return sorted(chunks, key=lambda chunk: _rank(owner, chunk[0]))


def _rank(owner: str, first: str) -> bytes:
    return hashlib.blake2b(f"{owner}\0{first}".encode(), digest_size=8).digest()


def next_attempt(job: CronJob) -> float | None:
    """When the job will next actually run: ``next_due``, or, while it backs off, the first
    occurrence after the back-off (the ones before it will be recorded as skipped)."""
    due, until = job.next_due, job.backoff_until
    if due is None or until is None or not job.failures or not job.schedule.recurring or due >= until:
        return due
    return job.schedule.first_at_or_after(until)


def plan_due(job: CronJob, now: float, *, owner: str, alive: OwnerAlive) -> Decision | None:
    """The decision for ``job`` at ``now``, or ``None`` when there is nothing to do."""
    interrupted = None
    if job.running is not None and is_abandoned(job.running, now, alive):
        interrupted = job.running
        job = _count(replace(job, running=None, last_status=INTERRUPTED), INTERRUPTED)
    if not job.active or job.next_due is None or job.next_due > now:
        return Decision(job, interrupted=interrupted) if interrupted else None

    schedule = job.schedule
    due = job.next_due
    occurrence = schedule.latest_at_or_before(now, not_before=due) or due
    coalesced = max(0, schedule.count_between(due, now) - 1)
    late = max(0.0, now - occurrence)
    following = schedule.next_after(now) if schedule.recurring else None

    def skip(status: str, detail: str, next_due: float | None, **changes: object) -> Decision:
        record = RunRecord(
            job.name, stamp_of(occurrence), SCHEDULED, status, occurrence, now,
            coalesced=coalesced, late=late, detail=detail, owner=owner, finished_at=now,
        )
        if next_due is not None and next_due <= now:
            # Handling a due time must move it into the future, or the scheduler, which
            # re-arms from this record, fires again at once (and again, and again).
            next_due = schedule.next_after(now)
        retired = changes.pop("retired", None) or (None if next_due is not None else DONE)
        updated = replace(job, next_due=next_due, retired=retired, **changes)  # type: ignore[arg-type]
        return Decision(_count(updated, status), records=(record,), interrupted=interrupted)

    if job.running is not None:
        return skip(SKIPPED_OVERLAP, f"the run {job.running.run_key} was still going", following)
    if not schedule.recurring and late > job.grace_for(occurrence):
        return skip(
            MISSED, f"missed by {_span(late)} (grace {_span(job.grace_for(occurrence))})", None,
            retired=MISSED, last_status=MISSED,
        )
    if schedule.recurring and job.backoff_until is not None and occurrence < job.backoff_until:
        resume = schedule.first_at_or_after(job.backoff_until)
        detail = (
            f"backing off after {job.failures} failure(s) in a row until "
            f"{format_instant(job.backoff_until, schedule.tz)}"
        )
        return skip(SKIPPED_BACKOFF, detail, resume)
    if late > job.grace_for(occurrence) and job.catch_up == "skip":
        detail = f"missed by {_span(late)} (grace {_span(job.grace_for(occurrence))}); catch_up is skip"
        return skip(SKIPPED_MISSED, detail, following)

    stamp = stamp_of(occurrence)
    runs = job.runs + 1
    finished_all = following is None or (job.repeat is not None and runs >= job.repeat)
    running = Running(
        run_key=stamp,
        kind=SCHEDULED,
        occurrence=occurrence,
        owner=owner,
        claimed_at=now,
        lease_until=now + LEASE,
        version=job.version,
        prev_state={"next_due": job.next_due, "runs": job.runs, "retired": job.retired},
    )
    claimed = replace(
        job,
        runs=runs,
        next_due=None if finished_all else following,
        retired=DONE if finished_all else None,
        running=running,
    )
    detail = ""
    if late > job.grace_for(occurrence):
        detail = f"caught up {_span(late)} late"
    elif late >= 1:
        detail = f"ran {_span(late)} late (within the grace)"
    if coalesced:
        detail = f"{detail}; {coalesced} earlier occurrence(s) coalesced into this run".lstrip("; ")
    record = RunRecord(
        job.name, stamp, SCHEDULED, RUNNING, occurrence, now,
        coalesced=coalesced, late=late, detail=detail, owner=owner,
    )
    return Decision(claimed, run=record, interrupted=interrupted)


def claim_manual(job: CronJob, now: float, *, owner: str, stamp: str) -> tuple[CronJob, RunRecord]:
    """Mark a manual run (``vigil cron run``) as going; the schedule is left as it is."""
    running = Running(
        run_key=stamp, kind=MANUAL, occurrence=None, owner=owner, claimed_at=now,
        lease_until=now + LEASE, version=job.version,
    )
    record = RunRecord(job.name, stamp, MANUAL, RUNNING, None, now, owner=owner, detail="run by hand")
    return replace(job, running=running), record


def finished(
    job: CronJob, run: Running, status: str, now: float, *, error: str | None, session_id: str | None
) -> CronJob:
    """The job after the run ``run`` ended with ``status`` (``ok``, ``silent``, ``failed`` ...).

    Scheduled runs drive the failure streak and back-off; manual runs only update the "last
    run" fields.
    """
    if job.running is None or job.running.run_key != run.run_key:
        return job  # the job was removed and added again meanwhile: this run is not its own
    updated = replace(
        job,
        running=None,
        last_run_at=run.claimed_at,
        last_status=status,
        last_error=error,
        last_session=session_id,
    )
    if run.kind == SCHEDULED:
        if status == FAILED:
            failures = job.failures + 1
            # Counted from the occurrence, not from when the run ended: a job that fails
            # within seconds is tried again 1, 2, 4 ... minutes after its failed occurrence,
            # not one whole period later than that.
            start = run.occurrence if run.occurrence is not None else now
            updated = replace(updated, failures=failures, backoff_until=start + backoff_seconds(failures))
        elif status in (OK, SILENT):
            updated = replace(updated, failures=0, backoff_until=None)
    return _count(updated, status)


def refunded(job: CronJob, run: Running) -> CronJob:
    """Give back a claim that never reached the agent (emergency stop, cancelled first).

    The schedule is restored only when the job was not changed since the claim.
    """
    if job.running is None or job.running.run_key != run.run_key:
        return job
    job = replace(job, running=None)
    prev = run.prev_state
    if run.kind == SCHEDULED and prev is not None and job.version == run.version:
        job = replace(job, next_due=prev["next_due"], runs=prev["runs"], retired=prev["retired"])
    return job


def _count(job: CronJob, status: str) -> CronJob:
    counts = dict(job.counts)
    counts[status] = counts.get(status, 0) + 1
    return replace(job, counts=counts)


def _span(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d"
