"""The real ``vigil gateway run`` as a child process, and a client of its web API."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.gateway.settling import settled_at
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import wait_for  # noqa: F401 (for the tests that import it from here)


_STARTED: list[subprocess.Popen[str]] = []
"""Every gateway process a test started: killed after each test (``kill_leftovers``), so a
test that fails half-way cannot leave a gateway firing heartbeats into the next tests."""


def share_store(home: Path, url: str, *, lease: float) -> None:
    """Make ``home`` a profile whose gateways are workers sharing the PostgreSQL store at
    ``url``, with leases of ``lease`` seconds."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(json.dumps({
        "store": {"url": url}, "gateway": {"lease_seconds": lease, "stop_timeout": 5},
    }))


def kill_leftovers() -> None:
    while _STARTED:
        process = _STARTED.pop()
        if process.poll() is None:
            process.kill()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class GatewayProcess:
    home: Path
    fake: FakeModelServer
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)
    """What the gateway printed, read as it prints (a full pipe would stop a busy gateway)."""
    _reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settled(self) -> bool:
        """Whether the gateway has nothing left to do (:mod:`tests.gateway.settling`), read from
        its profile's SQLite store through a connection of the test's own."""
        return settled_at(self.home / "state.db")

    def environment(self) -> dict[str, str]:
        return {
            **os.environ, "VIGIL_HOME": str(self.home), "OPENAI_BASE_URL": self.fake.base_url,
            "OPENAI_API_KEY": self.fake.api_key, "VIGIL_MODEL": "fake-model", **self.env,
        }

    def start(self, timeout: float = 60) -> "GatewayProcess":
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vigil.cli.main", "gateway", "run", "--web-port", str(self.port)],
            env=self.environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        _STARTED.append(self.process)
        self._reader = threading.Thread(target=self._read, args=(self.process,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._collect()
                raise AssertionError(f"the gateway exited: {''.join(self.output)}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError("the gateway did not come up")

    def start_for_module(self, timeout: float = 60) -> "GatewayProcess":
        """:meth:`start` a gateway that a module-scoped fixture stops itself (it is not killed
        after each test, as the gateways the tests start are)."""
        self.start(timeout)
        assert self.process is not None
        _STARTED.remove(self.process)
        return self

    def stop_if_running(self, sig: int = signal.SIGTERM) -> None:
        """:meth:`stop` the process if one was started and still runs."""
        if self.process is not None and self.process.poll() is None:
            self.stop(sig)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._collect()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout)
        self._collect()
        return code

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.output.append(line)

    def _collect(self) -> None:
        """Wait until everything the (ended) process printed is in :attr:`output`."""
        if self._reader is not None:
            self._reader.join(10)

    @property
    def token(self) -> str:
        return (self.home / "gateway.token").read_text().strip()

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)


@contextmanager
def module_model(server: FakeModelServer) -> Iterator[FakeModelServer]:
    """The session's fake model for the gateway of a module-scoped fixture: running, its script,
    log and cache emptied before the module's rules are added and again when the module ends."""
    if not server.running:
        server.start()
    server.reset()
    try:
        yield server
    finally:
        server.reset()


def add_overdue_job(home: Path, name: str, prompt: str, deliver: str) -> None:
    """``vigil cron add`` on the profile at ``home`` of a one-shot job whose time passed 30 s ago
    (added on a clock a minute back, so ``cron add`` takes it): a gateway that starts there runs
    it at once, inside its 2-minute grace. ``deliver``'s platform must be configured there."""
    from tests.cli.helpers import run_cli

    now = time.time()
    at = datetime.fromtimestamp(now - 30, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VIGIL_HOME", str(home))
        env.setenv("VIGIL_CRON_NOW", str(now - 60))
        added = run_cli("cron", "add", name, "-s", at, "--prompt", prompt, "--deliver", deliver)
    assert added.exit_code == 0, added.output
    assert "not configured" not in added.output


def new_conversation(client: httpx.Client) -> str:
    response = client.post("/api/conversations")
    assert response.status_code == 201, response.text
    return response.json()["id"]


def send(client: httpx.Client, session_id: str, text: str, client_id: str | None = None) -> dict[str, Any]:
    response = client.post(
        f"/api/conversations/{session_id}/messages", json={"text": text, "client_id": client_id or uuid.uuid4().hex}
    )
    assert response.status_code == 202, response.text
    return response.json()


def events(client: httpx.Client, session_id: str, timeout: float = 30) -> Iterator[dict[str, Any]]:
    """The conversation's live events until ``timeout`` seconds pass."""
    with client.stream("GET", f"/api/conversations/{session_id}/events", timeout=timeout) as stream:
        deadline = time.monotonic() + timeout
        for line in stream.iter_lines():
            if line.startswith("data:"):
                yield json.loads(line[5:])
            if time.monotonic() > deadline:
                return


def history(client: httpx.Client, session_id: str) -> dict[str, Any]:
    response = client.get(f"/api/conversations/{session_id}")
    assert response.status_code == 200, response.text
    return response.json()
