"""The cron scheduler of one process: arms the shared due-time engine with every job's next
occurrence and, when one comes, claims it in the store and hands the claim to the runner.

* One sleeper for all jobs (:class:`vigil.schedule.engine.DueEngine`): no per-job timers, no
  per-job polling. A change made in this process re-arms at once (:meth:`refresh`); changes
  made by other processes are noticed through the profile's schedule generation, one key read
  every ``poll_interval`` seconds.
* A due job is claimed with compare-and-set before anything runs, so several processes (or a
  gateway and a system crontab running ``vigil cron tick``) never run one occurrence twice.
  A claim that finds the occurrence taken just re-arms from what the store says.
* Every job that comes due at one wake-up of the engine (every ``0 * * * *`` job at the top
  of the hour) is claimed in a few store transactions (chunks of
  :data:`vigil.schedule.cron.plan.CLAIM_CHUNK`), so a burst costs a commit per chunk rather
  than two per job. Each process takes the chunks in an order of its own: several workers
  sharing the store split a burst instead of racing for every job of it.
* At most ``max_concurrent`` runs at a time: claims wait for a free slot to start (the run
  record's ``started_at`` says when one did); a claim still waiting when the scheduler
  stops is given back.
* The emergency stop parks everything; :meth:`tick` does nothing while it is on. A stop
  engaged by another process is seen at the next poll, or earlier when the runner gives a
  claim back because of it; the resync after its release arms every job again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from vigil.clock import Clock, SystemClock
from vigil.schedule import estop
from vigil.schedule.changes import read_generation
from vigil.schedule.cron.jobs import CronJob
from vigil.schedule.cron.plan import CLAIM_CHUNK, claim_chunks
from vigil.schedule.cron.repo import Claim, CronRepo, DueResult
from vigil.schedule.cron.runs import RunRecord
from vigil.schedule.engine import DueEngine
from vigil.schedule.polling import Offload, OffloadedCalls, watch_changes
from vigil.store import StoreError

log = logging.getLogger(__name__)

Execute = Callable[[Claim], Awaitable[RunRecord | None]]
"""Runs a claim to its end and returns the final run record, or ``None`` when it gave the
claim back without running it (the emergency stop is on)."""

POLL_INTERVAL = 15.0
MAX_CONCURRENT = 4
STOP_GRACE = 10.0
"""Seconds a stopping scheduler lets running jobs finish before cancelling them."""


@dataclass
class CronStats:
    claims: int = 0
    """Runs claimed by this process."""
    skipped: int = 0
    """Occurrences recorded as skipped or missed by this process."""
    not_due: int = 0
    """Due wake-ups that found nothing to do (another process took it, paused, changed)."""
    recovered: int = 0
    stopped: int = 0
    """Claims given back because the emergency stop was on (engaged by another process)."""
    generation_checks: int = 0
    """Reads of the schedule generation by the change watcher."""
    finished: list[RunRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TickReport:
    """What one :meth:`CronScheduler.tick` did."""

    runs: tuple[RunRecord, ...] = ()
    skipped: tuple[RunRecord, ...] = ()
    stopped: bool = False


class CronScheduler:
    """Runs due cron jobs of one profile in this process."""

    def __init__(
        self,
        repo: CronRepo,
        execute: Execute,
        *,
        clock: Clock | None = None,
        poll_interval: float = POLL_INTERVAL,
        max_concurrent: int = MAX_CONCURRENT,
        offload: Offload | None = None,
        keep_finished: bool = False,
        claim_chunk: int = CLAIM_CHUNK,
    ) -> None:
        self.repo = repo
        self.execute = execute
        self.clock = clock or SystemClock()
        self.poll_interval = poll_interval
        self.stats = CronStats()
        self.engine = DueEngine(self.clock, self._on_due)
        self._call = OffloadedCalls(offload)
        self._slots = asyncio.Semaphore(max_concurrent)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._generation: str | None = None
        self._stopped = False
        self._watcher: asyncio.Task[None] | None = None
        self._keep_finished = keep_finished
        self._claim_chunk = claim_chunk
        self._armed: set[str] = set()
        self._due_now: list[str] = []
        self._ended: list[str] = []

    @property
    def store(self) -> Any:
        return self.repo.store

    @property
    def busy(self) -> int:
        """Dispatches (claims and runs) and store calls in progress (for tests and benchmarks)."""
        return len(self._tasks) + self._call.in_flight + len(self._due_now) + len(self._ended)

    # -- life cycle ---------------------------------------------------------------------------
    async def start(self) -> int:
        """Recover runs left by dead processes, arm every job and start the engine and the
        change watcher. Returns how many jobs are armed."""
        self._generation = await self._call(read_generation, self.store)
        await self.resync(recover=True)
        self.engine.start()
        if self._watcher is None and self.poll_interval > 0:
            self._watcher = asyncio.create_task(self._watch(), name="cron-watcher")
        return len(self._armed)

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop arming and claiming; let running jobs end within ``grace`` seconds (of real
        time), then cancel them (they are recorded as interrupted)."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await self.engine.stop()
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    # -- arming -------------------------------------------------------------------------------
    async def resync(self, *, recover: bool = False) -> None:
        """Re-read every job and arm or disarm it (after a change made elsewhere); with
        ``recover``, first close runs whose process died."""
        self._stopped = await self._call(estop.engaged, self.store)
        jobs = await self._call(self.repo.list)
        if recover:
            recovered = set(await self._call(self.repo.recover_abandoned, jobs))
            self.stats.recovered += len(recovered)
            if recovered:
                jobs = [job for job in jobs if job.name not in recovered]
                jobs += [j for j in [await self._call(self.repo.find_quietly, n) for n in recovered] if j]
        names = {job.name for job in jobs}
        for job in jobs:
            self._arm(job.name, job)
        for name in self._armed - names:
            self._arm(name, None)

    async def refresh(self, name: str) -> CronJob | None:
        """Re-read one job and arm it (after a change made in this process)."""
        job = await self._call(self.repo.find_quietly, name)
        self._arm(name, job)
        return job

    async def check_changes(self) -> bool:
        """Read the schedule generation once; resync when it moved. Returns whether it did."""
        self.stats.generation_checks += 1
        generation = await self._call(read_generation, self.store)
        if generation == self._generation:
            return False
        self._generation = generation
        await self.resync()
        return True

    def _arm(self, name: str, job: CronJob | None) -> None:
        if job is None or not job.active or job.next_due is None or self._stopped:
            self.engine.disarm(name)
            self._armed.discard(name)
        else:
            self.engine.arm(name, job.next_due)
            self._armed.add(name)

    def _park(self, name: str) -> None:
        # The stop was engaged elsewhere and this scheduler's poll has not seen it yet. The
        # refund restored a due time in the past: armed again, it would be claimed and
        # refunded in a tight loop. The resync that follows the stop's release re-arms it.
        self._stopped = True
        self.stats.stopped += 1
        self._arm(name, None)

    def _on_due(self, name: str, _due: float) -> None:
        if self._stopped:
            return  # re-armed by the resync that follows the stop's release
        # The engine calls this for every key due at one wake-up in a row; they are claimed
        # together once it is done, in one transaction.
        self._due_now.append(name)
        if len(self._due_now) == 1:
            asyncio.get_running_loop().call_soon(self._claim_due_now)

    def _claim_due_now(self) -> None:
        names, self._due_now = self._due_now, []
        if names:
            self._spawn(self._claim_and_run(list(dict.fromkeys(names)), rearm=True))

    # -- dispatching --------------------------------------------------------------------------
    async def tick(self) -> TickReport:
        """Handle everything due now once and wait for the runs to end (``vigil cron tick``)."""
        if await self._call(estop.engaged, self.store):
            return TickReport(stopped=True)
        now = self.clock.now()
        jobs = await self._call(self.repo.list)
        due = [job.name for job in jobs if _wants_attention(job, now)]
        runs, skipped = await self._claim_and_run(due, rearm=False) if due else ([], [])
        return TickReport(tuple(runs), tuple(skipped))

    async def _claim_and_run(
        self, names: list[str], *, rearm: bool
    ) -> tuple[list[RunRecord], list[RunRecord]]:
        """Claim whatever is due for ``names``, a chunk to a store transaction in this
        process's own order of chunks (so that workers sharing the store split a burst), then
        run the claims, at most ``max_concurrent`` at a time; returns the finished runs and
        the skips."""
        claims: list[tuple[str, Claim]] = []
        skipped: list[RunRecord] = []
        # The runs start once the whole burst is claimed: started earlier, their store calls
        # (and those of runs that end at once) queue with the claims of the next chunks.
        for chunk in claim_chunks(names, self.repo.owner, self._claim_chunk):
            results: list[DueResult] = await self._call(self.repo.claim_due_many, chunk)
            for name, result in zip(chunk, results):
                if result.error is not None:
                    log.warning("cannot claim the cron job %s: %s", name, result.error)
                    continue
                self.stats.skipped += len(result.records)
                self.stats.recovered += int(result.recovered)
                skipped.extend(result.records)
                if rearm:
                    self._arm(name, result.job)
                if result.claim is None:
                    self.stats.not_due += int(not result.records and not result.recovered)
                    continue
                self.stats.claims += 1
                claims.append((name, result.claim))
        runs = [self._run(name, claim, rearm=rearm) for name, claim in claims]
        if rearm:
            for run in runs:
                self._spawn(run)
            return [], skipped
        records = await asyncio.gather(*runs)
        return [record for record in records if record is not None], skipped

    async def _run(self, name: str, claim: Claim, *, rearm: bool) -> RunRecord | None:
        try:
            await self._slots.acquire()
        except asyncio.CancelledError:  # stopping before the run could start: give it back
            await asyncio.shield(self._call(self.repo.refund, claim))
            raise
        try:
            record = await self.execute(claim)
        finally:
            self._slots.release()
        if record is None and rearm and await self._call(estop.engaged, self.store):
            self._park(name)
            return None
        if record is not None and self._keep_finished:
            self.stats.finished.append(record)
        if rearm:
            self._refresh_soon(name)
        return record

    def _refresh_soon(self, name: str) -> None:
        # Runs that end together (a burst of short ones) are re-read in one store call.
        self._ended.append(name)
        if len(self._ended) == 1:
            asyncio.get_running_loop().call_soon(self._refresh_ended)

    def _refresh_ended(self) -> None:
        names, self._ended = list(dict.fromkeys(self._ended)), []
        if names:
            self._spawn(self._refresh_many(names))

    async def _refresh_many(self, names: list[str]) -> None:
        try:
            jobs = await self._call(self.repo.find_many, names)
        except StoreError as exc:  # one record that is not JSON spoils the read of them all
            log.warning("cannot re-read %d cron jobs together (%s); reading them one by one", len(names), exc)
            for name in names:
                try:
                    await self.refresh(name)
                except StoreError:
                    self._arm(name, None)
            return
        for name in names:
            self._arm(name, jobs.get(name))

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch(self) -> None:
        await watch_changes(self.clock, self.poll_interval, self.check_changes, "cron", store=self.store)


def due_names(repo: CronRepo, *, include_running: bool = True) -> list[str]:
    """Names of the jobs a tick at this moment would look at: those due, and (to recover
    runs whose process died) those with a run going."""
    now = repo.clock.now()
    return [job.name for job in repo.list() if _wants_attention(job, now, include_running)]


def _wants_attention(job: CronJob, now: float, include_running: bool = True) -> bool:
    due = job.active and job.next_due is not None and job.next_due <= now
    return due or (include_running and job.running is not None)
