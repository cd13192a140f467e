"""Chaos: the real gateway SIGKILLed and restarted again and again while conversations stream
long answers. Every message is answered exactly once: one complete answer each, stored once,
replied once, none failed or set aside — a death is an interruption, not a failed attempt.

Each kill comes at a random moment after the restarted gateway is up, whatever it is doing
(the answers that are streaming are cut off; when nothing got answered in between, the messages
that were running are held back until the process stays up for a while, so a crash loop is no
evidence against them).

The suite runs a smaller chaos (:data:`SUITE`: 2 kills, answers of about 1 s) to keep its time
budget; the full size of the acceptance test (8 conversations × 3 messages, 8 kills within
about 30 s, answers of about 2.4 s, the default hold of suspects) runs with
``VIGIL_DELIVERY_FULL=1``.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.gateway.process import GatewayProcess, new_conversation, send, wait_for
from tests.store.conftest import pg_schema, pg_url, postgres_server  # noqa: F401 (fixtures)
from vigil.store.gateway.gateway_tables import ANSWERED
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@dataclass(frozen=True)
class Size:
    conversations: int
    messages: int
    kills: int
    chunks: int
    """Stream deltas of each answer, :data:`CHUNK_DELAY` apart."""
    up: tuple[float, float]
    """Seconds the gateway runs between being up and the next kill (a uniform pick)."""
    gateway: dict[str, Any]
    """Settings of the ``gateway`` section."""


CHUNK_DELAY = 0.2
FULL = Size(conversations=8, messages=3, kills=8, chunks=12, up=(0.5, 3.0), gateway={})
SUITE = Size(conversations=8, messages=3, kills=2, chunks=5, up=(0.3, 1.0), gateway={"retry_max_delay": 2})
SIZE = FULL if os.environ.get("VIGIL_DELIVERY_FULL") else SUITE


def answer_to(question: str) -> list[str]:
    return [f"{question}:"] + [f" part{n}" for n in range(1, SIZE.chunks)]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, vigil_home: Path) -> Iterator[Callable[[], Any]]:
    """Writes the profile's config for the backend; yields how to open the store from the test."""
    vigil_home.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"gateway": dict(SIZE.gateway)}
    if request.param == "sqlite":
        from vigil.store import SQLiteStore

        (vigil_home / "config.yaml").write_text(json.dumps(config))
        yield lambda: SQLiteStore(vigil_home / "state.db")
        return
    url = request.getfixturevalue("pg_url")  # skips first when there is no server
    config = {"store": {"url": url}, "gateway": {**config["gateway"], "lease_seconds": 3.0, "stop_timeout": 5}}
    (vigil_home / "config.yaml").write_text(json.dumps(config))
    from vigil.store.postgres import PostgresStore

    yield lambda: PostgresStore(url)


def test_answers_stream_through_kill_after_kill_and_each_message_is_answered_once(
    vigil_home: Path, fake_model: FakeModelServer, backend: Callable[[], Any]
) -> None:
    questions = [[f"c{c}m{m}" for m in range(SIZE.messages)] for c in range(SIZE.conversations)]
    for row in questions:
        for question in row:
            fake_model.rule(contains=question, reply=Reply.text(answer_to(question), chunk_delay=CHUNK_DELAY))
    gateway = GatewayProcess(vigil_home, fake_model).start()
    store = backend()
    rng = random.Random(24)
    total = len(questions) * SIZE.messages
    try:
        with gateway.client() as client:
            sessions = [new_conversation(client) for _ in questions]
            for session_id, row in zip(sessions, questions):
                for question in row:
                    send(client, session_id, question)
        began = time.monotonic()
        cut = []
        for _ in range(SIZE.kills):
            time.sleep(rng.uniform(*SIZE.up))  # the chaos: a kill at a random moment
            cut.append(total - store.gateway.inbox_counts()[ANSWERED])
            gateway.kill()
            gateway.start()
        chaos = time.monotonic() - began
        wait_for(lambda: store.gateway.inbox_counts()[ANSWERED] == total, timeout=120, what="every message answered")
        print(f"chaos: {SIZE.kills} kills in {chaos:.1f} s (unanswered at each: {cut}), all {total} answered "
              f"{time.monotonic() - began - chaos:.1f} s after the last restart, {len(fake_model.requests)} model calls")
        assert gateway.stop() == 0
        assert any(left > 0 for left in cut[1:]), "the kills came after everything was answered"
        counts = store.gateway.inbox_counts()
        assert counts == {"pending": 0, "running": 0, "answered": total, "failed": 0, "set_aside": 0}, counts
        for session_id, row in zip(sessions, questions):
            final = final_answers(store, session_id)
            assert [user for user, _ in final] == row, final
            assert [answers for _, answers in final] == [["".join(answer_to(q))] for q in row], final
        per_entry: dict[int, int] = {}
        for reply in store.gateway.outbox_list(limit=10_000):
            assert reply.kind == "reply", reply
            per_entry[reply.inbox_id] = per_entry.get(reply.inbox_id, 0) + 1
        assert sorted(per_entry.values()) == [1] * total
    finally:
        store.close()


def final_answers(store: Any, session_id: str) -> list[tuple[str, list[str]]]:
    """Each user message of the conversation with the complete answers that follow it."""
    out: list[tuple[str, list[str]]] = []
    for session in store.conversation_sessions(session_id):
        for message in store.get_messages(session.id):
            if message.role == "user":
                out.append((message.content, []))
            elif message.role == "assistant" and out and not message.tool_calls and not message.meta.get("cut_off"):
                out[-1][1].append(message.content)
    return out
