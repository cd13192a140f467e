"""The heartbeat scheduler at scale: many active heartbeats in one state.db, the real clock.

Workload: N heartbeats (default 100,000) with random intervals between 1 minute and 1 day, each
at a random phase of its interval, stored in one state.db. One scheduler owns them all with a
no-op dispatcher (every fire goes through the real claim → confirm protocol in the store), and
runs on the real clock for a fixed time. Printed:

* arming: time to write the records, and to load and arm them (start-up, incl. orphan scan);
* running: fires, fire lateness p50/p99/max (fire time - due time), fires per second at peak,
  CPU use, engine wake-ups per minute, memory (RSS) per heartbeat;
* idle: CPU use with nothing due (only the change watcher's one-key poll), against a naive
  baseline that scans the store for due heartbeats once a second — the ratio is the point;
* burst: claim throughput when many heartbeats are due at the same moment.

    .venv/bin/python bench/scheduler.py [--heartbeats 100000] [--seconds 60] [--idle 15] [--burst 5000]

Targets (issue 5): idle CPU under 2% of a core, p99 lateness under 1 s. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from vigil.clock import SystemClock
from vigil.schedule.heartbeat import Heartbeat, heartbeat_key
from vigil.schedule.heartbeat_repo import Reservation
from vigil.schedule.scheduler import DirectTarget, HeartbeatScheduler
from vigil.store import SQLiteStore


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


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


def write_heartbeats(path: Path, count: int, seed: int) -> float:
    """Store ``count`` active heartbeats; returns seconds taken."""
    rng = random.Random(seed)
    store = SQLiteStore(path, durable=False)  # set-up only; the scheduler uses a durable store
    started = time.perf_counter()
    now = time.time()
    for i in range(count):
        interval = rng.randint(60, 86_400)
        hb = Heartbeat.create(f"{i:012x}", f"watch thing {i}", interval, now)
        # a random phase: as if it had been running for a while
        hb_json = {**hb.to_json(), "next_due": now + rng.uniform(0, interval)}
        store.set_meta(heartbeat_key(hb.session_id), hb_json)
    store.close()
    return time.perf_counter() - started


class Recorder:
    def __init__(self) -> None:
        self.lateness: list[float] = []
        self.per_second: Counter[int] = Counter()
        self.backlog = 0
        self.since = 0.0

    def __call__(self, reservation: Reservation) -> None:
        fired = reservation.heartbeat.last_fire or time.time()
        if reservation.due < self.since:
            self.backlog += 1  # came due while the scheduler was loading
            return
        self.lateness.append(fired - reservation.due)
        self.per_second[int(fired)] += 1


async def run(args: argparse.Namespace, path: Path) -> None:
    print(f"machine:  {platform.platform()}, {cpu_model()}, {os.cpu_count()} cores")
    print(f"python:   {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}")
    print(f"workload: {args.heartbeats:,} heartbeats, intervals uniform in [1 min, 1 day], one state.db")
    expected_rate = sum(1 / i for i in range(60, 86_401)) / (86_400 - 60 + 1) * args.heartbeats
    print(f"          expected steady fire rate ≈ {expected_rate:.1f}/s\n")

    took = write_heartbeats(path, args.heartbeats, args.seed)
    print(f"arming:   write {args.heartbeats:,} records: {took:.1f} s ({args.heartbeats / took:,.0f}/s)")

    rss0 = rss_mb()
    store = SQLiteStore(path)
    scheduler = HeartbeatScheduler(store, clock=SystemClock(), poll_interval=15)
    recorder = Recorder()
    target = DirectTarget(scheduler, recorder)
    started = time.perf_counter()
    for i in range(args.heartbeats):
        scheduler.own(f"{i:012x}", target)
    await scheduler.start()
    load = time.perf_counter() - started
    recorder.since = time.time()
    rss1 = rss_mb()
    print(
        f"          load + arm (start-up, incl. orphan scan): {load:.2f} s; "
        f"RSS +{rss1 - rss0:.0f} MB ({(rss1 - rss0) * 2**20 / args.heartbeats:,.0f} B/heartbeat)"
    )

    # -- running --------------------------------------------------------------------------
    wake0, cpu0, wall0 = scheduler.engine.stats.wakeups, time.process_time(), time.perf_counter()
    await asyncio.sleep(args.seconds)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    wakeups = scheduler.engine.stats.wakeups - wake0
    fires = len(recorder.lateness)
    print(f"\nrunning:  {wall:.0f} s on the real clock, no-op dispatcher")
    print(f"          fires: {fires:,} ({fires / wall:.1f}/s), backlog from load time: {recorder.backlog}")
    print(
        f"          lateness p50 {pct(recorder.lateness, 0.5) * 1000:.1f} ms, "
        f"p99 {pct(recorder.lateness, 0.99) * 1000:.1f} ms, max {max(recorder.lateness, default=0) * 1000:.1f} ms"
    )
    peak = max(recorder.per_second.values(), default=0)
    print(f"          fires per second at peak: {peak}")
    print(f"          CPU {cpu / wall * 100:.2f}% of a core; engine wake-ups {wakeups / wall * 60:.0f}/min")
    print(f"          RSS {rss_mb():.0f} MB; claims {scheduler.stats.claims:,}, confirmed {scheduler.stats.confirmed:,}")

    # -- idle ----------------------------------------------------------------------------
    far = time.time() + 86_400 * 2
    for key in list(scheduler.engine._due):
        scheduler.engine.arm(key, far)  # in memory only: nothing due for the idle window
    await asyncio.sleep(0.1)
    wake0, cpu0, wall0 = scheduler.engine.stats.wakeups, time.process_time(), time.perf_counter()
    await asyncio.sleep(args.idle)
    idle_cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    idle_wakeups = scheduler.engine.stats.wakeups - wake0
    await scheduler.stop()

    naive = await naive_poller(store, min(args.idle, 5.0))
    print(f"\nidle:     {args.idle:.0f} s with nothing due: CPU {idle_cpu * 100:.3f}% of a core, "
          f"{idle_wakeups} engine wake-ups")
    print(f"          baseline (scan the store for due heartbeats every 1 s): CPU {naive * 100:.1f}% of a core")
    if idle_cpu > 0:
        print(f"          ratio baseline / engine: {naive / idle_cpu:,.0f}x")

    # -- burst ---------------------------------------------------------------------------
    burst = min(args.burst, args.heartbeats)
    now = time.time()
    for i in range(burst):
        key = heartbeat_key(f"{i:012x}")
        value = store.get_meta(key).value
        store.set_meta(key, {**value, "next_due": now - 1, "pending": None})
    scheduler2 = HeartbeatScheduler(store, clock=SystemClock(), poll_interval=0)
    done = Recorder()
    target2 = DirectTarget(scheduler2, done)
    for i in range(burst):
        scheduler2.own(f"{i:012x}", target2)
    await scheduler2.resync()
    started = time.perf_counter()
    scheduler2.engine.start()
    while scheduler2.stats.confirmed < burst and time.perf_counter() - started < 300:
        await asyncio.sleep(0.01)
    took = time.perf_counter() - started
    print(f"\nburst:    {burst:,} heartbeats due at once, claimed and confirmed in {took:.2f} s "
          f"({scheduler2.stats.confirmed / took:,.0f} fires/s, durable store)")
    await scheduler2.stop()
    store.close()


async def naive_poller(store: SQLiteStore, seconds: float) -> float:
    """CPU share of the design the engine replaces: read every schedule once a second."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        now = time.time()
        _due = [e for e in store.list_meta("heartbeat:") if (e.value.get("next_due") or now + 1) <= now]
        await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - wall0) % 1.0))
    return (time.process_time() - cpu0) / (time.perf_counter() - wall0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heartbeats", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="real-clock run time")
    parser.add_argument("--idle", type=float, default=15.0, help="seconds of the idle measurement")
    parser.add_argument("--burst", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args, Path(tmp) / "state.db"))


if __name__ == "__main__":
    main()
