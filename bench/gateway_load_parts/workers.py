"""The ``--store`` mode of ``gateway_load.py``: the web-chat load on 1, 3, ... gateways
("workers") sharing one PostgreSQL store, the runs side by side.

Per worker count, on a fresh schema of its own (``?schema=``, dropped afterwards unless
``--keep``): that many ``vigil gateway run`` processes on one profile home with ``store.url``
in its config.yaml, each on its own web port, the fake model a process of its own and the load
from driver processes (``driver.py``), so that no client shares a process with what is measured.
``conversations`` web conversations at once, each made on one worker (round-robin), keeping an
event stream open on every worker, and its ``messages`` messages posted one after another to
every worker in turn (message ``n`` to the next worker after the one that got ``n - 1``), each
answer awaited on the event stream of the worker it was posted to: most messages land on a
worker that does not run their conversation, so they go through the hand-over and their
answer through the event relay. Latency: POST sent -> ``turn_ended`` seen. Gateway CPU: each
worker's own ``/proc/PID/stat`` from the start signal to the store's settling (start-ups not
included). Afterwards the store is read (``audit.audit_postgres``): every POST's inbox entry
answered exactly once, one reply each in the outbox, none lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gateway_load_parts import audit as store_audit
from gateway_load_parts.process import Gateway, ModelProcess, cpu_seconds, free_port
from gateway_load_parts.report import pct
from gateway_load_parts.web import PHASE_DEADLINE, Phase

DRIVER = Path(__file__).resolve().parent / "driver.py"


def worker_counts(text: str) -> list[int]:
    """``"1,3"`` -> ``[1, 3]``; ``SystemExit`` with a one-line reason otherwise."""
    try:
        counts = [int(n) for n in text.split(",") if n.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise SystemExit(f"--workers: one or more positive counts separated by commas, such as 1,3 (not {text!r})")
    return counts


def check_store(url: str) -> str:
    """Where ``url`` points, safe to print; ``SystemExit`` with a one-line reason if it is no
    PostgreSQL URL or no server answers there."""
    if not url.lower().startswith(("postgresql://", "postgres://")):
        raise SystemExit(f"--store: give a postgresql:// URL, not {url!r}")
    import psycopg

    from vigil.store.errors import StoreError
    from vigil.store.postgres.conn import parse_target

    try:
        target = parse_target(url.split("?", 1)[0])
        psycopg.connect(target.conninfo, connect_timeout=5).close()
    except StoreError as exc:
        raise SystemExit(f"--store: {exc}") from None
    except psycopg.Error as exc:
        raise SystemExit(f"--store: no PostgreSQL server answers at {target.where}: {target.scrub(str(exc))}") from None
    return target.where


def fresh_schema(url: str) -> tuple[str, str, Callable[[], None]]:
    """A new schema on the server ``url`` names, migrated: (its URL, its name, how to drop it)."""
    import psycopg

    from vigil.store.postgres import PostgresStore
    from vigil.store.postgres.conn import parse_target

    base = url.split("?", 1)[0]
    schema = f"vigil_bench_{uuid.uuid4().hex[:10]}"
    target = parse_target(base)

    def drop() -> None:
        with psycopg.connect(target.conninfo, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    located = f"{base}?schema={schema}"
    PostgresStore(located).close()  # migrated once, before the workers open it together
    return located, schema, drop


ANSWERED = re.compile(r"stopped \((\d+) message\(s\) answered")
HANDED = re.compile(r"(\d+) message\(s\) handed over to this worker")


def worker_figures(gateway: Gateway) -> tuple[int | None, int]:
    """What a stopped worker's output says it did: messages answered (``None`` if it did not
    say), and messages handed over to it by the others."""
    text = (gateway.home / gateway.log).read_text(errors="replace")
    answered = ANSWERED.findall(text)
    return (int(answered[-1]) if answered else None), sum(int(n) for n in HANDED.findall(text))


@dataclass
class Run:
    """One worker count's run and what the store said afterwards."""

    workers: int
    phase: Phase
    counts: dict[str, dict[str, int]]
    model_cpu: float
    gateway_cpu: float
    bench_cpu: float
    per_worker: list[tuple[int | None, int]]
    """``worker_figures`` of each worker."""

    @property
    def seconds(self) -> float:
        return self.phase.ended - self.phase.started

    @property
    def total(self) -> dict[str, int]:
        return store_audit.total(self.counts)

    @property
    def measured(self) -> int:
        """Messages sent after the start signal (the warm-ups before it are in the store too)."""
        return len(self.phase.latencies) + self.phase.timeouts

    @property
    def rate(self) -> float:
        return self.measured / self.seconds if self.seconds > 0 else float("nan")

    def per_message_ms(self, cpu: float) -> float:
        return cpu / self.measured * 1000 if self.measured else float("nan")

    @property
    def lost(self) -> int:
        """Messages taken without a final answer in the store (or without their inbox entry)."""
        return self.total["lost"] + max(0, len(set(self.phase.receipts)) - self.total["accepted"])

    @property
    def doubled(self) -> int:
        posted_twice = len(self.phase.receipts) - len(set(self.phase.receipts))
        return max(self.total["duplicated answers"], self.total["duplicated replies"]) + posted_twice

    @property
    def exactly_once(self) -> bool:
        return self.lost == 0 and self.doubled == 0 and self.total["answered"] == len(self.phase.receipts)

    def to_json(self) -> dict[str, Any]:
        values = self.phase.latencies
        return {
            "workers": self.workers, "messages": self.measured, "posted": len(self.phase.receipts),
            "seconds": round(self.seconds, 3), "messages_per_s": round(self.rate, 2),
            "latency_ms": {"p50": round(pct(values, 0.5) * 1000, 1), "p99": round(pct(values, 0.99) * 1000, 1),
                           "max": round(max(values, default=float("nan")) * 1000, 1)},
            "fake_model_cpu_s": round(self.model_cpu, 2),
            "gateway_cpu_ms_a_message": round(self.per_message_ms(self.gateway_cpu), 2),
            "store": self.total, "lost": self.lost, "doubled": self.doubled, "exactly_once": self.exactly_once,
            "waits_over_the_limit": self.phase.timeouts, "gateway_cpu_s": round(self.gateway_cpu, 2),
            "driver_cpu_s": round(self.bench_cpu, 2),
            "per_worker": [{"answered": a, "handed_over": h} for a, h in self.per_worker],
        }


async def settle(url: str, phase: Phase) -> dict[str, dict[str, int]]:
    """Until the store says every POST's message is answered and its reply delivered (bounded);
    the last counts."""
    deadline = time.monotonic() + PHASE_DEADLINE
    while True:
        counts = await asyncio.to_thread(store_audit.audit_postgres, url)
        both = store_audit.total(counts)
        if both["accepted"] >= len(phase.receipts) and store_audit.finished(counts) and both["undelivered"] == 0:
            return counts
        if time.monotonic() > deadline:
            print(f"  (gave up waiting after {PHASE_DEADLINE:.0f} s: what is left is counted as lost)")
            return counts
        await asyncio.sleep(0.5)


def load(gateways: list[Gateway], url: str, conversations: int, messages: int, model: ModelProcess,
         drivers: int = 1) -> tuple[Phase, dict[str, dict[str, int]], float, float, float]:
    """The load from ``drivers`` driver processes: the phase, the store's counts after it
    settled, and the CPU seconds of the gateways, the fake model and the drivers meanwhile."""
    phase = Phase()
    bases = [arg for g in gateways for arg in ("--base", g.url)]
    env = {**os.environ, "VIGIL_BENCH_TOKEN": gateways[0].token}
    share = [conversations // drivers + (1 if n < conversations % drivers else 0) for n in range(drivers)]
    procs, first = [], 0
    for n in share:
        if n:
            procs.append(subprocess.Popen(
                [sys.executable, str(DRIVER), *bases, "--conversations", str(n), "--messages", str(messages),
                 "--first", str(first)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env))
            first += n
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit("a load driver failed")
    pids = [g.process.pid for g in gateways if g.process is not None]
    gateways0, model0 = sum(cpu_seconds(p) for p in pids), cpu_seconds(model.pid)
    drivers_cpu = [cpu_seconds(p.pid) for p in procs]
    phase.started = time.monotonic()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for n, proc in enumerate(procs):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        drivers_cpu[n] = cpu_seconds(proc.pid) - drivers_cpu[n]
        if not line:
            raise SystemExit("a load driver ended without figures")
        result = json.loads(line)
        phase.latencies += result["latencies"]
        phase.receipts += result["receipts"]
        phase.timeouts += result["timeouts"]
        phase.retries += result["retries"]
        proc.wait(30)
    counts = asyncio.run(settle(url, phase))
    phase.ended = time.monotonic()
    return (phase, counts, sum(cpu_seconds(p) for p in pids) - gateways0, cpu_seconds(model.pid) - model0,
            sum(drivers_cpu))


def run_once(store: str, workers: int, conversations: int, messages: int, model: ModelProcess,
             home: Path, keep: bool) -> Run:
    url, schema, drop = fresh_schema(store)
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(f"store:\n  url: {json.dumps(url)}\n")
    gateways = [Gateway(home, free_port(), model, None, [], log=f"worker-{n}.out") for n in range(workers)]
    try:
        for gateway in gateways:
            gateway.start()
        phase, counts, gateway_cpu, model_cpu, driver_cpu = load(gateways, url, conversations, messages, model)
    finally:
        for gateway in gateways:
            gateway.stop()
        if keep:
            print(f"  kept PostgreSQL schema {schema}")
        else:
            drop()
    return Run(workers, phase, counts, model_cpu, gateway_cpu, driver_cpu, [worker_figures(g) for g in gateways])


def describe(run: Run) -> None:
    values = run.phase.latencies
    print(f"{run.workers} worker(s): {run.measured} messages in {run.seconds:.1f} s (start signal -> the store "
          f"settled) = {run.rate:.1f} messages/s; latency p50 {pct(values, 0.5) * 1000:,.0f} ms, "
          f"p99 {pct(values, 0.99) * 1000:,.0f} ms, max {max(values, default=float('nan')) * 1000:,.0f} ms "
          f"(fake model included); {run.phase.timeouts} unanswered, {run.phase.retries} client retries")
    print(f"  CPU a message (each process's /proc/PID/stat from the start signal): "
          f"{'gateway' if run.workers == 1 else f'{run.workers} gateways together'} "
          f"{run.per_message_ms(run.gateway_cpu):.1f} ms, load driver {run.per_message_ms(run.bench_cpu):.1f} ms, "
          f"fake model {run.per_message_ms(run.model_cpu):.1f} ms")
    total = run.total
    print(f"  exactly once: {'yes' if run.exactly_once else 'NO'} - POSTs taken {len(run.phase.receipts)} "
          f"(one warm-up per conversation included) "
          f"(distinct inbox ids {len(set(run.phase.receipts))}), in the store {total['accepted']}, answered "
          f"{total['answered']}, lost {run.lost}, doubled {run.doubled}")
    if run.workers > 1:
        answered = " / ".join("?" if a is None else str(a) for a, _ in run.per_worker)
        handed = " / ".join(str(h) for _, h in run.per_worker)
        print(f"  per worker (from their output): answered {answered}; handed over to it by the others {handed}")


def compare(runs: list[Run]) -> None:
    first = runs[0]
    heads = [f"{r.workers} worker(s)" for r in runs] + [f"{r.workers}/{first.workers}" for r in runs[1:]]
    print("\nside by side (latency: POST sent -> turn_ended on that worker's event stream, fake model included; "
          "gateway CPU from each worker's /proc/PID/stat, start-ups not included):")
    print(f"  {'':<22}" + "".join(f"{h:>14}" for h in heads))

    def row(label: str, values: list[float], text: Callable[[float], str]) -> None:
        ratios = [v / values[0] if values[0] else float("nan") for v in values[1:]]
        print(f"  {label:<22}" + "".join(f"{text(v):>14}" for v in values) + "".join(f"{r:>13.2f}x" for r in ratios))

    ms = lambda seconds: f"{seconds * 1000:,.0f} ms"  # noqa: E731
    row("messages/s", [r.rate for r in runs], lambda v: f"{v:,.1f}")
    row("latency p50", [pct(r.phase.latencies, 0.5) for r in runs], ms)
    row("latency p99", [pct(r.phase.latencies, 0.99) for r in runs], ms)
    row("latency max", [max(r.phase.latencies, default=float("nan")) for r in runs], ms)
    row("gateway CPU a message", [r.gateway_cpu / max(1, r.measured) for r in runs], ms)
    print(f"  {'exactly once':<22}" + "".join(f"{'yes' if r.exactly_once else 'NO':>14}" for r in runs))


def bench(store: str, workers: str, conversations: int, messages: int, keep: Path | None, as_json: bool) -> int:
    """Run the load once per worker count and print each run, then the runs side by side
    (with ``as_json`` the text goes to stderr and a JSON summary to stdout)."""
    import tempfile

    counts = worker_counts(workers)
    where = check_store(store)
    out = sys.stderr if as_json else sys.stdout
    runs: list[Run] = []
    with redirect_stdout(out):
        print(f"workload: {conversations} concurrent web conversations x {messages} messages, each made on one "
              f"worker and its messages posted to every worker in turn; fake model answering at once; "
              f"PostgreSQL store at {where}, a fresh schema per worker count; worker counts {counts}; "
              f"the fake model, each gateway and the load driver each a process of their own; "
              f"load average {Path('/proc/loadavg').read_text().split(' ', 3)[:3]}")
        model = ModelProcess()
        try:
            with tempfile.TemporaryDirectory() as scratch:
                folder = keep or Path(scratch)
                for n, count in enumerate(counts):
                    runs.append(run_once(store, count, conversations, messages, model,
                                         folder / f"run-{n + 1}-{count}-workers", keep is not None))
                    describe(runs[-1])
        finally:
            model.stop()
        if len(runs) > 1:
            compare(runs)
        print(f"load average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    if as_json:
        print(json.dumps({"store": where, "conversations": conversations, "messages": messages,
                          "runs": [r.to_json() for r in runs]}, indent=2))
    return 0 if all(r.exactly_once for r in runs) else 1
