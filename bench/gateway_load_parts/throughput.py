"""The default mode of ``gateway_load.py``: the gateway's CPU per message, throughput and latency
at several numbers of concurrent web conversations, next to a bare Starlette echo endpoint
driven the same way in the same run.

Every party is its own process, so that the measured one's figures are its own:

* the fake model server (``python -m vigil.testing``, answering every call at once with "ok");
* ``vigil gateway run`` on a fresh profile (default prompt and tools, durable SQLite store);
* the echo endpoint (``echo.py``): the same web API shape served by the same uvicorn options,
  with no store, model or agent behind it;
* the load drivers (``driver.py``), one or more processes, each with its share of the
  conversations.

Per concurrency level and server: the drivers make their conversations, open their event
streams and send one warm-up message each; then, on a signal, every conversation sends its
messages one after another (the next once the last one's ``turn_ended`` arrived). CPU is read
from ``/proc/PID/stat`` of each process at the signal and again once the server has gone quiet
after the last answer (its own kernel accounting, all threads): CPU per message is that
difference over the messages answered. Throughput: messages answered over the time from the
signal to the last answer. Latency: POST sent -> ``turn_ended`` seen, fake model included.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gateway_load_parts.process import Gateway, ModelProcess, cpu_seconds, free_port
from gateway_load_parts.report import pct
from gateway_load_parts.spy import sampler, summary as spy_summary

HERE = Path(__file__).resolve().parent
TARGET_MS = 8.0
"""Issue 26: gateway CPU per message at 50 concurrent conversations."""


@dataclass
class Run:
    """One server at one concurrency level."""

    server: str
    conversations: int
    messages: int
    latencies: list[float] = field(default_factory=list)
    seconds: float = float("nan")
    server_cpu: float = float("nan")
    model_cpu: float = 0.0
    driver_cpu: float = 0.0
    timeouts: int = 0
    retries: int = 0

    @property
    def answered(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.answered / self.seconds if self.seconds > 0 else float("nan")

    def per_message_ms(self, cpu: float) -> float:
        return cpu / self.answered * 1000 if self.answered else float("nan")


class Echo:
    """The echo endpoint's process."""

    def __init__(self, token: str) -> None:
        self.process = subprocess.Popen([sys.executable, str(HERE / "echo.py")], stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, "VIGIL_BENCH_TOKEN": token})
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("port "):
            raise SystemExit(f"the echo endpoint did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        time.sleep(0.3)  # uvicorn starts serving just after the socket is handed over

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def quiet(pid: int, longest: float = 5.0) -> None:
    """Until ``pid`` used less than one clock tick in 0.3 s (its work after the last answer:
    delivery, store writes), for at most ``longest`` seconds."""
    deadline = time.monotonic() + longest
    before = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = cpu_seconds(pid)
        if now - before < 0.011:
            return
        before = now


def idle_rate(pid: int, seconds: float) -> float:
    """CPU seconds a second ``pid`` spends with no load, over ``seconds``."""
    quiet(pid, 5.0)
    before, started = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - started)


def drive(server: str, url: str, token: str, server_pid: int, model_pid: int | None, conversations: int,
          messages: int, drivers: int, spy_to: Path | None = None) -> Run:
    """One measured run of ``drivers`` driver processes against the server at ``url``."""
    share = [conversations // drivers + (1 if n < conversations % drivers else 0) for n in range(drivers)]
    procs = [subprocess.Popen(
        [sys.executable, str(HERE / "driver.py"), "--base", url, "--conversations", str(n), "--messages", str(messages)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "VIGIL_BENCH_TOKEN": token},
    ) for n in share if n]
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"a load driver failed against the {server}")
    run = Run(server, conversations, messages * conversations)
    quiet(server_pid, 2.0)  # the warm-up's tail is not counted
    cpu0 = cpu_seconds(server_pid)
    model0 = cpu_seconds(model_pid) if model_pid else 0.0
    drivers0 = [cpu_seconds(p.pid) for p in procs]
    spy = sampler(server_pid, spy_to) if spy_to is not None else None
    go = time.monotonic()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        drivers0[procs.index(proc)] = cpu_seconds(proc.pid) - drivers0[procs.index(proc)]
        if not line:
            raise SystemExit(f"a load driver ended without figures against the {server}")
        results.append(json.loads(line))
    last = max(r["ended"] for r in results)
    quiet(server_pid)
    run.server_cpu = cpu_seconds(server_pid) - cpu0
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(30)
    run.model_cpu = (cpu_seconds(model_pid) - model0) if model_pid else 0.0
    run.driver_cpu = sum(drivers0)
    for proc in procs:
        proc.wait(30)
    run.seconds = last - go
    for r in results:
        run.latencies += r["latencies"]
        run.timeouts += r["timeouts"]
        run.retries += r["retries"]
    return run


def bench(levels: list[int], total: int, drivers: int, profile_to: Path | None, keep: Path | None,
          spy_to: Path | None = None) -> int:
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"workload: web conversations at once {levels}, each sending its messages one after another "
          f"(about {total} messages per level, one warm-up message per conversation not counted); "
          f"the gateway (fresh profile: default prompt and tools, durable SQLite store) and, in the same run, "
          f"a bare Starlette echo endpoint of the same API under the same uvicorn options; "
          f"fake model, gateway, echo endpoint and {drivers} load driver process(es) each a process of their own; "
          f"{os.cpu_count()} CPUs; load average {load}")
    if profile_to is not None:
        print(f"(the gateway runs under cProfile, written to {profile_to}: its CPU figures are inflated)")
    if spy_to is not None:
        print(f"(py-spy samples the gateway at the last level into {spy_to}, taking CPU from the same cores)")
    runs: list[tuple[Run, Run]] = []
    model = ModelProcess()
    with tempfile.TemporaryDirectory(prefix="vigil-gateway-load-") as scratch:
        home = keep or Path(scratch) / "gateway"
        home.mkdir(parents=True)
        gateway = Gateway(home, free_port(), model, None, [], profile_to=profile_to)
        echo: Echo | None = None
        try:
            gateway.start()
            assert gateway.process is not None
            token = gateway.token
            echo = Echo(token)
            idle = idle_rate(gateway.process.pid, 5.0)
            print(f"gateway idle (no load, before the first level): {idle * 1000:.1f} ms of CPU a second")
            for conversations in levels:
                messages = max(1, round(total / conversations))
                pair = (
                    drive("gateway", gateway.url, token, gateway.process.pid, model.pid, conversations, messages, drivers,
                          spy_to if conversations == levels[-1] else None),
                    drive("echo endpoint", echo.url, token, echo.pid, None, conversations, messages, drivers),
                )
                runs.append(pair)
                describe(*pair)
        finally:
            if echo is not None:
                echo.stop()
            gateway.stop()
            model.stop()
    summary(runs)
    if spy_to is not None:
        spy_summary(spy_to)
    print(f"load average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0 if all(g.timeouts == 0 and e.timeouts == 0 for g, e in runs) else 1


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def describe(gateway: Run, echo: Run) -> None:
    print(f"\n{gateway.conversations} conversation(s) x {gateway.messages // gateway.conversations} messages:")
    for run in (gateway, echo):
        extra = f", fake model {run.per_message_ms(run.model_cpu):.1f} ms" if run.server == "gateway" else ""
        print(f"  {run.server:<13} {run.answered:>5} answered in {run.seconds:5.1f} s = {run.rate:6.1f} msg/s; "
              f"latency p50 {ms(pct(run.latencies, 0.5))}, p99 {ms(pct(run.latencies, 0.99))}, "
              f"mean {ms(statistics.mean(run.latencies)) if run.latencies else '-'}; "
              f"CPU a message: server {run.per_message_ms(run.server_cpu):.2f} ms (its own /proc accounting), "
              f"drivers {run.per_message_ms(run.driver_cpu):.1f} ms{extra}"
              + (f"; {run.timeouts} unanswered" if run.timeouts else "")
              + (f"; {run.retries} client retries" if run.retries else ""))


def summary(runs: list[tuple[Run, Run]]) -> None:
    print("\nside by side (gateway / echo endpoint, same drivers, same run):")
    print(f"  {'conversations':>13} {'gateway CPU/msg':>16} {'echo CPU/msg':>13} {'ratio':>7} "
          f"{'gateway msg/s':>14} {'echo msg/s':>11} {'gateway p50/p99':>20} {'echo p50/p99':>18}")
    for g, e in runs:
        gc, ec = g.per_message_ms(g.server_cpu), e.per_message_ms(e.server_cpu)
        print(f"  {g.conversations:>13} {gc:>13.2f} ms {ec:>10.2f} ms {gc / ec if ec else float('nan'):>6.1f}x "
              f"{g.rate:>14.1f} {e.rate:>11.1f} "
              f"{pct(g.latencies, 0.5) * 1000:>8.1f}/{pct(g.latencies, 0.99) * 1000:.1f} ms "
              f"{pct(e.latencies, 0.5) * 1000:>7.1f}/{pct(e.latencies, 0.99) * 1000:.1f} ms")
    at50 = [g for g, _ in runs if g.conversations == 50]
    if at50:
        value = at50[0].per_message_ms(at50[0].server_cpu)
        state = "met" if value <= TARGET_MS else "not met"
        print(f"target (issue 26): gateway CPU <= {TARGET_MS:g} ms a message at 50 conversations: "
              f"{value:.2f} ms ({state})")
