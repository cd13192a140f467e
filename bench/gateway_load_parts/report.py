"""The printed figures of ``gateway_load.py``: per phase, for web, Telegram and both,
throughput, added latency (minus the fake model's mean time per call), and lost and duplicated
counts (from the store, and for Telegram also from what the users saw), then CPU."""

from __future__ import annotations

import statistics
from typing import Any

from gateway_load_parts.audit import KEYS

EMPTY = dict.fromkeys(KEYS, 0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def latency(values: list[float], model: float) -> str:
    if not values:
        return "no latencies"
    ms = [(x - model) * 1000 for x in values]
    return (f"added latency p50 {pct(ms, 0.5):.1f} ms, p99 {pct(ms, 0.99):.1f} ms, max {max(ms):.1f} ms, "
            f"mean {statistics.mean(ms):.1f} ms")


def losses(store: dict[str, int], users: dict[str, int] | None) -> tuple[int, int]:
    """(lost, duplicated): the worse of what the store and the users saw."""
    lost = store["lost"]
    duplicated = max(store["duplicated answers"], store["duplicated replies"])
    if users is not None:
        never_stored = max(0, users["written"] - store["accepted"])
        lost = max(lost + never_stored, users["lost"])
        duplicated = max(duplicated, users["duplicated"])
    return lost, duplicated


def report(name: str, phase: Any, counts: dict[str, dict[str, int]], users: dict[str, Any] | None,
           model_times: list[float], gateway_cpu: float, bench_cpu: float, *, killed: bool, gateways: int | None = None) -> None:
    """Print one phase's figures; ``killed``: the gateway was killed in it (no per-side
    throughput then, and latencies include the restart); ``gateways``: how many gateway
    processes shared a store to run it (their CPU together; ``None``: one, with the fake Telegram)."""
    seconds = phase.ended - phase.started
    model = statistics.mean(model_times) if model_times else 0.0
    web, telegram = counts.get("web", EMPTY), counts.get("telegram", EMPTY)
    total = {key: web[key] + telegram[key] for key in KEYS}
    steady = not killed
    restart = " (includes the restart)" if killed else ""
    print(f"{name}: {total['accepted']} messages in {seconds:.1f} s = {total['accepted'] / seconds:.0f} messages/s "
          f"(fake model: {len(model_times)} calls, mean {model * 1000:.1f} ms, subtracted from latencies)")
    lost_web, dup_web = losses(web, None)
    lost_tg, dup_tg = losses(telegram, users) if users is not None else (0, 0)
    sides = [("web", web, phase.latencies, phase.web_ended, lost_web, dup_web)]
    if users is not None:
        sides.append(("telegram", telegram, phase.telegram.latencies, phase.telegram.ended, lost_tg, dup_tg))
    for side, store, values, ended, lost, duplicated in sides:
        if not store["accepted"] and not (side == "telegram" and users and users["written"]):
            continue
        line = f"  {side:8}: {store['accepted']} messages"
        if steady and ended > phase.started:
            line += f", {store['accepted'] / (ended - phase.started):.0f} messages/s"
        print(line + f"; LOST {lost}, DUPLICATED {duplicated}")
        if values:
            print(f"            {latency(values, model)}{restart}")
        print(f"            store: answered {store['answered']}, lost {store['lost']}, duplicated answers "
              f"{store['duplicated answers']}, duplicated replies {store['duplicated replies']}, "
              f"undelivered replies {store['undelivered']}")
        if side == "telegram" and users is not None:
            print(f"            users saw: wrote {users['written']}, answers missing {users['lost']}, "
                  f"answers doubled {users['duplicated']}, other bot messages {users['other']}, "
                  f"waits over the limit {phase.telegram.timeouts}")
            print(f"            Bot API calls: {users['calls']}")
            if phase.doubles is not None:
                print(f"            answers shown before the kill and again by the restarted gateway: {phase.doubles}")
        if side == "web":
            print(f"            client retries {phase.retries}, waits over the limit {phase.timeouts}")
    line = f"  together: {total['accepted']} messages, {total['accepted'] / seconds:.0f} messages/s"
    print(line + f"; LOST {lost_web + lost_tg}, DUPLICATED {dup_web + dup_tg}")
    if phase.latencies or phase.telegram.latencies:
        print(f"            {latency(phase.latencies + phase.telegram.latencies, model)}{restart}")
    per = gateway_cpu / total["accepted"] * 1000 if total["accepted"] else float("nan")
    who = "gateway process" if gateways in (None, 1) else f"{gateways} gateway processes"
    print(f"  CPU: {who} {gateway_cpu:.1f} s ({per:.1f} ms a message, start-up included), "
          f"this process (clients + fake model{' + fake Telegram' if gateways is None else ''}) {bench_cpu:.1f} s")
