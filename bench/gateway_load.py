"""Load on the gateway's web API: many conversations at once, nothing lost, nothing doubled.

Starts the fake model server (answering at once) in this process and ``vigil gateway run`` as a
child process on a fresh profile with the durable SQLite store, then:

1. **steady**: ``--conversations`` web conversations (default 200) each send
   ``--messages`` messages (default 10, so 2,000 in all) one after another, all conversations
   at once, through ``POST /api/conversations/{id}/messages`` with a bearer token, and wait for
   each answer on the conversation's event stream (SSE). Reported: messages/s, and the added
   latency per message (POST sent → ``turn_ended`` received, minus the model's own time, which
   the fake server keeps near zero), p50/p99/max.
2. **kill**: the same load again on a new profile, and in the middle the gateway is killed with
   SIGKILL and started again; clients retry a message whose POST failed with the same
   ``client_id`` (its idempotency key) until the new gateway takes it.

After each phase the store itself is read: every accepted message must have exactly one
final answer (lost = none, duplicated = more than one) and exactly one reply in the outbox.

    .venv/bin/python bench/gateway_load.py [--conversations 200] [--messages 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from vigil.testing.fake_model import FakeModelServer  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Gateway:
    home: Path
    port: int
    fake: FakeModelServer
    process: subprocess.Popen[bytes] | None = None
    profile_to: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {
            **os.environ, "VIGIL_HOME": str(self.home), "OPENAI_BASE_URL": self.fake.base_url,
            "OPENAI_API_KEY": self.fake.api_key, "VIGIL_MODEL": "fake-model",
        }
        log = open(self.home / "gateway.out", "ab")
        profiler = ["-m", "cProfile", "-o", str(self.profile_to)] if self.profile_to else []
        self.process = subprocess.Popen(
            [sys.executable, *profiler, "-m", "vigil.cli.main", "gateway", "run", "--web-port", str(self.port)],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                raise SystemExit(f"the gateway exited at start-up: {(self.home / 'gateway.out').read_text()[-2000:]}")
            time.sleep(0.1)
        raise SystemExit("the gateway did not come up in 60 s")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()

    @property
    def token(self) -> str:
        return (self.home / "gateway.token").read_text().strip()


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    accepted: int = 0
    retries: int = 0
    started: float = 0.0
    ended: float = 0.0


async def post_until_taken(client: httpx.AsyncClient, url: str, body: dict, phase: Phase) -> dict:
    while True:
        try:
            response = await client.post(url, json=body)
            if response.status_code == 202:
                return response.json()
            if response.status_code not in (502, 503):
                raise SystemExit(f"POST {url}: {response.status_code} {response.text[:200]}")
        except httpx.HTTPError:
            pass
        phase.retries += 1
        await asyncio.sleep(0.2)


async def conversation(client: httpx.AsyncClient, base: str, messages: int, phase: Phase, wait_answers: bool) -> str:
    while True:
        try:
            response = await client.post(f"{base}/api/conversations")
            if response.status_code in (200, 201):
                break
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.2)
    session_id = response.json()["id"]
    for n in range(messages):
        body = {"text": f"message {n} of {session_id}", "client_id": uuid.uuid4().hex}
        if not wait_answers:
            await post_until_taken(client, f"{base}/api/conversations/{session_id}/messages", body, phase)
            phase.accepted += 1
            continue
        async with client.stream("GET", f"{base}/api/conversations/{session_id}/events", timeout=None) as events:
            sent = time.perf_counter()
            await post_until_taken(client, f"{base}/api/conversations/{session_id}/messages", body, phase)
            phase.accepted += 1
            async for line in events.aiter_lines():
                if line.startswith("data:") and json.loads(line[5:]).get("type") == "turn_ended":
                    phase.latencies.append(time.perf_counter() - sent)
                    break
    return session_id


def audit(db: Path) -> dict[str, int]:
    """Count, from the store itself, what became of every accepted message."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        inbox = dict(connection.execute("SELECT status, count(*) FROM gateway_inbox GROUP BY status").fetchall())
        replies = Counter(row[0] for row in connection.execute(
            "SELECT inbox_id FROM gateway_outbox WHERE inbox_id IS NOT NULL AND kind = 'reply'"))
        answers: Counter[int] = Counter()
        current: int | None = None
        # extra: [tool_calls, tool_call_id, tool_name, usage, meta] or NULL (see store.rows).
        for role, extra in connection.execute("SELECT role, extra FROM messages ORDER BY session_id, seq"):
            calls, _, _, _, meta = json.loads(extra) if extra else (None,) * 5
            data = meta or {}
            if role == "user":
                current = data.get("inbox")
            elif role == "assistant" and current is not None and not calls and not data.get("cut_off"):
                answers[current] += 1
                current = None
        accepted = [row[0] for row in connection.execute("SELECT id FROM gateway_inbox")]
    finally:
        connection.close()
    return {
        "accepted": len(accepted),
        "answered": inbox.get("answered", 0),
        "lost": sum(1 for entry in accepted if answers[entry] == 0),
        "duplicated answers": sum(1 for entry in accepted if answers[entry] > 1),
        "duplicated replies": sum(1 for entry in accepted if replies[entry] > 1),
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run_phase(gateway: Gateway, conversations: int, messages: int, kill: bool) -> tuple[Phase, dict[str, int]]:
    phase = Phase()
    limits = httpx.Limits(max_connections=conversations * 2 + 10, max_keepalive_connections=conversations * 2)
    headers = {"Authorization": f"Bearer {gateway.token}"}
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=60) as client:
        phase.started = time.perf_counter()
        work = [asyncio.create_task(conversation(client, gateway.url, messages, phase, not kill))
                for _ in range(conversations)]
        if kill:
            total = conversations * messages
            while phase.accepted < total // 2:
                await asyncio.sleep(0.01)
            gateway.kill()
            print(f"  killed the gateway with SIGKILL after {phase.accepted} accepted messages; restarting")
            await asyncio.to_thread(gateway.start)
        await asyncio.gather(*work)
        # wait until the store says every accepted message is finished
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            counts = audit(gateway.home / "state.db")
            if counts["answered"] >= counts["accepted"] and counts["lost"] == 0:
                break
            await asyncio.sleep(0.5)
        phase.ended = time.perf_counter()
    gateway.stop()
    return phase, audit(gateway.home / "state.db")


def report(name: str, phase: Phase, counts: dict[str, int], gateway_cpu: float, bench_cpu: float) -> None:
    seconds = phase.ended - phase.started
    print(f"{name}: {counts['accepted']} messages in {seconds:.1f} s = {counts['accepted'] / seconds:.0f} messages/s")
    print(f"  CPU: gateway process {gateway_cpu:.1f} s ({gateway_cpu / counts['accepted'] * 1000:.1f} ms a message, "
          f"start-up included), this process (clients + fake model) {bench_cpu:.1f} s")
    if phase.latencies:
        ms = [x * 1000 for x in phase.latencies]
        print(f"  added latency per message: p50 {pct(ms, 0.5):.1f} ms, p99 {pct(ms, 0.99):.1f} ms, "
              f"max {max(ms):.1f} ms, mean {statistics.mean(ms):.1f} ms")
    print(f"  answered {counts['answered']}, lost {counts['lost']}, duplicated answers {counts['duplicated answers']}, "
          f"duplicated replies {counts['duplicated replies']}, client retries {phase.retries}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the steady phase's gateway here")
    parser.add_argument("--steady-only", action="store_true", help="skip the SIGKILL phase")
    args = parser.parse_args()
    print(f"workload: {args.conversations} concurrent web conversations x {args.messages} messages, "
          "fake model answering at once, durable SQLite store, 2 phases")
    with FakeModelServer() as fake, tempfile.TemporaryDirectory() as tmp:
        phases = (("steady", False),) if args.steady_only else (("steady", False), ("SIGKILL + restart", True))
        for name, kill in phases:
            home = Path(tmp) / name.split()[0]
            home.mkdir()
            gateway = Gateway(home, free_port(), fake, profile_to=args.profile if not kill else None)
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            own_before = resource.getrusage(resource.RUSAGE_SELF)
            gateway.start()
            try:
                phase, counts = asyncio.run(run_phase(gateway, args.conversations, args.messages, kill))
            finally:
                gateway.stop()
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            own = resource.getrusage(resource.RUSAGE_SELF)
            cpu = lambda after, before: (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)  # noqa: E731
            report(name, phase, counts, cpu(children, children_before), cpu(own, own_before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
