"""Cron scheduler benchmark: 10,000 jobs — arm/load time, next-due throughput, claim
throughput, wake-ups per busy and idle hour on a fake clock, and idle CPU on the real clock
against a naive once-a-second scan.

Run: ``.venv/bin/python bench/scheduler_cron.py [--jobs N] [--claims N] [--idle SECONDS]``.
Each figure comes with a ratio against a baseline measured in the same run, so it means
something on a noisy machine. Runs are no-ops (claimed and finished at once): this measures
the scheduler, not the model. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable
from zoneinfo import ZoneInfo

from vigil.clock import FakeClock, SystemClock
from vigil.schedule.cron_jobs import JobSpec, new_job
from vigil.schedule.cron_repo import Claim, CronRepo
from vigil.schedule.cron_runs import RunRecord
from vigil.schedule.cron_schedule import parse_schedule
from vigil.schedule.cron_scheduler import CronScheduler
from vigil.store.sqlite import SQLiteStore

START = datetime(2026, 3, 2, 0, 0, tzinfo=ZoneInfo("UTC")).timestamp()
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"]
IDLE_HOUR = 12  # no job is scheduled in this UTC hour


def schedule_for(n: int, rng: random.Random) -> tuple[str, str]:
    """A mix: daily cron in a zone, weekday cron, and daily-or-longer intervals; none due in
    the idle hour (12:00-13:00 UTC on the bench day)."""
    kind = n % 3
    if kind == 2:
        return f"every {rng.choice([24, 48, 72])}h", "UTC"
    hour = rng.choice([h for h in range(24) if h != IDLE_HOUR])
    minute = rng.randrange(60)
    if kind == 0:
        return f"{minute} {hour} * * *", "UTC"
    return f"{minute} {hour} * * 1-5", "UTC"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def machine() -> str:
    return (
        f"{platform.platform()} · Python {platform.python_version()} · {os.cpu_count()} CPUs · "
        f"SQLite {sqlite3.sqlite_version}"
    )


def build(store: SQLiteStore, clock: FakeClock, count: int, rng: random.Random) -> float:
    repo = CronRepo(store, clock)
    t0 = time.perf_counter()
    for n in range(count):
        text, tz = schedule_for(n, rng)
        # Interval jobs are anchored just past the idle hour of the previous day.
        anchor = START - 11 * 3600 + 60 * rng.randrange(60) if text.startswith("every") else START
        job = new_job(f"job{n:05d}", JobSpec(text, f"report {n}", tz), now=anchor, default_tz="UTC", skills_dir=None)
        repo.add(job)
    return time.perf_counter() - t0


def next_due_throughput(rng: random.Random, seconds: float = 0.5) -> dict[str, float]:
    kinds = {
        "interval": parse_schedule("every 2h", tz="UTC", now=START),
        "cron UTC": parse_schedule("30 9 * * 1-5", tz="UTC", now=START),
        "cron Europe/Berlin": parse_schedule("30 2 * * *", tz="Europe/Berlin", now=START),
    }
    out = {}
    for label, schedule in kinds.items():
        done, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(100):
                schedule.next_after(START + rng.randrange(365 * 86400))
            done += 100
        out[label] = done / (time.perf_counter() - t0)
    return out


async def noop_execute(repo: CronRepo, claim: Claim) -> RunRecord:
    record = claim.record.finished("ok", repo.clock.now())
    repo.finish(claim, record)
    return record


async def inline(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


async def walk(clock: FakeClock, scheduler: CronScheduler, until: float, step: float) -> None:
    while clock.now() < until:
        await clock.set(min(until, clock.now() + step))
        for _ in range(20):  # let the engine notice the new time and spawn its dispatches
            await asyncio.sleep(0)
        while scheduler.busy:
            await asyncio.sleep(0)


async def scheduler_figures(store: SQLiteStore, clock: FakeClock, poll: float) -> dict[str, Any]:
    repo = CronRepo(store, clock)
    scheduler = CronScheduler(
        repo, lambda claim: noop_execute(repo, claim), clock=clock, poll_interval=poll, offload=inline
    )
    load, armed = 0.0, 0
    t0 = time.perf_counter()
    armed = await scheduler.start()
    load = time.perf_counter() - t0
    out: dict[str, Any] = {"armed": armed, "load_s": load}
    for label, hour in (("busy", IDLE_HOUR - 1), ("idle", IDLE_HOUR)):
        await walk(clock, scheduler, START + hour * 3600, 3600)  # to the hour's start
        wakeups, claims, checks = (
            scheduler.engine.stats.wakeups, scheduler.stats.claims, scheduler.stats.generation_checks
        )
        begin, t0 = clock.now(), time.perf_counter()
        await walk(clock, scheduler, START + (hour + 1) * 3600 - 1, 60)  # the hour, end excluded
        due_times = {r.occurrence for r in repo.runs.list() if r.claimed_at > begin}
        out[label] = {
            "wakeups": scheduler.engine.stats.wakeups - wakeups,
            "runs": scheduler.stats.claims - claims,
            "due_times": len(due_times),
            "generation_checks": scheduler.stats.generation_checks - checks,
            "wall_s": time.perf_counter() - t0,
        }
    await scheduler.stop()
    return out


async def idle_cpu(store: SQLiteStore, count: int, seconds: float, poll: float) -> dict[str, float]:
    """CPU share of a core on the real clock with ``count`` jobs armed and none due, against a
    naive loop that lists the jobs once a second to look for due ones."""
    now = time.time()
    repo = CronRepo(store, SystemClock())
    hour_now = datetime.fromtimestamp(now, ZoneInfo("UTC")).hour
    rng = random.Random(11)
    for n in range(count):
        if n % 2:
            text = f"every {rng.choice([6, 12, 24])}h"
        else:
            text = f"{rng.randrange(60)} {(hour_now + 2 + rng.randrange(20)) % 24} * * *"
        repo.add(new_job(f"r{n:05d}", JobSpec(text, "p", "UTC"), now=now, default_tz="UTC", skills_dir=None))

    scheduler = CronScheduler(repo, lambda claim: noop_execute(repo, claim), poll_interval=poll)
    await scheduler.start()
    await asyncio.sleep(0.2)
    wake0, cpu0, wall0 = scheduler.engine.stats.wakeups, time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    ours = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    wakeups = scheduler.engine.stats.wakeups - wake0
    await scheduler.stop()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        t = time.time()
        [job for job in repo.list() if job.next_due is not None and job.next_due <= t]
        await asyncio.sleep(1.0)
    naive = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    return {"ours": ours, "naive": naive, "wakeups": wakeups, "seconds": seconds}


def claim_throughput(store: SQLiteStore, count: int) -> dict[str, float]:
    clock = FakeClock(START)
    repo = CronRepo(store, clock)
    for n in range(count):
        repo.add(new_job(f"c{n:05d}", JobSpec("every 1h", "p", "UTC"), now=START, default_tz="UTC", skills_dir=None))
    clock.set_sync(START + 3600)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--claims", type=int, default=2_000)
    parser.add_argument("--poll", type=float, default=15.0, help="generation poll interval (seconds)")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of real-clock idle measurement")
    args = parser.parse_args()
    rng = random.Random(7)
    print(f"machine:  {machine()}")
    print(f"workload: {args.jobs:,} cron jobs (1/3 daily cron, 1/3 weekday cron, 1/3 every 24-72h), "
          f"no job due {IDLE_HOUR}:00-{IDLE_HOUR + 1}:00 UTC; claims on {args.claims:,} due jobs; "
          f"runs are no-ops; SQLite durable (synchronous=FULL) in a temp dir")
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock(START)
        store = SQLiteStore(Path(tmp) / "state.db")
        add_s = build(store, clock, args.jobs, rng)
        print(f"\nadd (validate + CAS + generation bump): {add_s:.2f}s = {args.jobs / add_s:,.0f} jobs/s")
        figures = asyncio.run(scheduler_figures(store, clock, args.poll))
        print(f"arm/load at start-up: {figures['load_s'] * 1000:.0f} ms for {figures['armed']:,} armed jobs "
              f"({figures['load_s'] / figures['armed'] * 1e6:.1f} µs/job)")
        for label in ("busy", "idle"):
            f = figures[label]
            per_time = f"{f['wakeups'] / f['due_times']:.2f}" if f["due_times"] else "-"
            print(f"{label} hour (fake clock, 1-minute steps): {f['runs']} runs at {f['due_times']} distinct "
                  f"due times, {f['wakeups']} engine wake-ups ({per_time} per due time), "
                  f"{f['generation_checks']} generation checks (one key read every {args.poll:g}s), "
                  f"{f['wall_s']:.2f}s wall")
        store.close()

        store = SQLiteStore(Path(tmp) / "idle.db")
        idle = asyncio.run(idle_cpu(store, args.jobs, args.idle, args.poll))
        store.close()
        print(f"idle on the real clock ({idle['seconds']:g}s, {args.jobs:,} jobs armed, none due): "
              f"CPU {idle['ours'] * 100:.2f}% of a core, {idle['wakeups']} engine wake-ups; a naive loop "
              f"listing the jobs once a second: {idle['naive'] * 100:.1f}% "
              f"(ratio {idle['ours'] / idle['naive']:.3f})")

        store = SQLiteStore(Path(tmp) / "claims.db")
        c = claim_throughput(store, args.claims)
        store.close()
    print(f"\nclaims (read + plan + CAS + run record): {c['claims_per_s']:,.0f}/s "
          f"= {c['claims_per_s'] / c['set_meta_per_s']:.2f}× a bare set_meta of the same record "
          f"({c['set_meta_per_s']:,.0f}/s)")
    print(f"lost races (already claimed: one read, no write): {c['lost_races_per_s']:,.0f}/s "
          f"= {c['lost_races_per_s'] / c['set_meta_per_s']:.1f}× set_meta")
    print(f"finishes (run record + CAS): {c['finishes_per_s']:,.0f}/s "
          f"= {c['finishes_per_s'] / c['set_meta_per_s']:.2f}× set_meta")
    rates = next_due_throughput(rng)
    base = rates["interval"]
    print("\nnext-due computation:")
    for label, rate in rates.items():
        print(f"  {label:<20} {rate:>12,.0f}/s  ({base / rate:,.1f}× the cost of an interval)")
    print(f"  10,000 cron jobs re-armed from scratch ≈ {10_000 / rates['cron Europe/Berlin'] * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
