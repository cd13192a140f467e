"""Load on the gateway: its CPU per message, throughput and latency against a baseline; and,
with ``--audit``, many conversations through the web API and Telegram with nothing lost or
doubled across a SIGKILL.

**Default: the gateway's cost, measured honestly** (see ``gateway_load_parts/throughput.py``).
The fake model server, ``vigil gateway run``, a bare Starlette echo endpoint of the same web API
and the load drivers each run as a process of their own. At 1, 10 and 50 concurrent web
conversations (``--concurrency``), each sending its messages one after another on its open event
stream, it prints for the gateway and for the echo endpoint in the same run: messages/s, latency
p50/p99 (POST sent -> ``turn_ended``), and CPU per message read from each server process's own
``/proc/PID/stat``, with the ratio gateway / echo. Issue 26's target: gateway CPU <= 8 ms a message
at 50 conversations.

    .venv/bin/python bench/gateway_load.py [--concurrency 1,10,50] [--per-level 600] [--drivers 1]
        [--profile FILE.pstats] [--py-spy FILE.txt]

**``--audit``: exactly once.** Starts the fake model and the fake Telegram Bot API in this
process and ``vigil gateway run`` as a child on a fresh profile with the durable SQLite store,
Telegram enabled (long polling against the fake), then:

1. **steady**: ``--conversations`` conversations (default 200; ``--telegram-share`` of them,
   default half, are Telegram private chats, the rest web conversations) each send
   ``--messages`` messages (default 10) one after another, all conversations at once;
2. **kill**: the same load again on a new profile, and in the middle the gateway is killed
   with SIGKILL and started again. Web clients post without waiting for answers, and retry a
   POST that failed with the same ``client_id`` until the new gateway takes it; Telegram users
   keep writing once answered, and the fake keeps their updates until the bot confirms them.

After each phase the store is read (every accepted message has exactly one final answer and at
most one reply in the outbox), and for Telegram also what the users saw: lost and duplicated
counts, target 0 and 0. Its clients and fakes share this process, which spends more CPU per
message than the gateway: its messages/s and latencies are the bench's own limits, not the
gateway's (the default mode measures those). ``--keep DIR`` keeps the profiles.

``--store postgresql://…``: the web-chat load (no Telegram, no kill) on ``--workers`` gateways
sharing that PostgreSQL store, once per worker count (default ``1,3``), each on a fresh schema
dropped afterwards; messages/s, latency p50/p99, each worker's CPU per message from its own
``/proc/PID/stat`` and the exactly-once audit of each, side by side; the fake model and the load
driver are processes of their own here too (see ``gateway_load_parts/workers.py``).

    .venv/bin/python bench/gateway_load.py --audit [--conversations 200] [--messages 10] [--telegram-share 0.5]
    .venv/bin/python bench/gateway_load.py --store postgresql://USER@HOST/DB [--workers 1,3] [--json]
        [--conversations 200] [--messages 10]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from gateway_load_parts import audit as store_audit  # noqa: E402
from gateway_load_parts import telegram as tg  # noqa: E402
from gateway_load_parts import throughput  # noqa: E402
from gateway_load_parts import workers  # noqa: E402
from gateway_load_parts.process import Gateway, TimedModel, free_port  # noqa: E402
from gateway_load_parts.report import report  # noqa: E402
from gateway_load_parts.web import PHASE_DEADLINE, ANSWER_WAIT, Phase, web_conversation  # noqa: E402

from vigil.testing.fake_model import FakeModelServer  # noqa: E402
from vigil.testing.telegram_api.server import FakeTelegramServer  # noqa: E402


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
        work = [asyncio.create_task(web_conversation(client, [gateway.url], messages, phase, not kill)) for _ in range(web)]
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
    parser.add_argument("--concurrency", default="1,10,50",
                        help="conversations at once, one run per number (default 1,10,50)")
    parser.add_argument("--per-level", type=int, default=600,
                        help="messages per concurrency level, shared by its conversations (default 600)")
    parser.add_argument("--drivers", type=int, default=1, help="load driver processes (default 1)")
    parser.add_argument("--py-spy", type=Path, metavar="FILE",
                        help="sample the gateway with py-spy (on PATH) at the last level, collapsed stacks into FILE")
    parser.add_argument("--audit", action="store_true",
                        help="the exactly-once check instead: web and Telegram, steady then across a SIGKILL")
    parser.add_argument("--conversations", type=int, default=200,
                        help="--audit/--store: conversations at once (default 200)")
    parser.add_argument("--messages", type=int, default=10,
                        help="--audit/--store: messages each conversation sends (default 10)")
    parser.add_argument("--telegram-share", type=float,
                        help="fraction of the conversations on Telegram, 0 to 1 (default 0.5; none with --store)")
    parser.add_argument("--profile", type=Path,
                        help="write a cProfile of the gateway here (default mode, or --audit's steady phase)")
    parser.add_argument("--steady-only", action="store_true", help="skip the SIGKILL phase")
    parser.add_argument("--keep", type=Path, help="keep the gateways' profiles (store, logs) in this new directory")
    parser.add_argument("--store", metavar="URL",
                        help="a postgresql:// URL: the web-chat load on --workers gateways sharing that store")
    parser.add_argument("--workers", help="with --store: worker counts to run side by side (default 1,3)")
    parser.add_argument("--json", action="store_true", help="with --store: a JSON summary on stdout, the text on stderr")
    args = parser.parse_args()
    if args.conversations < 1 or args.messages < 1:
        parser.error("--conversations and --messages must be at least 1")
    if not args.audit and args.store is None:
        if args.telegram_share is not None or args.steady_only:
            parser.error("--telegram-share and --steady-only go with --audit")
        try:
            levels = [int(n) for n in args.concurrency.split(",") if n.strip()]
        except ValueError:
            levels = []
        if not levels or min(levels) < 1 or args.per_level < 1 or args.drivers < 1:
            parser.error("--concurrency: positive numbers such as 1,10,50; --per-level and --drivers at least 1")
        if args.keep is not None and args.keep.exists():
            parser.error(f"--keep: {args.keep} exists; name a new directory")
        return throughput.bench(levels, args.per_level, args.drivers, args.profile, args.keep, args.py_spy)
    if args.store is None:
        if args.workers is not None or args.json:
            parser.error("--workers and --json go with --store")
        if args.telegram_share is None:
            args.telegram_share = 0.5
    else:
        if args.telegram_share or args.profile or args.steady_only:
            parser.error("--store runs the web-chat load only, once per worker count: "
                         "drop --telegram-share, --profile and --steady-only")
        if args.keep is not None and args.keep.exists():
            parser.error(f"--keep: {args.keep} exists; name a new directory")
        return workers.bench(args.store, args.workers or "1,3", args.conversations, args.messages, args.keep, args.json)
    if not 0 <= args.telegram_share <= 1:
        parser.error("--telegram-share must be between 0 and 1")
    on_telegram = round(args.conversations * args.telegram_share)
    on_web = args.conversations - on_telegram
    print(f"workload: {args.conversations} concurrent conversations ({on_web} web, {on_telegram} Telegram) "
          f"x {args.messages} messages, fake model answering at once, durable SQLite store, "
          f"{1 if args.steady_only else 2} phase(s); load average {Path('/proc/loadavg').read_text().split(' ', 3)[:3]}")
    print("(an exactly-once check: the clients and fakes share this process, so messages/s and latencies "
          "below are the bench's limits, not the gateway's; the default mode measures those)")
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
