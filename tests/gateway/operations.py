"""What the operations tests share: the gateway fixture and small clients of its CLI, log and
web API (see ``test_operations`` and ``test_restart_defects``)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.process import GatewayProcess, history, new_conversation, send, wait_for
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply


@pytest.fixture
def gateway(fake_model: FakeModelServer, vigil_home: Path):
    process = GatewayProcess(vigil_home, fake_model, env={"VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "1"})
    yield process
    if process.process is not None and process.process.poll() is None:
        process.stop(signal.SIGKILL)


def vigil(gateway: GatewayProcess, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a ``vigil`` command against the gateway's profile."""
    return subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", *args], env=gateway.environment(),
        capture_output=True, text=True, timeout=timeout,
    )


def configure(gateway: GatewayProcess, key: str, value: str) -> None:
    done = vigil(gateway, "config", "set", key, value)
    assert done.returncode == 0, done.stdout + done.stderr


def answers(client: httpx.Client, session_id: str) -> list[str]:
    return [m["content"] for m in history(client, session_id)["messages"]
            if m["role"] == "assistant" and not m["tool_calls"]]


def users(client: httpx.Client, session_id: str) -> list[str]:
    return [m["content"] for m in history(client, session_id)["messages"] if m["role"] == "user"]


def log_text(gateway: GatewayProcess) -> str:
    path = gateway.home / "logs" / "gateway.log"
    return path.read_text() if path.exists() else ""


def output(gateway: GatewayProcess) -> str:
    return "".join(gateway.output)


def interrupted_then_restarted(gateway: GatewayProcess, fake_model: FakeModelServer) -> tuple[str, list[dict[str, Any]]]:
    """A turn cut off by SIGTERM's bound, then the gateway started again: the session id and
    its history once the message is answered."""
    configure(gateway, "gateway.stop_timeout", "0.5")
    fake_model.queue(Reply.text(["slow "] * 40, chunk_delay=0.5))
    gateway.start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "answer me")
        fake_model.wait_for_requests(1, timeout=20)
        assert gateway.stop(signal.SIGTERM) == 0
    said = output(gateway)
    assert "waiting up to 0.5 s for 1 running turn(s)" in said
    assert "stopped (0 message(s) answered" in said

    fake_model.queue("the one answer")
    gateway.start()
    with gateway.client() as client:
        wait_for(lambda: "the one answer" in answers(client, session_id), what="the answer after restart")
        wait_for(gateway.settled, what="nothing left to answer")  # so no further answer can come
        messages = history(client, session_id)["messages"]
    assert gateway.stop() == 0
    return session_id, messages
