"""Cron jobs in the session store, changed only by compare-and-set.

Every change reads the job record, computes the next one with a pure transition
(:mod:`vigil.schedule.cron.jobs`, :mod:`vigil.schedule.cron.plan`) and swaps it in with
``compare_and_set_meta``; a lost race re-reads and tries again. Claiming an occurrence is one
such swap (it moves ``next_due`` past the occurrence and records the run as going), so several
processes ticking one ``state.db`` run each occurrence exactly once.

Definition changes bump the profile's schedule generation so that running schedulers in other
processes notice them. All methods are synchronous (the store is).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from vigil.clock import Clock, SystemClock
from vigil.schedule.cron import plan as cron_plan
from vigil.schedule.changes import bump_generation
from vigil.schedule.cron.errors import CronError, DamagedJob, JobBusy, JobExists, JobNotFound
from vigil.schedule.cron.jobs import JOB_PREFIX, CronJob, JobSpec, Running, edited_job, job_key
from vigil.schedule.cron.plan import OwnerAlive
from vigil.schedule.cron.runs import INTERRUPTED, RUNNING, RunLog, RunRecord, stamp_of
from vigil.schedule.heartbeat.repo import PROCESS_OWNER
from vigil.schedule.liveness import Liveness
from vigil.store import SessionNotFound, SessionStore, StoreError
from vigil.store.records import MetaSwap

_ATTEMPTS = 50
_BATCH_ROUNDS = 3
"""Reads and batched swaps :meth:`CronRepo.claim_due_many` tries before going job by job."""
_PRUNE_EVERY = 25


class _Abort(Exception):
    """A transition found the record in a state where it does not apply."""


@dataclass(frozen=True, slots=True)
class Claim:
    """An occurrence (or a manual run) claimed for running by this process.

    ``job`` is the record right after the claim; ``record`` the run-log entry (``running``).
    """

    job: CronJob
    running: Running
    record: RunRecord


@dataclass(frozen=True, slots=True)
class DueResult:
    """What :meth:`CronRepo.claim_due` did: ``claim`` when a run is to start, ``records`` for
    occurrences skipped or missed, ``job`` the record afterwards (``None``: no such job)."""

    job: CronJob | None
    claim: Claim | None = None
    records: tuple[RunRecord, ...] = ()
    recovered: bool = False
    error: str | None = None
    """Why nothing could be done (a damaged record, the store failing): from
    :meth:`CronRepo.claim_due_many`, which does not raise for one job."""


class CronRepo:
    """Reads and changes one profile's cron jobs and run log."""

    def __init__(
        self,
        store: SessionStore,
        clock: Clock | None = None,
        *,
        owner: str = PROCESS_OWNER,
        alive: OwnerAlive | None = None,
    ) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.owner = owner
        self.alive = alive or Liveness(store, self.clock).owner_alive
        """Whether the owner of a run still runs: by pid on this host, by the store's worker
        and lease holder records elsewhere (:mod:`vigil.schedule.liveness`)."""
        self.runs = RunLog(store)

    # -- reading ----------------------------------------------------------------------------
    def find(self, name: str) -> CronJob | None:
        """The job called ``name`` or ``None``; :class:`DamagedJob` for an unreadable record."""
        entry = self.store.get_meta(job_key(name))
        return None if entry is None else CronJob.from_json(entry.value)

    def find_many(self, names: Sequence[str]) -> dict[str, CronJob]:
        """The readable jobs among ``names``, by name, in one read (missing and damaged
        records are left out)."""
        found = {}
        for key, entry in self.store.get_meta_many([job_key(n) for n in names]).items():
            try:
                job = CronJob.from_json(entry.value)
            except DamagedJob:
                continue
            found[job.name] = job
        return found

    def get(self, name: str) -> CronJob:
        job = self.find(name)
        if job is None:
            raise JobNotFound(name)
        return job

    def list(self) -> list[CronJob]:
        """Every readable job, by name; damaged records are skipped (see :meth:`damaged`)."""
        out = []
        for entry in self.store.list_meta(JOB_PREFIX):
            try:
                out.append(CronJob.from_json(entry.value))
            except DamagedJob:
                continue
        return out

    def damaged(self) -> list[str]:
        """Keys of job records that cannot be decoded."""
        bad = []
        for entry in self.store.list_meta(JOB_PREFIX):
            try:
                CronJob.from_json(entry.value)
            except DamagedJob:
                bad.append(entry.key)
        return bad

    # -- definition changes -------------------------------------------------------------------
    def add(self, job: CronJob) -> CronJob:
        """Store a new, fully validated job; :class:`JobExists` if the name is taken."""
        if not self.store.compare_and_set_meta(job_key(job.name), None, job.to_json()):
            raise JobExists(job.name)
        bump_generation(self.store)
        return job

    def edit(self, name: str, spec: JobSpec, *, skills_dir: Path | None) -> CronJob:
        """Change the fields given in ``spec``; nothing is stored when any of them is invalid."""
        job = self._update(name, lambda job: edited_job(job, spec, now=self.clock.now(), skills_dir=skills_dir))
        bump_generation(self.store)
        return job

    def pause(self, name: str) -> tuple[CronJob, bool]:
        """Pause; returns the job and whether it changed."""
        return self._toggle(name, pause=True)

    def resume(self, name: str) -> tuple[CronJob, bool]:
        """Resume from now on (occurrences missed while paused are not made up)."""
        return self._toggle(name, pause=False)

    def remove(self, name: str) -> tuple[CronJob | None, int]:
        """Delete the job and its run log; returns it (``None`` if its record was damaged) and
        how many run records went.

        Sessions of past runs and files in ``cron/output`` stay. A run still going finishes
        but no longer changes anything.
        """
        for _ in range(_ATTEMPTS):
            entry = self.store.get_meta(job_key(name))
            if entry is None:
                raise JobNotFound(name)
            if self.store.compare_and_set_meta(job_key(name), entry.value, None):
                break
        else:
            raise CronError(f"the cron job '{name}' keeps changing; try again")
        try:
            job = CronJob.from_json(entry.value)
        except DamagedJob:
            job = None
        removed = self.runs.remove_all(name)
        bump_generation(self.store)
        return job, removed

    # -- run accounting ---------------------------------------------------------------------
    def claim_due(self, name: str) -> DueResult:
        """Handle whatever is due for ``name`` now: claim a run, record skips, recover a run
        whose owner died. Only one process wins each occurrence."""
        decision: list[cron_plan.Decision | None] = [None]

        def change(job: CronJob) -> CronJob:
            decision[0] = cron_plan.plan_due(job, self.clock.now(), owner=self.owner, alive=self.alive)
            if decision[0] is None:
                raise _Abort
            return decision[0].job

        try:
            job = self._update(name, change)
        except (_Abort, JobNotFound):
            return DueResult(self.find_quietly(name))
        made = decision[0]
        assert made is not None
        if made.interrupted is not None:
            self._mark_interrupted(name, made.interrupted)
        for record in made.records:
            self.runs.put(record)
        if made.records:
            self._maybe_prune(job, len(made.records))
        claim = None
        if made.run is not None:
            self.runs.put(made.run)
            assert job.running is not None
            claim = Claim(job, job.running, made.run)
        return DueResult(job, claim, made.records, made.interrupted is not None)

    def claim_due_many(self, names: Sequence[str]) -> list[DueResult]:
        """:meth:`claim_due` for each of ``names`` (distinct), in order, with every job
        record and run record written in one transaction: one durable commit for all the
        occurrences due at one moment, however many (the scheduler hands it a burst in
        chunks, see :func:`vigil.schedule.cron.plan.claim_chunks`).

        Each job is still swapped in by compare-and-set, so of several processes exactly one
        claims each occurrence. The jobs whose swap lost (another process got there first)
        are read again together and planned again, a few rounds at most; only what is still
        undecided then, and a job that needs more than one step (a run to recover), goes
        through :meth:`claim_due`. A job that cannot be handled gets a result with ``error``
        set; this never raises.
        """
        results: dict[str, DueResult] = {}
        one_by_one: list[str] = []
        pending = list(names)
        for _ in range(_BATCH_ROUNDS):
            if not pending:
                break
            pending = self._claim_round(pending, results, one_by_one)
        for name in [*one_by_one, *pending]:
            try:
                results[name] = self.claim_due(name)
            except (CronError, StoreError) as exc:
                results[name] = DueResult(None, error=str(exc))
        return [results[name] for name in names]

    def _claim_round(self, names: list[str], results: dict[str, DueResult], one_by_one: list[str]) -> list[str]:
        """One read and one batch of swaps for ``names``: the decided ones go in ``results``,
        those to take alone in ``one_by_one``; returns those whose swap lost."""
        now = self.clock.now()
        try:
            entries = self.store.get_meta_many([job_key(name) for name in names])
        except StoreError:  # e.g. one record that is not JSON at all: each alone says which
            one_by_one.extend(names)
            return []
        planned: list[tuple[str, cron_plan.Decision]] = []
        for name in names:
            entry = entries.get(job_key(name))
            if entry is None:
                results[name] = DueResult(None)
                continue
            try:
                job = CronJob.from_json(entry.value)
            except DamagedJob:
                one_by_one.append(name)
                continue
            decision = cron_plan.plan_due(job, now, owner=self.owner, alive=self.alive)
            if decision is None:
                results[name] = DueResult(job)
            elif decision.interrupted is not None:
                one_by_one.append(name)
            else:
                planned.append((name, decision))
        swaps = [
            MetaSwap(
                job_key(name),
                entries[job_key(name)].value,
                decision.job.to_json(),
                tuple((r.key, r.to_json()) for r in (*decision.records, *filter(None, [decision.run]))),
            )
            for name, decision in planned
        ]
        try:
            swapped = self.store.compare_and_set_many(swaps) if swaps else []
        except StoreError:
            one_by_one.extend(name for name, _ in planned)
            return []
        lost = []
        for (name, decision), won in zip(planned, swapped):
            if not won:
                lost.append(name)
                continue
            job = decision.job
            if decision.records:
                self._maybe_prune(job, len(decision.records))
            claim = None
            if decision.run is not None:
                assert job.running is not None
                claim = Claim(job, job.running, decision.run)
            results[name] = DueResult(job, claim, decision.records)
        return lost

    def claim_manual(self, name: str) -> Claim:
        """Claim a run of ``name`` now, outside the schedule; :class:`JobBusy` if it is running.

        The job's claim and the run's record are written in one transaction, so a process dying
        in between leaves neither (a record alone would show ``running`` for ever); a run that a
        dead process left behind is recorded as interrupted in the same transaction."""
        key = job_key(name)
        for _ in range(_ATTEMPTS):
            now = self.clock.now()
            entry = self.store.get_meta(key)
            if entry is None:
                raise JobNotFound(name)
            job = CronJob.from_json(entry.value)
            left_behind: RunRecord | None = None
            if job.running is not None:
                if not cron_plan.is_abandoned(job.running, now, self.alive):
                    raise JobBusy(
                        f"the cron job '{name}' is running (since {stamp_of(job.running.claimed_at)}); "
                        "wait for that run to end"
                    )
                record = self.runs.get(name, job.running.run_key)
                if record is not None and record.status == RUNNING:
                    left_behind = record.finished(INTERRUPTED, now, error="the process running it stopped")
            stamp = self._free_stamp(name, f"{stamp_of(now)}-manual")
            claimed, record = cron_plan.claim_manual(job, now, owner=self.owner, stamp=stamp)
            writes = [(record.key, record.to_json())]
            if left_behind is not None:
                writes.append((left_behind.key, left_behind.to_json()))
            if self.store.compare_and_set_many([MetaSwap(key, entry.value, claimed.to_json(), tuple(writes))])[0]:
                if left_behind is not None and left_behind.session_id is not None:
                    with contextlib.suppress(SessionNotFound):
                        self.store.end_session(left_behind.session_id, INTERRUPTED, ended_at=now)
                assert claimed.running is not None
                return Claim(claimed, claimed.running, record)
        raise CronError(f"the cron job '{name}' keeps changing; try again")

    def _free_stamp(self, name: str, stamp: str) -> str:
        """``stamp``, or ``stamp-2``, ``-3`` …: the first no run record of ``name`` has (manual
        runs in the same second). Two processes cannot both take one: the job's swap admits one."""
        candidate, number = stamp, 1
        while self.runs.get(name, candidate) is not None:
            number += 1
            candidate = f"{stamp}-{number}"
        return candidate

    def finish(self, claim: Claim, record: RunRecord, *, error: str | None = None) -> CronJob | None:
        """Record how the run ended (``record`` is its final run-log entry) and update the job."""
        self.runs.put(record)

        def change(job: CronJob) -> CronJob:
            return cron_plan.finished(
                job, claim.running, record.status, self.clock.now(), error=error, session_id=record.session_id
            )

        try:
            job = self._update(claim.job.name, change)
        except JobNotFound:
            return None
        self._maybe_prune(job, 1)
        return job

    def refund(self, claim: Claim) -> CronJob | None:
        """Give back a claim that never reached the agent; its run record is deleted."""
        try:
            job = self._update(claim.job.name, lambda job: cron_plan.refunded(job, claim.running))
        except JobNotFound:
            job = None
        self.runs.delete(claim.job.name, claim.record.stamp)
        return job

    def recover_abandoned(self, jobs: list[CronJob] | None = None) -> list[str]:
        """Mark runs left behind by dead processes as interrupted (at start-up, and when a
        worker sharing the store is found dead); returns the names. ``jobs`` saves a read
        when the caller has just listed them. An occurrence that came due meanwhile is left
        to the scheduler: the claim made while recovering is given back, not dropped."""
        recovered = []
        now = self.clock.now()
        for job in self.list() if jobs is None else jobs:
            if job.running is not None and cron_plan.is_abandoned(job.running, now, self.alive):
                result = self.claim_due(job.name)
                if result.claim is not None:
                    self.refund(result.claim)
                if result.recovered:
                    recovered.append(job.name)
        return recovered

    # -- internals ----------------------------------------------------------------------------
    def find_quietly(self, name: str) -> CronJob | None:
        try:
            return self.find(name)
        except DamagedJob:
            return None

    def _maybe_prune(self, job: CronJob, added: int) -> None:
        # Every _PRUNE_EVERY handled occurrences, not on every write: pruning lists the log.
        total = sum(job.counts.values())
        if total // _PRUNE_EVERY != (total - added) // _PRUNE_EVERY:
            self.runs.prune(job.name)

    def _mark_interrupted(self, name: str, running: Running) -> None:
        record = self.runs.get(name, running.run_key)
        if record is not None and record.status == RUNNING:
            self.runs.put(
                record.finished(INTERRUPTED, self.clock.now(), error="the process running it stopped")
            )
            if record.session_id is not None:
                with contextlib.suppress(SessionNotFound):  # a deleted session needs no ending
                    self.store.end_session(record.session_id, INTERRUPTED, ended_at=self.clock.now())

    def _toggle(self, name: str, *, pause: bool) -> tuple[CronJob, bool]:
        changed = [False]

        def change(job: CronJob) -> CronJob:
            if job.paused == pause:
                raise _Abort
            changed[0] = True
            now = self.clock.now()
            return job.paused_at(now) if pause else job.resumed_at(now)

        try:
            job = self._update(name, change)
        except _Abort:
            return self.get(name), False
        bump_generation(self.store)
        return job, changed[0]

    def _update(self, name: str, change: Callable[[CronJob], CronJob]) -> CronJob:
        key = job_key(name)
        for _ in range(_ATTEMPTS):
            entry = self.store.get_meta(key)
            if entry is None:
                raise JobNotFound(name)
            new = change(CronJob.from_json(entry.value))
            if self.store.compare_and_set_meta(key, entry.value, new.to_json()):
                return new
        raise CronError(f"the cron job '{name}' keeps changing; try again")
