"""Harness time per agent turn: everything except waiting for the model.

The model is the fake server over real HTTP, answering instantly. For each turn we time the
whole ``Agent.run_turn`` and, separately, the time spent inside ``ModelClient.complete`` (the
HTTP round trip, the SDK and the server); the harness overhead is the difference: loading the
session, the prompt, the history, storing messages, building the request.

    .venv/bin/python bench/turn_overhead.py [--turns 200] [--sizes 10,200,2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from vigil.agent.turn import Agent
from vigil.config import ModelSettings, Settings
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


async def measure(server: FakeModelServer, size: int, turns: int, root: Path, stream: bool) -> dict[str, float]:
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
    # a cold turn: a new process-like agent that must read everything back from the store
    cold_agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=root)
    client.waited = 0.0
    started = time.perf_counter()
    await cold_agent.run_turn(session.id, "cold turn")
    cold = time.perf_counter() - started - client.waited
    await client.aclose()
    store.close()
    return {
        "p50": statistics.median(overheads) * 1000,
        "p99": percentile(overheads, 99) * 1000,
        "total_p50": statistics.median(totals) * 1000,
        "cold": cold * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="measured turns per session size")
    parser.add_argument("--sizes", default="10,200,2000", help="messages already in the session")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}")
    print(f"workload: {args.turns} turns per size after one warm-up turn; fake model over HTTP on loopback, instant answers")
    print(f"{'messages':>9} {'mode':>10} {'harness p50':>12} {'harness p99':>12} {'whole turn p50':>15} {'cold turn harness':>18}")
    with FakeModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.set_default_reply("Fine, noted.")
        for size in sizes:
            for stream in (False, True):
                server.reset()
                server.set_default_reply("Fine, noted.")
                r = await measure(server, size, args.turns, Path(tmp), stream)
                mode = "stream" if stream else "no-stream"
                print(f"{size:>9} {mode:>10} {r['p50']:>10.2f}ms {r['p99']:>10.2f}ms {r['total_p50']:>13.2f}ms {r['cold']:>16.2f}ms")
    print("target: harness p50 under 5 ms at 200 messages")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
