"""The processes ``gateway_load.py`` runs: ``vigil gateway run`` as a child on a fresh profile
(Telegram enabled against the fake Bot API when there is one), and the fake model timed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gateway_load_parts import telegram as tg
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.telegram_api.server import FakeTelegramServer


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (all its threads, and the children it waited for),
    from the kernel's own accounting in ``/proc/PID/stat``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3; utime, stime, cutime, cstime are fields 14-17.
    return sum(int(fields[n - 3]) for n in (14, 15, 16, 17)) / CLOCK_TICKS


class ModelProcess:
    """The fake model server (``python -m vigil.testing``) as a process of its own, answering
    every request at once with ``reply``; ``base_url`` and ``api_key`` as FakeModelServer has them."""

    def __init__(self, reply: str = "ok") -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vigil.testing", "--port", "0", "--reply", reply],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.api_key = ""
        for line in self.process.stdout:
            if line.startswith("OpenAI base URL:"):
                self.base_url = line.split(":", 1)[1].strip()
            elif line.startswith("API key:"):
                self.api_key = line.split()[2]
            if line.startswith("Serving"):
                break
        if not self.base_url:
            raise SystemExit(f"the fake model did not start: {self.process.stdout.read()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TimedModel:
    """The fake model's ASGI app, timing each model call (request in -> last byte out)."""

    def __init__(self, fake: FakeModelServer) -> None:
        self.inner = fake._app  # the bench measures the server it starts: no public hook for this
        self.durations: list[float] = []
        fake._app = self  # type: ignore[assignment]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        await self.inner(scope, receive, send)
        if scope.get("type") == "http" and scope.get("method") == "POST":
            self.durations.append(time.perf_counter() - started)


@dataclass
class Gateway:
    home: Path
    port: int
    fake: FakeModelServer | ModelProcess
    telegram: FakeTelegramServer | None
    allow: list[int]
    process: subprocess.Popen[bytes] | None = None
    profile_to: Path | None = None
    log: str = "gateway.out"
    """The file in ``home`` its output goes to (several workers share one home)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {
            **os.environ, "VIGIL_HOME": str(self.home), "OPENAI_BASE_URL": self.fake.base_url,
            "OPENAI_API_KEY": self.fake.api_key, "VIGIL_MODEL": "fake-model",
        }
        if self.telegram is not None:
            (self.home / "config.yaml").write_text(tg.config(self.telegram, self.allow))
            env["TELEGRAM_BOT_TOKEN"] = self.telegram.token
        log = open(self.home / self.log, "ab")
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
                raise SystemExit(f"the gateway exited at start-up: {(self.home / self.log).read_text()[-2000:]}")
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
                self.process.wait()

    @property
    def token(self) -> str:
        return (self.home / "gateway.token").read_text().strip()
