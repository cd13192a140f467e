"""Load on the gateway through the web API and Telegram: many conversations at once, nothing lost, nothing doubled.

Starts the fake model server (answering at once) and the fake Telegram Bot API in this process,
and ``vigil gateway run`` as a child process on a fresh profile with the durable SQLite store,
Telegram enabled (long polling against the fake, the bench's users on ``telegram.allow``, the
token in ``TELEGRAM_BOT_TOKEN``), then:

1. **steady**: ``--conversations`` conversations (default 200; ``--telegram-share`` of them,
   default half, are Telegram private chats, the rest web conversations) each send
   ``--messages`` messages (default 10, so 2,000 in all) one after another, all conversations
   at once. Web: ``POST /api/conversations/{id}/messages`` with a bearer token, the answer
   awaited on the conversation's event stream (SSE). Telegram: a user writes in the fake and
   waits until the answer's ``sendMessage``/``editMessageText`` reaches the fake. Reported
   for web, Telegram and both: messages/s, and the added latency per message (web: POST sent
   -> ``turn_ended``; Telegram: update available to the bot -> the answer at the fake; both
   minus the fake model's mean time per call), p50/p99/max.
2. **kill**: the same load again on a new profile, and in the middle the gateway is killed
   with SIGKILL and started again. Web clients post without waiting for answers, and retry a
   POST that failed with the same ``client_id`` (its idempotency key) until the new gateway
   takes it; Telegram users keep writing once answered, and the fake keeps their updates until
   the bot confirms them.

After each phase the store is read (every accepted message has exactly one final answer and at
most one reply in the outbox), and for Telegram also what the users saw (the fake model answers
each Telegram message with a text naming it, so each message must show exactly one answer in its
chat): lost and duplicated counts, target 0 and 0. ``--keep DIR`` keeps the profiles (store,
logs) for a look afterwards.

    .venv/bin/python bench/gateway_load.py [--conversations 200] [--messages 10] [--telegram-share 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from gateway_load_parts import audit as store_audit  # noqa: E402
from gateway_load_parts import telegram as tg  # noqa: E402
from gateway_load_parts.process import Gateway, TimedModel, free_port  # noqa: E402
from gateway_load_parts.report import report  # noqa: E402

from vigil.testing.fake_model import FakeModelServer  # noqa: E402
from vigil.testing.telegram_api.server import FakeTelegramServer  # noqa: E402

ANSWER_WAIT = 120.0
"""Seconds a user waits for one answer before counting it and writing on."""
PHASE_DEADLINE = 900.0
"""Seconds a phase may take to settle after its clients finished."""


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    accepted: list[int] = field(default_factory=lambda: [0])
    """Messages taken so far, web and Telegram (a list: the Telegram users count into it too)."""
    retries: int = 0
    timeouts: int = 0
    """Web answers not seen on the event stream within ``ANSWER_WAIT`` seconds."""
    started: float = 0.0
    ended: float = 0.0
    web_ended: float = 0.0
    telegram: tg.Side = field(default_factory=tg.Side)
    killed: float = 0.0
    doubles: int | None = None
    """Telegram: answers shown before the kill and again by the restarted gateway."""


async def post_until_taken(client: httpx.AsyncClient, url: str, body: dict, phase: Phase) -> dict:
    deadline = time.monotonic() + PHASE_DEADLINE
    while time.monotonic() < deadline:
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
    raise SystemExit(f"POST {url}: not taken in {PHASE_DEADLINE:.0f} s")


async def web_conversation(client: httpx.AsyncClient, base: str, messages: int, phase: Phase, wait_answers: bool) -> None:
    deadline = time.monotonic() + PHASE_DEADLINE
    while True:
        try:
            response = await client.post(f"{base}/api/conversations")
            if response.status_code in (200, 201):
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the gateway made no web conversation")
        await asyncio.sleep(0.2)
    session_id = response.json()["id"]
    for n in range(messages):
        body = {"text": f"message {n} of {session_id}", "client_id": uuid.uuid4().hex}
        if not wait_answers:
            await post_until_taken(client, f"{base}/api/conversations/{session_id}/messages", body, phase)
            phase.accepted[0] += 1
            continue
        async with client.stream("GET", f"{base}/api/conversations/{session_id}/events", timeout=ANSWER_WAIT) as events:
            sent = time.perf_counter()
            await post_until_taken(client, f"{base}/api/conversations/{session_id}/messages", body, phase)
            phase.accepted[0] += 1
            try:
                async for line in events.aiter_lines():
                    if line.startswith("data:") and json.loads(line[5:]).get("type") == "turn_ended":
                        phase.latencies.append(time.perf_counter() - sent)
                        break
            except httpx.ReadTimeout:
                phase.timeouts += 1
    phase.web_ended = max(phase.web_ended, time.perf_counter())


async def settle(gateway: Gateway, phase: Phase) -> None:
    """Until the store says every accepted message is answered and delivered, and every
    Telegram user sees every answer (bounded)."""
    deadline = time.monotonic() + PHASE_DEADLINE
    while time.monotonic() < deadline:
        counts = store_audit.audit(gateway.home / "state.db")
        both = store_audit.total(counts)
        telegram_in = counts.get("telegram", {}).get("accepted", 0)
        done = store_audit.finished(counts) and both["undelivered"] == 0
        if gateway.telegram is not None:
            done = done and telegram_in >= len(phase.telegram.written) and tg.all_delivered(gateway.telegram, phase.telegram)
        if done:
            return
        await asyncio.sleep(0.5)
    print(f"  (gave up waiting after {PHASE_DEADLINE:.0f} s: what is left is counted as lost)")


async def run_phase(gateway: Gateway, web: int, telegram: list[int], messages: int, kill: bool) -> Phase:
    phase = Phase()
    limits = httpx.Limits(max_connections=web * 2 + 10, max_keepalive_connections=web * 2 + 10)
    headers = {"Authorization": f"Bearer {gateway.token}"}
    loop = asyncio.get_running_loop()
    seen = tg.watch(gateway.telegram, loop) if gateway.telegram is not None else None
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=60, trust_env=False) as client:
        phase.started = time.perf_counter()
        work = [asyncio.create_task(web_conversation(client, gateway.url, messages, phase, not kill)) for _ in range(web)]
        if gateway.telegram is not None and seen is not None:
            work += [asyncio.create_task(tg.conversation(gateway.telegram, seen, user, messages, phase.telegram,
                                                         phase.accepted, ANSWER_WAIT)) for user in telegram]
        if kill:
            total = (web + len(telegram)) * messages
            deadline = time.monotonic() + PHASE_DEADLINE
            while phase.accepted[0] < total // 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            phase.killed = time.perf_counter()
            gateway.kill()
            print(f"  killed the gateway with SIGKILL after {phase.accepted[0]} accepted messages; restarting")
            await asyncio.to_thread(gateway.start)
        await asyncio.gather(*work)
        await settle(gateway, phase)
        if seen is not None and kill:
            phase.doubles = tg.doubles(seen, phase.killed)
        phase.ended = time.perf_counter()
    gateway.stop()
    return phase


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200, help="conversations at once (default 200)")
    parser.add_argument("--messages", type=int, default=10, help="messages each conversation sends (default 10)")
    parser.add_argument("--telegram-share", type=float, default=0.5,
                        help="fraction of the conversations on Telegram, 0 to 1 (default 0.5)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the steady phase's gateway here")
    parser.add_argument("--steady-only", action="store_true", help="skip the SIGKILL phase")
    parser.add_argument("--keep", type=Path, help="keep the gateways' profiles (store, logs) in this new directory")
    args = parser.parse_args()
    if args.conversations < 1 or args.messages < 1:
        parser.error("--conversations and --messages must be at least 1")
    if not 0 <= args.telegram_share <= 1:
        parser.error("--telegram-share must be between 0 and 1")
    on_telegram = round(args.conversations * args.telegram_share)
    on_web = args.conversations - on_telegram
    print(f"workload: {args.conversations} concurrent conversations ({on_web} web, {on_telegram} Telegram) "
          f"x {args.messages} messages, fake model answering at once, durable SQLite store, "
          f"{1 if args.steady_only else 2} phase(s); load average {Path('/proc/loadavg').read_text().split(' ', 3)[:3]}")
    fake = FakeModelServer()
    model = TimedModel(fake)
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep: {args.keep} exists; name a new directory")
    with fake, tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        if args.keep is not None:
            args.keep.mkdir(parents=True)
        phases = (("steady", False),) if args.steady_only else (("steady", False), ("SIGKILL + restart", True))
        scripted = False
        for name, kill in phases:
            home = Path(tmp) / name.split()[0]
            home.mkdir()
            model.durations.clear()
            if not scripted:
                tg.script(fake, tg.users(on_telegram), args.messages)
                scripted = True
            telegram = FakeTelegramServer().start() if on_telegram else None
            allow = tg.users(on_telegram)
            gateway = Gateway(home, free_port(), fake, telegram, allow, profile_to=args.profile if not kill else None)
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            own_before = resource.getrusage(resource.RUSAGE_SELF)
            try:
                gateway.start()
                phase = asyncio.run(run_phase(gateway, on_web, allow, args.messages, kill))
            finally:
                gateway.stop()
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            own = resource.getrusage(resource.RUSAGE_SELF)
            cpu = lambda after, before: (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)  # noqa: E731
            counts = store_audit.audit(home / "state.db")
            seen: dict[str, Any] | None = None
            if telegram is not None:
                seen = {**tg.delivered(telegram, phase.telegram), "calls": tg.calls(telegram)}
            if telegram is not None:
                telegram.stop()
            report(name, phase, counts, seen, model.durations, cpu(children, children_before), cpu(own, own_before),
                   killed=kill)
    print(f"load average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
