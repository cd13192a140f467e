"""A real gateway on PostgreSQL whose store connections are cut again and again while several
conversations chat over the web API: every message is stored, answered once, and no request
fails (a database restart or a fail-over costs a delay, never a message)."""

from __future__ import annotations

import signal
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import httpx
import psycopg
import pytest

from tests.gateway.process import GatewayProcess, wait_for
from tests.store import conftest as pg_fixtures
from vigil.store.postgres import PostgresStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

postgres_server = pg_fixtures.postgres_server
pg_schema = pg_fixtures.pg_schema

CONVERSATIONS = 5
MESSAGES = 4
CUT_EVERY = 0.1
"""Seconds between two rounds of terminating every connection of the gateway's (often enough
that some are cut in the middle of a transaction or of its commit)."""
MIN_ROUNDS = 20


class Terminator:
    """Terminates every server connection whose ``application_name`` is ``app`` (the store's
    pool and its listener), every ``every`` seconds, from a connection of its own."""

    def __init__(self, server_url: str, app: str, every: float) -> None:
        self.server_url, self.app, self.every = server_url, app, every
        self.rounds = 0
        self.terminated = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Terminator":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as admin:
            while not self._stop.wait(self.every):
                row = admin.execute(
                    "SELECT COUNT(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = %s",
                    (self.app,),
                ).fetchone()
                self.rounds += 1
                self.terminated += row[0] if row else 0


@pytest.fixture
def gateway(fake_model: FakeModelServer, vigil_home: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(vigil_home, fake_model)
    yield process
    if process.process is not None and process.process.poll() is None:
        process.stop(signal.SIGKILL)


def _key(conversation: int, message: int) -> str:
    return f"c{conversation}m{message}"


def _chat(client: httpx.Client, conversation: int, statuses: Counter[int]) -> str:
    """Open a conversation and send its messages one after the other (not waiting for
    answers); every response's status is counted."""
    created = client.post("/api/conversations")
    statuses[created.status_code] += 1
    assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    for message in range(MESSAGES):
        key = _key(conversation, message)
        for _ in range(3):  # a client sends again what got no answer at all (same client_id)
            try:
                sent = client.post(
                    f"/api/conversations/{session_id}/messages", json={"text": f"say {key}", "client_id": key}
                )
            except httpx.TransportError:
                continue
            break
        statuses[sent.status_code] += 1
    return session_id


def _turns(client: httpx.Client, session_id: str, statuses: Counter[int]) -> list[tuple[str, str]]:
    shown = client.get(f"/api/conversations/{session_id}")
    statuses[shown.status_code] += 1
    if shown.status_code != 200:
        return []
    return [(m["role"], m["content"]) for m in shown.json()["messages"] if m["role"] in ("user", "assistant")]


def _answered(turns: list[tuple[str, str]]) -> bool:
    return sum(role == "assistant" for role, _ in turns) >= MESSAGES


def test_cut_connections_cost_no_message_and_no_failed_request(
    postgres_server: str, pg_schema: str, gateway: GatewayProcess, fake_model: FakeModelServer, vigil_home: Path
) -> None:
    app = f"vigil_outage_{uuid.uuid4().hex[:8]}"
    url = f"{pg_fixtures.with_schema(postgres_server, pg_schema)}&application_name={app}"
    vigil_home.mkdir(parents=True, exist_ok=True)
    (vigil_home / "config.yaml").write_text(f"store:\n  url: '{url}'\n")
    for conversation in range(CONVERSATIONS):
        for message in range(MESSAGES):
            key = _key(conversation, message)
            fake_model.rule(reply=Reply.text(["answer ", key], chunk_delay=0.05), contains=key)
    gateway.start()
    statuses: Counter[int] = Counter()
    with gateway.client() as client, Terminator(postgres_server, app, CUT_EVERY) as cutter:
        with ThreadPoolExecutor(CONVERSATIONS) as pool:
            sessions = list(pool.map(lambda c: _chat(client, c, statuses), range(CONVERSATIONS)))
        wait_for(
            lambda: cutter.rounds >= MIN_ROUNDS
            and all(_answered(_turns(client, s, statuses)) for s in sessions),
            timeout=90, what="every message answered while connections are cut",
        )
    print(f"{cutter.terminated} connections terminated in {cutter.rounds} rounds")
    with gateway.client() as client:
        histories = [_turns(client, s, statuses) for s in sessions]
    store = PostgresStore(pg_fixtures.with_schema(postgres_server, pg_schema))
    try:
        counts = store.gateway.inbox_counts()
    finally:
        store.close()
    assert cutter.terminated >= MIN_ROUNDS
    assert set(statuses) <= {200, 201, 202}, statuses
    assert counts.get("failed", 0) == 0 and counts.get("answered") == CONVERSATIONS * MESSAGES, counts
    for conversation, turns in enumerate(histories):
        keys = [_key(conversation, m) for m in range(MESSAGES)]
        assert [text for role, text in turns if role == "user"] == [f"say {k}" for k in keys]
        assert sorted(text for role, text in turns if role == "assistant") == sorted(f"answer {k}" for k in keys)
    assert gateway.stop() == 0
    assert "Traceback" not in "".join(gateway.output), "".join(gateway.output)
