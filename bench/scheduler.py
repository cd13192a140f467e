"""Heartbeats and cron jobs at scale, side by side in one process, one state.db, the real clock.

Workload: N heartbeats (default 100,000) with random intervals between 1 minute and 1 day, each
at a random phase, and M cron jobs (default 10,000) with a mix of schedules (see
``cron_schedule_for``): ``every Nm`` / ``every Nh`` intervals at random phases, staggered
``o-59/N * * * *`` and hourly expressions, and daily / weekday expressions in five time zones.
Enough of them come due within a minute that cron lateness is measured too; every expression
fires on the :00 second of a minute, so each minute boundary brings a cron burst.

Both live in one state.db (durable, synchronous=FULL). One HeartbeatScheduler and one
CronScheduler share one store and one event loop, each with its own due-time engine and a
no-op dispatcher that goes through the real protocol (heartbeats: claim → confirm; cron:
claim → hand-off, the run recorded as finished in the background; store calls in worker
threads as in the gateway). Printed, for heartbeats, for
cron and for both together:

* arming: time to write the records, and to load and arm them (start-up incl. recovery scans);
  RSS added per heartbeat / per job;
* running (``--seconds`` on the real clock): fires, fire lateness p50/p99/max (fire/claim time -
  due time), fires per second at peak, engine wake-ups against distinct due times, CPU of the
  process, RSS;
* live timers: CPU while the workload's due times keep coming, spread through the window as
  they fall and fired as they should (nothing moved away), both schedulers together and each
  alone (``--live`` seconds each): share of a core, fires in the window and their lateness, CPU
  per fire (the figure to compare: a window holding a minute's :00 second has cron's expression
  burst in it, one without has not), against naive baselines that scan the store once a second (the scan alone, firing
  nothing);
* baseline (issue 10): the same cron jobs for another ``--seconds`` window, claimed one
  transaction per claim as before claims were batched, lateness side by side;
* burst: claim throughput when many heartbeats / many cron jobs are due at the same moment,
  and ``--same-second`` (2,000) unstaggered ``0 * * * *`` jobs due on one second: lateness
  (due time → claimed and handed to a no-op dispatcher) p50/p99/max and fires/s, batched
  claims against one transaction per claim;
* cron store operations: claims, lost races and finishes against a bare ``set_meta`` of the
  same record, and next-due computation per schedule kind (pure CPU).

    .venv/bin/python bench/scheduler.py [--heartbeats 100000] [--cron-jobs 10000] [--seconds 60]
        [--live 15] [--burst 5000] [--claims 2000] [--same-second 2000] [--leases]
    .venv/bin/python bench/scheduler.py --store postgresql://USER@HOST/DB --workers 1,3
        [--cron-jobs 6000] [--seconds 30] [--same-second 2000] [--poll 15] [--json]

``--store`` (a ``postgresql://`` URL, or ``sqlite`` for a temporary file): instead of all of the
above, cron jobs claimed by ``--workers`` OS processes sharing that store, each running the real
CronScheduler with a no-op dispatcher; fires/s, lateness p50/p99/max, exactly-once, and the
figures of each worker count side by side with its ratio to the first (see
``bench/scheduler_workers.py``).

``--leases``: the heartbeat scheduler runs as the gateway's does, with ownership leases
(``LeaseBook(kind="gateway")``), adopting every heartbeat at start instead of owning them one
by one; renewing them is one store write per tick whatever their number.

Targets (issue 5, applied to both workloads by issue 6): CPU under 2% of a core between fires
(here measured with the timers live, so it includes the fires of the workload's rate), p99
lateness under 1 s; issue 10: cron p99 lateness of the 10,000-job mix at most 100 ms, the
same-second burst claimed within 1 s. The summary says whether they were met; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import random
import resource
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from vigil.clock import FakeClock, SystemClock
from vigil.schedule.cron.errors import CronError
from vigil.schedule.cron.jobs import JobSpec, job_key, new_job
from vigil.schedule.cron.repo import Claim, CronRepo
from vigil.schedule.cron.runs import RunRecord
from vigil.schedule.cron.schedule import Schedule, parse_schedule
from vigil.schedule.cron.scheduler import CronScheduler
from vigil.schedule.heartbeat.lease import GATEWAY, LeaseBook
from vigil.schedule.heartbeat.record import Heartbeat, heartbeat_key
from vigil.schedule.heartbeat.repo import Reservation
from vigil.schedule.heartbeat.scheduler import DirectTarget, HeartbeatScheduler
from vigil.store import SQLiteStore, StoreError
from vigil.store.records import MetaSwap

from scheduler_workers import NoOpDispatcher  # bench/ is the script's folder, first on sys.path

IDLE_TARGET = 0.02  # of one core
P99_TARGET = 1.0  # seconds
CRON_P99_TARGET = 0.1  # seconds, issue 10: cron lateness of the 10,000-job mix
BURST_TARGET = 1.0  # seconds, issue 10: the last of the same-second burst claimed
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Asia/Kolkata"]


# -- small helpers -------------------------------------------------------------------------
def out(text: str = "") -> None:
    print(text, flush=True)


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


# -- the workload ----------------------------------------------------------------------------
def write_heartbeats(path: Path, count: int, seed: int) -> float:
    """Store ``count`` active heartbeats at random phases; returns seconds taken."""
    rng = random.Random(seed)
    store = SQLiteStore(path, durable=False)  # set-up only; the schedulers use a durable store
    started = time.perf_counter()
    now = time.time()
    for i in range(count):
        interval = rng.randint(60, 86_400)
        hb = Heartbeat.create(f"{i:012x}", f"watch thing {i}", interval, now)
        store.set_meta(heartbeat_key(hb.session_id), {**hb.to_json(), "next_due": now + rng.uniform(0, interval)})
    store.close()
    return time.perf_counter() - started


@dataclass(frozen=True)
class CronPlan:
    """One generated job: its schedule text and zone, the time it is set at (a random phase for
    intervals), and its expected fires per second."""

    name: str
    text: str
    tz: str
    set_at: float
    rate: float
    expression: bool


def cron_schedule_for(n: int, rng: random.Random, base: float) -> CronPlan:
    """The mix (by share of jobs):

    * 35% ``every Nm``, N in 1..60 minutes, random phase;
    * 10% ``every Nh``, N in 2..24 hours, random phase;
    * 15% staggered ``o-59/N * * * *`` (N = 5, 10, 15, 20, 30; offset o random in 0..N-1);
    * 10% hourly ``M * * * *``;
    * 30% daily ``M H * * *`` or weekday ``M H * * 1-5`` in one of five zones.
    """
    share = rng.random()
    if share < 0.45:
        if share < 0.35:
            period = 60 * rng.choice([1, 2, 5, 10, 15, 20, 30, 45, 60])
            text = f"every {period // 60}m"
        else:
            period = 3600 * rng.choice([2, 3, 4, 6, 8, 12, 24])
            text = f"every {period // 3600}h"
        set_at = base - rng.uniform(0, period)  # as if set a while ago: random phase
        return CronPlan(f"iv-{n:05d}", text, "UTC", set_at, 1 / period, False)
    tz = rng.choice(ZONES)
    if share < 0.60:
        step = rng.choice([5, 10, 15, 20, 30])
        offset = rng.randrange(step)
        per_hour = len(range(offset, 60, step))
        return CronPlan(f"cx-{n:05d}", f"{offset}-59/{step} * * * *", tz, base, per_hour / 3600, True)
    if share < 0.70:
        return CronPlan(f"cx-{n:05d}", f"{rng.randrange(60)} * * * *", tz, base, 1 / 3600, True)
    minute, hour = rng.randrange(60), rng.randrange(24)
    if rng.random() < 0.5:
        return CronPlan(f"cx-{n:05d}", f"{minute} {hour} * * *", tz, base, 1 / 86_400, True)
    return CronPlan(f"cx-{n:05d}", f"{minute} {hour} * * 1-5", tz, base, 5 / 7 / 86_400, True)


def write_cron_jobs(store: SQLiteStore, count: int, seed: int) -> tuple[float, dict[str, Schedule], list[CronPlan]]:
    """Add ``count`` jobs through :meth:`CronRepo.add` (validate + CAS + generation bump) on
    the durable store; returns seconds taken, the schedules by name and the plans."""
    rng = random.Random(seed)
    repo = CronRepo(store, SystemClock())
    base = time.time()
    plans = [cron_schedule_for(n, rng, base) for n in range(count)]
    schedules: dict[str, Schedule] = {}
    started = time.perf_counter()
    for plan in plans:
        job = new_job(plan.name, JobSpec(plan.text, f"report {plan.name}", plan.tz),
                      now=plan.set_at, default_tz="UTC", skills_dir=None)
        repo.add(job)
        schedules[job.name] = job.schedule
    return time.perf_counter() - started, schedules, plans


# -- recorders (the no-op dispatchers) -------------------------------------------------------
@dataclass
class Fires:
    """Fires of one workload: lateness, per-second counts, due times; ``since`` separates the
    backlog that came due before the measurement began."""

    since: float = float("inf")
    until: float = float("inf")
    lateness: list[float] = field(default_factory=list)
    by_kind: dict[str, list[float]] = field(default_factory=dict)
    per_second: Counter[int] = field(default_factory=Counter)
    due_times: set[float] = field(default_factory=set)
    due_in_window: Counter[str] = field(default_factory=Counter)
    backlog: int = 0
    after: int = 0

    def record(self, due: float, fired: float, kind: str = "", key: str = "") -> None:
        if due < self.since:
            self.backlog += 1  # came due while loading
            return
        if fired > self.until:
            self.after += 1
            return
        self.lateness.append(fired - due)
        self.by_kind.setdefault(kind, []).append(fired - due)
        self.per_second[int(fired)] += 1
        self.due_times.add(due)
        if key:
            self.due_in_window[key] += 1


class HeartbeatRecorder:
    def __init__(self) -> None:
        self.fires = Fires()

    def __call__(self, reservation: Reservation) -> None:
        fired = reservation.heartbeat.last_fire or time.time()
        self.fires.record(reservation.due, fired)


class CronRunner(NoOpDispatcher):
    """The no-op dispatcher: notes the moment each claim is handed to it (that, minus the due
    time, is the lateness) and records the run as finished ok at once, in a background
    thread that does not hold the scheduler's slot, as a run that takes no time would."""

    def __init__(self, repo: CronRepo) -> None:
        super().__init__(repo)
        self.fires = Fires()

    def note(self, claim: Claim, occurrence: float, handed: float) -> None:
        kind = "expression" if claim.job.schedule.kind == "cron" else "interval"
        self.fires.record(occurrence, handed, kind, f"{claim.job.name}@{occurrence:.0f}")


# -- phases ------------------------------------------------------------------------------------
Scheduler = HeartbeatScheduler | CronScheduler


async def settle(hb: HeartbeatScheduler, target: DirectTarget, cron: CronScheduler, runner: "CronRunner") -> None:
    """Until the fires that came due while a scheduler was paused are done (bounded), so that a
    live window measures the workload's own rate, not a catch-up."""
    await asyncio.sleep(1.0)
    for _ in range(200):
        if not target.tasks and hb.quiet and not cron.busy and not runner.pending:
            return
        await asyncio.sleep(0.1)


async def pause(scheduler: Scheduler) -> None:
    if isinstance(scheduler, HeartbeatScheduler) and scheduler.leases is not None:
        # A pause, not the end: stop() would release every lease, and the release bumps the
        # schedule generation, which makes the cron scheduler resync.
        watcher, scheduler._watcher = scheduler._watcher, None
        if watcher is not None:
            watcher.cancel()
        await scheduler.engine.stop()
        return
    await scheduler.stop()


def resume(scheduler: Scheduler) -> None:
    """Restart a paused scheduler's engine and change watcher without re-reading the store."""
    scheduler.engine.start()
    scheduler._watcher = asyncio.create_task(scheduler._watch())


@dataclass
class Live:
    """One live window: CPU share of a core, the fires of due times inside it, engine wake-ups."""

    cpu: float = float("nan")
    fires: list[float] = field(default_factory=list)
    """Lateness of each fire whose due time fell in the window."""
    wakeups: int = 0
    seconds: float = float("nan")

    @property
    def per_fire_ms(self) -> float:
        return self.cpu * self.seconds / len(self.fires) * 1000 if self.fires else float("nan")


async def live_window(seconds: float, recorders: list[Any], *schedulers: Scheduler) -> Live:
    """CPU share of a core, fires and engine wake-ups over ``seconds`` with the timers live:
    every due time falling in the window fires (recorded afresh on each of ``recorders``)."""
    start = time.time()
    for recorder in recorders:
        recorder.fires = Fires(since=start, until=start + seconds)
    wake0 = sum(s.engine.stats.wakeups for s in schedulers)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    wall = time.perf_counter() - wall0
    live = Live(cpu=(time.process_time() - cpu0) / wall, seconds=wall,
                wakeups=sum(s.engine.stats.wakeups for s in schedulers) - wake0)
    live.fires = [x for recorder in recorders for x in recorder.fires.lateness]
    return live


async def naive(seconds: float, scan: Callable[[float], object]) -> float:
    """CPU share of the design the engines replace: read every schedule once a second."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        scan(time.time())
        await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - wall0) % 1.0))
    return (time.process_time() - cpu0) / (time.perf_counter() - wall0)


def scan_heartbeats(store: SQLiteStore) -> Callable[[float], object]:
    return lambda now: [e for e in store.list_meta("heartbeat:") if (e.value.get("next_due") or now + 1) <= now]


def scan_cron(repo: CronRepo) -> Callable[[float], object]:
    return lambda now: [j for j in repo.list() if j.next_due is not None and j.next_due <= now]


async def heartbeat_burst(store: SQLiteStore, count: int) -> tuple[float, int, Fires]:
    """``count`` heartbeats made due at once, fired by a fresh scheduler (only these owned)."""
    now = time.time()
    for i in range(count):
        key = heartbeat_key(f"{i:012x}")
        store.set_meta(key, {**store.get_meta(key).value, "next_due": now - 1, "pending": None})
    scheduler = HeartbeatScheduler(store, clock=SystemClock(), poll_interval=0)
    recorder = HeartbeatRecorder()
    recorder.fires.since = 0
    target = DirectTarget(scheduler, recorder)
    for i in range(count):
        scheduler.own(f"{i:012x}", target)
    await scheduler.resync()
    started = time.perf_counter()
    scheduler.engine.start()
    while scheduler.stats.confirmed < count and time.perf_counter() - started < 300:
        await asyncio.sleep(0.01)
    took = time.perf_counter() - started
    await scheduler.stop()
    return took, scheduler.stats.confirmed, recorder.fires


async def cron_burst(path: Path, count: int) -> tuple[float, int, Fires]:
    """``count`` cron jobs (``every 1h``) all due at the same second in a fresh state.db,
    claimed and finished by a fresh scheduler."""
    setup = SQLiteStore(path, durable=False)
    due = float(math.floor(time.time()))
    repo = CronRepo(setup, SystemClock())
    for n in range(count):
        job = new_job(f"b{n:05d}", JobSpec("every 1h", "p", "UTC"), now=due - 3600, default_tz="UTC", skills_dir=None)
        repo.add(job)
    setup.close()
    store = SQLiteStore(path)
    repo = CronRepo(store, SystemClock())
    runner = CronRunner(repo)
    runner.fires.since = 0
    scheduler = CronScheduler(repo, runner, poll_interval=0)
    await scheduler.resync()
    started = time.perf_counter()
    scheduler.engine.start()
    while (scheduler.stats.claims < count or scheduler.busy or runner.pending) and time.perf_counter() - started < 300:
        await asyncio.sleep(0.01)
    took = time.perf_counter() - started
    await scheduler.stop()
    store.close()
    return took, scheduler.stats.claims, runner.fires


class PerClaimCronScheduler(CronScheduler):
    """The baseline: the cron dispatch as it was before claims were batched (issue 10). Each
    due job is claimed on its own (its job record and then its run record: two commits one
    after the other), holding one of the ``max_concurrent`` slots from before its claim to
    the end of its run."""

    def _on_due(self, name: str, _due: float) -> None:
        if not self._stopped:
            self._spawn(self._dispatch_one(name))

    async def _dispatch_one(self, name: str) -> None:
        async with self._slots:
            try:
                result = await self._call(self.repo.claim_due, name)
            except (CronError, StoreError):
                return
            self._arm(name, result.job)
            if result.claim is None:
                return
            self.stats.claims += 1
            await self.execute(result.claim)
        await self.refresh(name)


SCHEDULERS: dict[str, type[CronScheduler]] = {
    "batched": CronScheduler,
    "per-claim": PerClaimCronScheduler,
}


@dataclass
class SameSecond:
    """A burst of jobs all due at one second: claim lateness and claims per second."""

    count: int
    claimed: int
    lateness: list[float]
    span: float  # due time -> the last claim

    @property
    def rate(self) -> float:
        return self.claimed / self.span if self.span > 0 else float("nan")


async def same_second_burst(path: Path, count: int, scheduler_class: type[CronScheduler]) -> SameSecond:
    """``count`` unstaggered ``0 * * * *`` jobs due on the same second, in a fresh state.db,
    claimed by a fresh scheduler of ``scheduler_class`` and handed to a dispatcher that does
    nothing (the runs are left going: the state.db is thrown away).

    The jobs are written due at a second a little ahead of the scheduler's start (not at the
    next top of the hour, which the bench cannot wait for): the scheduler treats the
    occurrence like any other, and lateness is measured from that second.
    """
    setup = SQLiteStore(path, durable=False)
    jobs = [
        new_job(f"h{n:05d}", JobSpec("0 * * * *", "p", "UTC"), now=time.time(), default_tz="UTC", skills_dir=None)
        for n in range(count)
    ]
    due = float(math.ceil(time.time())) + 2.0
    setup.compare_and_set_many(
        [MetaSwap(job_key(job.name), None, replace(job, next_due=due).to_json()) for job in jobs]
    )
    setup.close()
    store = SQLiteStore(path)
    repo = CronRepo(store, SystemClock())
    handed: list[float] = []

    async def dispatch(claim: Claim) -> RunRecord:  # a true no-op: it notes the hand-off
        handed.append(time.time())
        return claim.record

    scheduler = scheduler_class(repo, dispatch, poll_interval=0)
    await scheduler.resync()
    scheduler.engine.start()
    deadline = time.time() + 300
    while (scheduler.stats.claims < count or scheduler.busy) and time.time() < deadline:
        await asyncio.sleep(0.01)
    await scheduler.stop()
    store.close()
    lateness = [t - due for t in handed]
    return SameSecond(count, scheduler.stats.claims, lateness, max(lateness, default=float("nan")))


def claim_throughput(store: SQLiteStore, count: int) -> dict[str, float]:
    """Repository-level cron claims, lost races and finishes on a fake clock, against a bare
    ``set_meta`` of the same record (all synchronous, durable store)."""
    start = 1_800_000_000.0
    clock = FakeClock(start)
    repo = CronRepo(store, clock)
    for n in range(count):
        job = new_job(f"c{n:05d}", JobSpec("every 1h", "p", "UTC"), now=start, default_tz="UTC", skills_dir=None)
        repo.add(job)
    clock.set_sync(start + 3600)
    names = [f"c{n:05d}" for n in range(count)]
    claim_s, claims = timed(lambda: [repo.claim_due(name).claim for name in names])
    lost_s, _ = timed(lambda: [repo.claim_due(name) for name in names])  # every one already taken
    finish_s, _ = timed(lambda: [repo.finish(c, c.record.finished("ok", clock.now())) for c in claims if c])
    doc = repo.get(names[0]).to_json()
    base_s, _ = timed(lambda: [store.set_meta(f"baseline:{n}", doc) for n in range(count)])
    return {
        "claims_per_s": count / claim_s,
        "lost_races_per_s": count / lost_s,
        "finishes_per_s": count / finish_s,
        "set_meta_per_s": count / base_s,
    }


def next_due_throughput(seconds: float = 0.5) -> dict[str, float]:
    rng = random.Random(3)
    start = 1_772_409_600.0  # 2026-03-02 00:00 UTC
    kinds = {
        "interval": parse_schedule("every 2h", tz="UTC", now=start),
        "cron UTC": parse_schedule("30 9 * * 1-5", tz="UTC", now=start),
        "cron Europe/Berlin": parse_schedule("30 2 * * *", tz="Europe/Berlin", now=start),
        "cron staggered": parse_schedule("3-59/5 * * * *", tz="UTC", now=start),
    }
    rates = {}
    for label, schedule in kinds.items():
        done, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(100):
                schedule.next_after(start + rng.randrange(365 * 86400))
            done += 100
        rates[label] = done / (time.perf_counter() - t0)
    return rates


# -- the run -----------------------------------------------------------------------------------
@dataclass
class Figures:
    count: int = 0
    write_s: float = float("nan")
    load_s: float = float("nan")
    rss_mb: float = float("nan")
    fires: Fires = field(default_factory=Fires)
    wakeups: int = 0
    live: Live = field(default_factory=Live)
    naive_cpu: float = float("nan")


def describe_fires(label: str, f: Figures, wall: float) -> None:
    fires = f.fires
    n = len(fires.lateness)
    peak = max(fires.per_second.values(), default=0)
    out(f"  {label}: {n:,} fires ({n / wall:.1f}/s), {fires.backlog} more from the backlog of load time"
        + (f", {fires.after} just after the window" if fires.after else ""))
    out(f"      lateness p50 {ms(pct(fires.lateness, 0.5))}, p99 {ms(pct(fires.lateness, 0.99))}, "
        f"max {ms(max(fires.lateness, default=float('nan')))}; fires per second at peak: {peak}")
    for kind, values in sorted(fires.by_kind.items()):
        if kind:
            out(f"      {kind + 's':<11} {len(values):>6,} fires: p50 {ms(pct(values, 0.5))}, "
                f"p99 {ms(pct(values, 0.99))}, max {ms(max(values))}")
    out(f"      engine wake-ups {f.wakeups:,} for {len(fires.due_times):,} distinct due times "
        f"({f.wakeups / wall * 60:.0f}/min)")


async def run(args: argparse.Namespace, tmp: Path) -> None:
    t_begin = time.perf_counter()
    path = tmp / "state.db"
    out(f"machine:  {platform.platform()}, {cpu_model()}, {os.cpu_count()} cores")
    out(f"python:   {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}")
    hb_rate = sum(1 / i for i in range(60, 86_401)) / (86_400 - 60 + 1) * args.heartbeats
    out(f"workload: {args.heartbeats:,} heartbeats, intervals uniform in [1 min, 1 day], random phases")
    out(f"          {args.cron_jobs:,} cron jobs: 35% every 1-60m, 10% every 2-24h (random phases), "
        f"15% staggered o-59/N * * * *,")
    out(f"          10% hourly M * * * *, 30% daily / weekday M H * * [1-5] in {len(ZONES)} zones")
    out("          both in one state.db (durable), one process, one event loop, no-op dispatchers")
    out(f"targets:  CPU < {IDLE_TARGET:.0%} of a core with the timers live, p99 fire lateness < {P99_TARGET:g} s "
        f"(issue 5; for each workload, issue 6)\n")

    hb, cr = Figures(count=args.heartbeats), Figures(count=args.cron_jobs)

    # -- arming -------------------------------------------------------------------------------
    hb.write_s = write_heartbeats(path, args.heartbeats, args.seed)
    store = SQLiteStore(path)
    cr.write_s, schedules, plans = write_cron_jobs(store, args.cron_jobs, args.seed)
    cron_rate = sum(p.rate for p in plans)
    boundary = sum(p.rate for p in plans if p.expression) * 60
    out(f"expected: heartbeats ≈ {hb_rate:.1f} fires/s; cron ≈ {cron_rate:.1f} fires/s, of which "
        f"≈ {boundary:.0f} at once on each minute's :00 second\n")
    out("arming:")
    out(f"  write {args.heartbeats:,} heartbeat records (set-up store, synchronous=NORMAL): "
        f"{hb.write_s:.1f} s ({args.heartbeats / hb.write_s:,.0f}/s)")
    out(f"  add {args.cron_jobs:,} cron jobs (validate + CAS + generation bump, durable): "
        f"{cr.write_s:.1f} s ({args.cron_jobs / cr.write_s:,.0f}/s)")

    rss0 = rss_mb()
    leases = LeaseBook(store, SystemClock(), kind=GATEWAY) if args.leases else None
    hbs = HeartbeatScheduler(store, clock=SystemClock(), poll_interval=args.poll, leases=leases)
    hb_rec = HeartbeatRecorder()
    hb.fires = hb_rec.fires
    target = DirectTarget(hbs, hb_rec)
    started = time.perf_counter()
    if leases is not None:
        hbs.adopt(lambda _session_id: target)
    else:
        for i in range(args.heartbeats):
            hbs.own(f"{i:012x}", target)
    await hbs.start()
    hb.load_s = time.perf_counter() - started
    rss1 = rss_mb()
    hb.rss_mb = rss1 - rss0
    how = "adopt: lease sweep, orphan scan, list, take leases, arm" if leases else "own, orphan scan, list, arm"
    out(f"  heartbeats: load + arm ({how}): {hb.load_s:.2f} s; "
        f"RSS +{hb.rss_mb:.0f} MB ({hb.rss_mb * 2**20 / max(1, args.heartbeats):,.0f} B/heartbeat)")

    repo = CronRepo(store, SystemClock())
    runner = CronRunner(repo)
    cr.fires = runner.fires
    crs = CronScheduler(repo, runner, poll_interval=args.poll)
    started = time.perf_counter()
    armed = await crs.start()
    cr.load_s = time.perf_counter() - started
    cr.rss_mb = rss_mb() - rss1
    out(f"  cron jobs:  load + arm (recovery scan, list, arm) of {armed:,} jobs: {cr.load_s:.2f} s "
        f"({cr.load_s / max(1, armed) * 1e6:.0f} µs/job); "
        f"RSS +{cr.rss_mb:.0f} MB ({cr.rss_mb * 2**20 / max(1, args.cron_jobs):,.0f} B/job)")

    # -- running --------------------------------------------------------------------------------
    since = time.time()
    hb.fires.since = cr.fires.since = since
    hb.fires.until = cr.fires.until = since + args.seconds
    wake0 = (hbs.engine.stats.wakeups, crs.engine.stats.wakeups)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(args.seconds)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    hb.wakeups = hbs.engine.stats.wakeups - wake0[0]
    cr.wakeups = crs.engine.stats.wakeups - wake0[1]
    rss_run = rss_mb()
    out(f"\nrunning:  {wall:.0f} s on the real clock, both schedulers at once")
    describe_fires("heartbeats", hb, wall)
    describe_fires("cron jobs ", cr, wall)
    both = hb.fires.per_second + cr.fires.per_second
    out(f"  both: {len(hb.fires.lateness) + len(cr.fires.lateness):,} fires; "
        f"fires per second at peak {max(both.values(), default=0)}; "
        f"CPU {cpu / wall * 100:.1f}% of a core; RSS {rss_run:.0f} MB (peak {peak_rss_mb():.0f} MB)")
    out(f"  store: heartbeat claims {hbs.stats.claims:,}, confirmed {hbs.stats.confirmed:,}; "
        f"cron claims {crs.stats.claims:,}, not due {crs.stats.not_due}, skipped {crs.stats.skipped}")

    # Did every cron occurrence of the window fire? (the last seconds may still be in flight)
    check_end = since + args.seconds - 5
    expected = sum(s.count_between(math.ceil(since), check_end) for s in schedules.values())
    fired = sum(1 for key in cr.fires.due_in_window if float(key.rsplit("@", 1)[1]) <= check_end)
    out(f"  cron occurrences due in the window (to 5 s before its end): {expected:,}; fired: {fired:,}")

    # -- the same cron jobs, claimed one transaction per claim (the baseline) ---------------------
    await crs.stop()
    await runner.drain()
    cb = Figures(count=args.cron_jobs)
    base_runner = CronRunner(repo)
    cb.fires = base_runner.fires
    crb = PerClaimCronScheduler(repo, base_runner, poll_interval=args.poll)
    await crb.start()
    since = time.time()
    cb.fires.since, cb.fires.until = since, since + args.seconds
    wake0b = crb.engine.stats.wakeups
    await asyncio.sleep(args.seconds)
    cb.wakeups = crb.engine.stats.wakeups - wake0b
    await crb.stop()
    await base_runner.drain()
    out(f"\nbaseline: the same cron jobs for {args.seconds:.0f} s more, claimed one by one as before issue 10 "
        f"(job record, then run record: two commits per claim; heartbeats still running)")
    describe_fires("cron jobs ", cb, args.seconds)
    out(f"  cron lateness, batched claims vs one transaction per claim: p50 {ms(pct(cr.fires.lateness, 0.5))} vs "
        f"{ms(pct(cb.fires.lateness, 0.5))}, p99 {ms(pct(cr.fires.lateness, 0.99))} vs "
        f"{ms(pct(cb.fires.lateness, 0.99))}, max {ms(max(cr.fires.lateness, default=float('nan')))} vs "
        f"{ms(max(cb.fires.lateness, default=float('nan')))}")
    await crs.resync()
    resume(crs)

    # -- live timers: CPU while due times keep coming and fire -------------------------------------
    await settle(hbs, target, crs, runner)
    both_live = await live_window(args.live, [hb_rec, runner], hbs, crs)
    await pause(crs)
    hb.live = await live_window(args.live, [hb_rec], hbs)
    await pause(hbs)
    resume(crs)
    await settle(hbs, target, crs, runner)
    cr.live = await live_window(args.live, [runner], crs)
    await crs.stop()
    await runner.drain()
    naive_s = min(args.live, 5.0)
    hb.naive_cpu = await naive(naive_s, scan_heartbeats(store))
    cr.naive_cpu = await naive(naive_s, scan_cron(repo))
    out(f"\nlive timers: {args.live:g} s each on the real clock, every due time in the window fired as it fell "
        f"(change watchers poll one key every {args.poll:g} s)")
    for label, live, base in (
        ("both      ", both_live, hb.naive_cpu + cr.naive_cpu),
        ("heartbeats", hb.live, hb.naive_cpu),
        ("cron jobs ", cr.live, cr.naive_cpu),
    ):
        ratio = f"{base / live.cpu:,.1f}x" if live.cpu > 0 else "-"
        scans = "both naive scans (sum)" if label.startswith("both") else "naive scan"
        out(f"  {label}: CPU {live.cpu * 100:.2f}% of a core; {len(live.fires):,} fires "
            f"({len(live.fires) / live.seconds:.1f}/s), lateness p99 {ms(pct(live.fires, 0.99))}; "
            f"{live.per_fire_ms:.2f} ms CPU a fire; {live.wakeups} engine wake-ups; {scans} every 1 s "
            f"(finding what is due, firing nothing): {base * 100:.1f}% (ratio {ratio})")

    # -- bursts -----------------------------------------------------------------------------------
    out("\nburst:")
    n = min(args.burst, args.heartbeats)
    took, done, fires = await heartbeat_burst(store, n)
    out(f"  {done:,} of {n:,} heartbeats due at once (state.db above): claimed and confirmed in "
        f"{took:.2f} s ({done / took:,.0f} fires/s; peak second {max(fires.per_second.values(), default=0)})")
    store.close()
    n = min(args.burst, args.cron_jobs)
    took, done, fires = await cron_burst(tmp / "burst.db", n)
    out(f"  {done:,} of {n:,} cron jobs due at the same second (a fresh state.db): claimed and finished "
        f"in {took:.2f} s ({done / took:,.0f} fires/s; peak second {max(fires.per_second.values(), default=0)})")
    out(f"  {args.same_second:,} unstaggered '0 * * * *' jobs due on the same second (fresh state.db each), "
        f"due time -> claimed and handed to the dispatcher:")
    bursts = {}
    for label, scheduler_class in SCHEDULERS.items():
        b = bursts[label] = await same_second_burst(tmp / f"same-second-{label}.db", args.same_second, scheduler_class)
        out(f"    {label:<10} {b.claimed:,} claimed; lateness p50 {ms(pct(b.lateness, 0.5))}, "
            f"p99 {ms(pct(b.lateness, 0.99))}, max {ms(b.span)}; {b.rate:,.0f} fires/s during the burst")
    ratio = bursts["per-claim"].span / bursts["batched"].span
    out(f"    batched claims take the burst x{ratio:.1f} faster than one transaction per claim "
        f"(target: max <= {BURST_TARGET:g} s: {'met' if bursts['batched'].span <= BURST_TARGET else 'NOT met'})")

    # -- cron store operations and next-due computation -------------------------------------------
    store = SQLiteStore(tmp / "claims.db")
    c = claim_throughput(store, args.claims)
    store.close()
    base = c["set_meta_per_s"]
    out(f"\ncron store operations ({args.claims:,} jobs, synchronous calls, durable store):")
    out(f"  claims (read + plan + CAS + run record): {c['claims_per_s']:,.0f}/s "
        f"= {c['claims_per_s'] / base:.2f}x a bare set_meta of the same record ({base:,.0f}/s)")
    out(f"  lost races (already claimed: one read, no write): {c['lost_races_per_s']:,.0f}/s "
        f"= {c['lost_races_per_s'] / base:.1f}x set_meta")
    out(f"  finishes (run record + CAS): {c['finishes_per_s']:,.0f}/s = {c['finishes_per_s'] / base:.2f}x set_meta")
    rates = next_due_throughput()
    out("next-due computation:")
    for label, rate in rates.items():
        out(f"  {label:<20} {rate:>12,.0f}/s  ({rates['interval'] / rate:,.1f}x the cost of an interval)")
    berlin = 10_000 / rates["cron Europe/Berlin"] * 1000
    out(f"  10,000 Europe/Berlin cron jobs re-armed from scratch ≈ {berlin:.0f} ms")

    # -- summary ------------------------------------------------------------------------------------
    def row(label: str, a: str, b: str) -> None:
        out(f"  {label:<30} {a:>18} {b:>18}")

    out("\nsummary:")
    row("", "heartbeats", "cron jobs")
    row("count", f"{hb.count:,}", f"{cr.count:,}")
    row("write records", f"{hb.write_s:.1f} s", f"{cr.write_s:.1f} s")
    row("load + arm", f"{hb.load_s:.2f} s", f"{cr.load_s:.2f} s")
    row("RSS added at load", f"{hb.rss_mb:.0f} MB", f"{cr.rss_mb:.0f} MB")
    row("CPU, timers live (alone)", f"{hb.live.cpu * 100:.2f}%", f"{cr.live.cpu * 100:.2f}%")
    row("fires/s in that window", f"{len(hb.live.fires) / hb.live.seconds:.1f}",
        f"{len(cr.live.fires) / cr.live.seconds:.1f}")
    row("CPU a fire", f"{hb.live.per_fire_ms:.2f} ms", f"{cr.live.per_fire_ms:.2f} ms")
    row("fires in the window", f"{len(hb.fires.lateness):,}", f"{len(cr.fires.lateness):,}")
    row("lateness p50", ms(pct(hb.fires.lateness, 0.5)), ms(pct(cr.fires.lateness, 0.5)))
    row("lateness p99", ms(pct(hb.fires.lateness, 0.99)), ms(pct(cr.fires.lateness, 0.99)))
    row("cron p99, one txn per claim", "", ms(pct(cb.fires.lateness, 0.99)))
    row("fires per second at peak", f"{max(hb.fires.per_second.values(), default=0)}",
        f"{max(cr.fires.per_second.values(), default=0)}")
    out(f"  both together: CPU with the timers live {both_live.cpu * 100:.2f}%, while running {cpu / wall * 100:.1f}%, "
        f"RSS {rss_run:.0f} MB")

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    out("\ntargets:")
    out(f"  CPU < {IDLE_TARGET:.0%} of a core with the timers live: both together {both_live.cpu * 100:.2f}% "
        f"({verdict(both_live.cpu < IDLE_TARGET)}); heartbeats {hb.live.cpu * 100:.2f}% "
        f"({verdict(hb.live.cpu < IDLE_TARGET)}); cron {cr.live.cpu * 100:.2f}% "
        f"({verdict(cr.live.cpu < IDLE_TARGET)})")
    for label, f in (("heartbeats", hb), ("cron jobs", cr)):
        p99 = pct(f.fires.lateness, 0.99)
        state = "no fires measured" if math.isnan(p99) else verdict(p99 < P99_TARGET)
        out(f"  p99 lateness < {P99_TARGET:g} s, {label}: {ms(p99)} ({state})")
    p99 = pct(cr.fires.lateness, 0.99)
    out(f"  cron p99 lateness <= {CRON_P99_TARGET * 1000:.0f} ms (issue 10): {ms(p99)} "
        f"({'no fires measured' if math.isnan(p99) else verdict(p99 <= CRON_P99_TARGET)}); "
        f"one transaction per claim: {ms(pct(cb.fires.lateness, 0.99))}")
    out(f"\ntotal run time {time.perf_counter() - t_begin:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heartbeats", type=int, default=100_000)
    parser.add_argument("--cron-jobs", type=int, default=None, help="default 10,000 (6,000 with --store)")
    parser.add_argument("--seconds", type=float, default=None, help="real-clock run time (default 60; 30 with --store)")
    parser.add_argument("--live", type=float, default=15.0, help="seconds of each live-timers measurement")
    parser.add_argument("--burst", type=int, default=5_000, help="heartbeats / cron jobs due at once")
    parser.add_argument("--claims", type=int, default=2_000, help="cron jobs for the store-operation figures")
    parser.add_argument("--same-second", type=int, default=None, help="jobs due on one second (default 2,000)")
    parser.add_argument("--poll", type=float, default=15.0, help="change-watcher poll interval (seconds)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--leases", action="store_true", help="heartbeats with ownership leases, as in the gateway")
    parser.add_argument("--store", help="postgresql://... or sqlite: the multi-worker cron bench on that store")
    parser.add_argument("--workers", default="1,3", help="with --store: worker process counts to compare (1,3)")
    parser.add_argument("--json", action="store_true", help="with --store: print the figures as JSON")
    args = parser.parse_args()
    if args.store:
        from scheduler_workers import bench

        bench(args)
        return
    args.cron_jobs = 10_000 if args.cron_jobs is None else args.cron_jobs
    args.seconds = 60.0 if args.seconds is None else args.seconds
    args.same_second = 2_000 if args.same_second is None else args.same_second
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
