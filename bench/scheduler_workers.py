"""Cron scheduling shared by N worker processes on one store: ``bench/scheduler.py --store URL
--workers 1,3`` (see there). Each worker is an OS process running vigil's real
:class:`CronScheduler` (claims in the store, change watcher, LISTEN/NOTIFY on PostgreSQL) with
a no-op dispatcher that notes when each claim was handed to it and records the run finished.

Per worker count, on a fresh store (a schema of its own on PostgreSQL, dropped afterwards):

* steady: ``--cron-jobs`` ``every 1m`` jobs at random phases (jobs/60 fires a second) for
  ``--seconds``: fires/s, lateness (due time -> handed to the dispatcher) p50/p99/max;
* burst: ``--same-second`` ``every 1h`` jobs all due on one second, claimed while the steady
  jobs go on: lateness p50/p99/max, claims per second (due second -> the last claim) and how
  many of them each worker claimed;
* exactly once: every occurrence due in the run (steady and burst) was claimed once across
  all workers, none twice, and the store holds one finished run record for each.

Then the figures side by side and the ratios of each worker count to the first.

    python bench/scheduler_workers.py worker STORE POLL   (one worker; started by the bench)
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.schedule.changes import bump_generation
from vigil.schedule.cron.jobs import CronJob, JobSpec, job_key, new_job
from vigil.schedule.cron.repo import Claim, CronRepo
from vigil.schedule.cron.runs import RunLog, RunRecord
from vigil.schedule.cron.scheduler import CronScheduler
from vigil.schedule.heartbeat.repo import PROCESS_OWNER
from vigil.store import SessionStore, open_store
from vigil.store.records import MetaSwap

WRITE_ALLOWANCE = 3.0  # seconds allowed for writing the jobs
START_MARGIN = 2.0  # seconds from "go" to the first steady occurrence measured
BURST_GAP = 2.0  # seconds from the end of the steady window to the burst
SETTLED_MARGIN = 5.0  # occurrences due this close to the stop may still be in flight
CHUNK = 1000


# -- the worker process ----------------------------------------------------------------------
class NoOpDispatcher:
    """Notes the hand-off time of each claim (:meth:`note`) and records the run finished at
    once (in a thread, not holding the scheduler's slot), as a run that takes no time would.
    ``bench/scheduler.py`` uses it too."""

    def __init__(self, repo: CronRepo) -> None:
        self.repo = repo
        self.claims: list[tuple[str, float, float]] = []
        self.pending: set[asyncio.Task[Any]] = set()

    def note(self, claim: Claim, occurrence: float, handed: float) -> None:
        self.claims.append((claim.job.name, occurrence, handed))

    async def __call__(self, claim: Claim) -> RunRecord:
        handed = time.time()
        run = claim.record
        self.note(claim, run.occurrence if run.occurrence is not None else run.claimed_at, handed)
        record = run.finished("ok", self.repo.clock.now())
        task = asyncio.create_task(asyncio.to_thread(self.repo.finish, claim, record))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)
        return record

    async def drain(self) -> None:
        while self.pending:
            await asyncio.gather(*self.pending, return_exceptions=True)


async def worker(location: str, poll: float) -> None:
    store = open_store(location)
    repo = CronRepo(store)
    dispatcher = NoOpDispatcher(repo)
    scheduler = CronScheduler(repo, dispatcher, poll_interval=poll)
    print(json.dumps({"ready": PROCESS_OWNER}), flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # go
    cpu0 = time.process_time()
    await scheduler.start()
    await asyncio.to_thread(sys.stdin.readline)  # stop
    await scheduler.stop()
    await dispatcher.drain()
    cpu = time.process_time() - cpu0
    store.close()
    stats = scheduler.stats
    print(json.dumps({
        "owner": PROCESS_OWNER, "claims": dispatcher.claims, "cpu": cpu, "skipped": stats.skipped,
        "not_due": stats.not_due, "generation_checks": stats.generation_checks,
    }), flush=True)


# -- the bench (parent) side -------------------------------------------------------------------
@dataclass
class Run:
    """What one worker count measured."""

    workers: int
    steady_jobs: int
    burst_jobs: int
    seconds: float
    steady: list[float] = field(default_factory=list)  # lateness of steady fires in the window
    burst: list[float] = field(default_factory=list)
    burst_span: float = float("nan")
    per_worker: list[int] = field(default_factory=list)
    burst_per_worker: list[int] = field(default_factory=list)
    cpu: float = 0.0
    due: int = 0
    claimed: int = 0
    doubles: int = 0
    missing: int = 0
    unexpected: int = 0
    stored_ok: int = 0
    skipped: int = 0
    wall: float = 0.0

    @property
    def fires_per_s(self) -> float:
        return len(self.steady) / self.seconds

    @property
    def burst_rate(self) -> float:
        return len(self.burst) / self.burst_span if self.burst_span > 0 else float("nan")

    @property
    def exactly_once(self) -> bool:
        return self.doubles == self.missing == self.unexpected == self.skipped == 0 and self.stored_ok == self.claimed

    def to_json(self) -> dict[str, Any]:
        return {
            "workers": self.workers, "steady_jobs": self.steady_jobs, "burst_jobs": self.burst_jobs,
            "seconds": self.seconds, "fires_per_s": self.fires_per_s,
            "steady_lateness_s": summary(self.steady), "burst_lateness_s": summary(self.burst),
            "burst_claims_per_s": self.burst_rate, "claims_per_worker": self.per_worker,
            "burst_claims_per_worker": self.burst_per_worker,
            "cpu_s": self.cpu, "due_occurrences": self.due, "claims": self.claimed, "doubles": self.doubles,
            "missing": self.missing, "unexpected": self.unexpected, "skipped": self.skipped,
            "finished_run_records": self.stored_ok, "exactly_once": self.exactly_once,
        }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 0.5), "p99": pct(values, 0.99), "max": max(values, default=float("nan"))}


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def fresh_location(store: str) -> tuple[str, Any]:
    """A store location of its own for one run, and how to remove it afterwards."""
    if store == "sqlite":
        import tempfile

        folder = tempfile.TemporaryDirectory(prefix="vigil-bench-")
        return str(Path(folder.name) / "state.db"), folder.cleanup
    if not store.lower().startswith(("postgresql://", "postgres://")):
        raise SystemExit(f"--store: give a postgresql:// URL or 'sqlite', not {store!r}")
    import psycopg

    from vigil.store.postgres.conn import parse_target

    schema = f"vigil_bench_{uuid.uuid4().hex[:10]}"
    base = store.split("?", 1)[0]
    target = parse_target(base)

    def drop() -> None:
        with psycopg.connect(target.conninfo, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return f"{base}?schema={schema}", drop


def write_jobs(store: SessionStore, jobs: list[CronJob]) -> None:
    """Every job in a few transactions and one generation bump (one notification), as a bulk
    import would: the workers resync once instead of once per job."""
    for i in range(0, len(jobs), CHUNK):
        store.compare_and_set_many([MetaSwap(job_key(j.name), None, j.to_json()) for j in jobs[i : i + CHUNK]])
    bump_generation(store)


def steady_jobs(count: int, base: float, rng: random.Random) -> list[CronJob]:
    jobs = []
    for n in range(count):
        set_at = base - rng.uniform(0, 60)  # first due in (base, base + 60]
        jobs.append(new_job(f"s{n:05d}", JobSpec("every 1m", "p", "UTC"), now=set_at, default_tz="UTC", skills_dir=None))
    return jobs


def burst_jobs(count: int, due: float) -> list[CronJob]:
    return [
        new_job(f"b{n:05d}", JobSpec("every 1h", "p", "UTC"), now=due - 3600, default_tz="UTC", skills_dir=None)
        for n in range(count)
    ]


def occurrences(job: CronJob, until: float) -> set[tuple[str, float]]:
    found, due = set(), job.next_due
    while due is not None and due <= until:
        found.add((job.name, due))
        due = job.schedule.next_after(due)
    return found


def run_once(store_arg: str, workers: int, jobs: int, burst: int, seconds: float, poll: float,
             seed: int, progress: Any) -> Run:
    location, remove = fresh_location(store_arg)
    here = Path(__file__).resolve()
    root = here.parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    run = Run(workers, jobs, burst, seconds)
    setup = open_store(location)  # creates (migrates) the schema before the workers open it
    procs = [
        subprocess.Popen([sys.executable, str(here), "worker", location, repr(poll)], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(workers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if "ready" not in proc.stdout.readline():
                raise SystemExit("a worker did not start (see its error above)")
        began = time.time()
        # The steady window opens START_MARGIN after "go" (the workers' start-up: recovery scan,
        # list, arm) and closes BURST_GAP before the burst; writing the jobs comes first.
        burst_due = float(math.ceil(began + WRITE_ALLOWANCE + START_MARGIN + seconds + BURST_GAP))
        plan = steady_jobs(jobs, began + 1, random.Random(seed)) + burst_jobs(burst, burst_due)
        write_jobs(setup, plan)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        window = (time.time() + START_MARGIN, burst_due - BURST_GAP)
        run.seconds = window[1] - window[0]
        # Until the burst is claimed (every burst job due later than its burst) and a little more.
        task = progress.add_task(f"{workers} worker(s)", total=burst_due + 1 - began)
        keys = [job_key(job.name) for job in plan if job.name.startswith("b")]
        deadline = burst_due + 120
        while time.time() < deadline:
            progress.update(task, completed=min(time.time(), burst_due + 1) - began)
            if time.time() > burst_due:
                entries = setup.get_meta_many(keys)
                if all((e.value.get("next_due") or 0) > burst_due for e in entries.values()):
                    break
            time.sleep(0.25)
        time.sleep(0.5)
        stopped = time.time()
        progress.remove_task(task)
        reports = []
        for proc in procs:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("stop\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.stdout is not None
            reports.append(json.loads(proc.stdout.readline()))
            proc.wait(timeout=60)
        records = RunLog(setup).list()
        run.wall = stopped - began
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        setup.close()
        remove()

    claims = [(name, occurrence, handed) for r in reports for name, occurrence, handed in r["claims"]]
    run.per_worker = sorted((len(r["claims"]) for r in reports), reverse=True)
    run.burst_per_worker = sorted((sum(name.startswith("b") for name, _, _ in r["claims"]) for r in reports), reverse=True)
    run.cpu = sum(r["cpu"] for r in reports)
    run.skipped = sum(r["skipped"] for r in reports)
    counted = Counter((name, occurrence) for name, occurrence, _ in claims)
    run.doubles = sum(n - 1 for n in counted.values() if n > 1)
    # Checked: every burst occurrence (the bench waited for them) and the steady ones due up to
    # SETTLED_MARGIN before the stop (later ones may have been in flight); doubles everywhere.
    settled = stopped - SETTLED_MARGIN
    expected = set().union(*(occurrences(job, burst_due if job.name.startswith("b") else settled) for job in plan))
    claimed_settled = {key for key in counted if key[1] <= settled or key[0].startswith("b")}
    run.due, run.claimed = len(expected), len(claimed_settled)
    run.missing = len(expected - claimed_settled)
    run.unexpected = len(claimed_settled - expected)
    run.stored_ok = len({(r.job, r.occurrence) for r in records
                         if r.status == "ok" and (r.job, r.occurrence) in claimed_settled})
    for name, occurrence, handed in claims:
        if name.startswith("b"):
            run.burst.append(handed - occurrence)
        elif window[0] <= occurrence <= window[1]:
            run.steady.append(handed - occurrence)
    run.burst_span = max(run.burst, default=float("nan"))
    return run


def describe(run: Run, out: Any) -> None:
    out(f"\n{run.workers} worker(s): {run.steady_jobs:,} 'every 1m' jobs for {run.seconds:.1f} s, then "
        f"{run.burst_jobs:,} jobs due on one second; claims per worker {run.per_worker}")
    out(f"  steady: {len(run.steady):,} fires ({run.fires_per_s:.1f}/s); lateness p50 {ms(pct(run.steady, 0.5))}, "
        f"p99 {ms(pct(run.steady, 0.99))}, max {ms(max(run.steady, default=float('nan')))}")
    out(f"  burst:  {len(run.burst):,} claimed in {ms(run.burst_span)} ({run.burst_rate:,.0f} claims/s); "
        f"lateness p50 {ms(pct(run.burst, 0.5))}, p99 {ms(pct(run.burst, 0.99))}, max {ms(run.burst_span)}; "
        f"per worker {run.burst_per_worker}")
    verdict = "yes" if run.exactly_once else "NO"
    out(f"  exactly once: {verdict} - due occurrences {run.due:,}, claimed {run.claimed:,}, twice {run.doubles}, "
        f"missing {run.missing}, unexpected {run.unexpected}, skipped {run.skipped}, "
        f"finished run records {run.stored_ok:,}")
    out(f"  worker CPU {run.cpu:.1f} s in all ({run.cpu / max(1, run.claimed) * 1e3:.2f} ms per claim)")


def compare(runs: list[Run], out: Any) -> None:
    first = runs[0]
    heads = [f"{r.workers} worker(s)" for r in runs] + [f"{r.workers}/{first.workers}" for r in runs[1:]]
    out("\nside by side:")
    out(f"  {'':<28}" + "".join(f"{h:>16}" for h in heads))

    def row(label: str, values: list[float], text: Any) -> None:
        ratios = [v / values[0] if values[0] else float("nan") for v in values[1:]]
        out(f"  {label:<28}" + "".join(f"{text(v):>16}" for v in values) + "".join(f"{r:>15.2f}x" for r in ratios))

    row("steady fires/s", [r.fires_per_s for r in runs], lambda v: f"{v:,.1f}")
    row("steady lateness p50", [pct(r.steady, 0.5) for r in runs], ms)
    row("steady lateness p99", [pct(r.steady, 0.99) for r in runs], ms)
    row("steady lateness max", [max(r.steady, default=float("nan")) for r in runs], ms)
    row("burst claims/s", [r.burst_rate for r in runs], lambda v: f"{v:,.0f}")
    row("burst lateness p50", [pct(r.burst, 0.5) for r in runs], ms)
    row("burst lateness p99", [pct(r.burst, 0.99) for r in runs], ms)
    row("burst lateness max", [r.burst_span for r in runs], ms)
    row("worker CPU per claim", [r.cpu / max(1, r.claimed) for r in runs], ms)
    out(f"  {'exactly once':<28}" + "".join(f"{'yes' if r.exactly_once else 'NO':>16}" for r in runs))


def bench(args: Any) -> None:
    """The ``--store`` mode of bench/scheduler.py."""
    from rich.console import Console
    from rich.progress import Progress

    try:
        counts = [int(n) for n in str(args.workers).split(",") if n.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise SystemExit("--workers: one or more positive counts, such as 1,3")
    jobs = 6_000 if args.cron_jobs is None else args.cron_jobs
    burst = 2_000 if args.same_second is None else args.same_second
    seconds = 30.0 if args.seconds is None else args.seconds
    quiet = args.json

    def out(text: str = "") -> None:
        if not quiet:
            print(text, flush=True)

    where = "a temporary SQLite file" if args.store == "sqlite" else _masked(args.store)
    out(f"store:    {where}, a fresh {'schema' if args.store != 'sqlite' else 'file'} per worker count")
    out(f"workload: {jobs:,} 'every 1m' cron jobs at random phases (≈ {jobs / 60:.0f} fires/s) for {seconds:g} s, "
        f"then {burst:,} due on one second; no-op dispatcher; change poll every {args.poll:g} s")
    out(f"machine:  {os.cpu_count()} cores; worker counts {counts}")
    runs = []
    with Progress(console=Console(stderr=True), transient=True) as progress:
        for count in counts:
            runs.append(run_once(args.store, count, jobs, burst, seconds, args.poll, args.seed, progress))
            describe(runs[-1], out)
    if len(runs) > 1:
        compare(runs, out)
    if quiet:
        print(json.dumps({"store": where, "runs": [r.to_json() for r in runs]}, indent=2))
    if not all(r.exactly_once for r in runs):
        raise SystemExit("an occurrence was not claimed exactly once (see above)")


def _masked(url: str) -> str:
    from vigil.store.postgres.conn import parse_target

    return parse_target(url.split("?", 1)[0]).where


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "worker":
        asyncio.run(worker(sys.argv[2], float(sys.argv[3])))
    else:
        raise SystemExit(__doc__)
