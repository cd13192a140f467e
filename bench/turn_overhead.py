"""Harness time per agent turn: everything except waiting for the model.

The model is the fake server over real HTTP, answering instantly. For each turn we time the
whole ``Agent.run_turn`` and, separately, the time spent inside ``ModelClient.complete`` (the
HTTP round trip, the client and the server); the harness overhead is the difference: loading
the session, the prompt, the history, storing messages, building the request.

A cold turn is a new process: after the warm turns, ``python bench/turn_overhead.py
--cold-child ...`` (``--colds`` times, the median printed) starts, imports what a turn needs, builds the agent on the same store and
runs one turn on the same session. Printed: that first turn's harness time (timed inside the
new process, imports excluded), and the whole process (interpreter start, imports, the turn,
exit) in wall and CPU time (``os.wait4``), next to the warm figures of the same run.

    .venv/bin/python bench/turn_overhead.py [--turns 200] [--sizes 10,200,2000] [--colds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vigil.agent.turn import Agent
from vigil.config.settings import ModelSettings, Settings
from vigil.models.factory import build_client
from vigil.profiles import Profile
from vigil.store import NewMessage, SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.usage import Usage


class TimedClient:
    """Wraps a real client and adds up the time spent waiting in ``complete``."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.provider = inner.provider
        self.waited = 0.0

    @property
    def model(self) -> str:
        return self.inner.model

    async def complete(self, request, *, on_text=None):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return await self.inner.complete(request, on_text=on_text)
        finally:
            self.waited += time.perf_counter() - started

    async def list_models(self) -> list[str]:
        return await self.inner.list_models()

    async def aclose(self) -> None:
        await self.inner.aclose()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def measure(server: FakeModelServer, size: int, turns: int, root: Path, stream: bool, colds: int) -> dict[str, float]:
    profile = Profile("default", root / f"home-{size}-{stream}").ensure()
    store = SQLiteStore(profile.state_db)
    settings = Settings(model=ModelSettings(provider="openai", name="fake-model", base_url=server.base_url, api_key=server.api_key))
    client = TimedClient(await build_client(settings.model, {}))
    agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=root)
    session = await agent.new_session()
    for i in range(size // 2):
        store.append_message(session.id, NewMessage("user", f"question number {i} about the project " * 3))
        store.append_message(session.id, NewMessage("assistant", f"answer number {i}, with some detail " * 6, usage=Usage(10, 100, 0, 40)))
    await agent.run_turn(session.id, "warm up")  # builds and stores the prompt, loads history
    overheads: list[float] = []
    totals: list[float] = []
    for i in range(turns):
        client.waited = 0.0
        started = time.perf_counter()
        await agent.run_turn(session.id, f"turn {i}", on_event=(lambda e: None) if stream else None, stream=stream)
        total = time.perf_counter() - started
        totals.append(total)
        overheads.append(total - client.waited)
    await client.aclose()
    store.close()
    cold_runs = [cold_turn(server, profile.home, session.id, root, stream) for _ in range(colds)]
    cold = {key: statistics.median(run[key] for run in cold_runs) for key in ("harness", "wall", "cpu")}
    return {
        "p50": statistics.median(overheads) * 1000,
        "p99": percentile(overheads, 99) * 1000,
        "total_p50": statistics.median(totals) * 1000,
        "cold": cold["harness"] * 1000,
        "cold_wall": cold["wall"] * 1000,
        "cold_cpu": cold["cpu"] * 1000,
    }


def cold_turn(server: FakeModelServer, home: Path, session_id: str, cwd: Path, stream: bool) -> dict[str, float]:
    """One turn on ``session_id`` in a new process: its harness time (seconds, timed inside it)
    and the whole process's wall and CPU time."""
    argv = [sys.executable, __file__, "--cold-child", json.dumps(
        {"home": str(home), "session": session_id, "cwd": str(cwd), "stream": stream,
         "base_url": server.base_url, "api_key": server.api_key})]
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"the cold turn's process failed: {err.read().decode(errors='replace')[-2000:]}")
    return {"harness": json.loads(out)["harness"], "wall": wall, "cpu": usage.ru_utime + usage.ru_stime}


async def cold_child(spec: dict) -> None:
    """In the new process: build the agent on the stored session and run one turn."""
    profile = Profile("default", Path(spec["home"]))
    store = SQLiteStore(profile.state_db)
    settings = Settings(model=ModelSettings(provider="openai", name="fake-model", base_url=spec["base_url"],
                                            api_key=spec["api_key"]))
    client = TimedClient(await build_client(settings.model, {}))
    agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=Path(spec["cwd"]))
    started = time.perf_counter()
    stream = spec["stream"]
    await agent.run_turn(spec["session"], "cold turn", on_event=(lambda e: None) if stream else None, stream=stream)
    harness = time.perf_counter() - started - client.waited
    await client.aclose()
    store.close()
    print(json.dumps({"harness": harness}))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="measured turns per session size")
    parser.add_argument("--sizes", default="10,200,2000", help="messages already in the session")
    parser.add_argument("--colds", type=int, default=5, help="cold turns (new processes) per size and mode; median")
    parser.add_argument("--cold-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_child:
        await cold_child(json.loads(args.cold_child))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}")
    print(f"workload: {args.turns} turns per size after one warm-up turn; fake model over HTTP on loopback, instant answers;")
    print(f"          then {args.colds} cold turns on the same session, each in a new process (median; harness timed inside")
    print("          it, imports before the turn excluded; the whole process: interpreter start, imports, the turn, exit)")
    print(f"{'messages':>9} {'mode':>10} {'harness p50':>12} {'harness p99':>12} {'whole turn p50':>15} "
          f"{'cold harness':>13} {'cold/warm':>10} {'cold process wall/CPU':>22}")
    with FakeModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.set_default_reply("Fine, noted.")
        for size in sizes:
            for stream in (False, True):
                server.reset()
                server.set_default_reply("Fine, noted.")
                r = await measure(server, size, args.turns, Path(tmp), stream, args.colds)
                mode = "stream" if stream else "no-stream"
                print(f"{size:>9} {mode:>10} {r['p50']:>10.2f}ms {r['p99']:>10.2f}ms {r['total_p50']:>13.2f}ms "
                      f"{r['cold']:>11.2f}ms {r['cold'] / r['p50']:>9.1f}x "
                      f"{r['cold_wall']:>11.0f} / {r['cold_cpu']:.0f} ms")
    print("target: harness p50 under 5 ms at 200 messages")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
