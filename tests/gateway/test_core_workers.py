"""Two gateway workers in one process, each with its own store object on one PostgreSQL schema:
a conversation runs in one worker at a time, and a message that lands on the other is
answered by the one that runs it, once. (Whole processes and SIGKILL: test_failover.py.)"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest

from tests.gateway.conftest import RecordingAdapter, _no_sleep, eventually
from tests.store.conftest import pg_schema, pg_url, postgres_server, terminate_listeners  # noqa: F401 (fixtures)
from vigil.config.settings import ModelSettings, Settings
from vigil.gateway.adapters.base import Inbound
from vigil.gateway.core import Gateway
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.profiles import Profile
from vigil.store.gateway.gateway_tables import ANSWERED, RouteKey
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = pytest.mark.postgres

CHAT = RouteKey("chat", "c1")


@dataclass
class Worker:
    gateway: Gateway
    adapter: RecordingAdapter
    store: Any


@pytest.fixture
async def workers(fake_model: FakeModelServer, pg_url: str, tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Worker]]]:
    from vigil.store.postgres import PostgresStore

    built: list[Worker] = []
    profile = Profile("default", tmp_path / "home").ensure()

    async def start(**gateway_settings: Any) -> Worker:
        model = ModelSettings.from_data({
            "provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
            "api_key": fake_model.api_key, "timeout": 10,
        })
        settings = Settings().copy_with(update={"model": model})
        settings = settings.copy_with(update={"gateway": settings.gateway.copy_with(update=gateway_settings)})
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        store = PostgresStore(pg_url)
        adapter = RecordingAdapter()
        gateway = Gateway(store=store, profile=profile, settings=settings, client=client, adapters={adapter.name: adapter})
        gateway.authorization.exempt = frozenset({adapter.name})
        worker = Worker(gateway, adapter, store)
        built.append(worker)
        await gateway.start()
        return worker

    yield start
    for worker in built:
        if worker.gateway.accepting:
            await worker.gateway.stop(1.0)
        await worker.gateway.client.aclose()
        worker.store.close()


def _history(store: Any, session_id: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in store.get_messages(session_id) if m.role in ("user", "assistant")]


async def test_a_message_landing_on_another_worker_is_answered_by_the_one_running_the_conversation(
    workers: Callable[..., Awaitable[Worker]], fake_model: FakeModelServer,
) -> None:
    a, b = await workers(lease_seconds=3), await workers(lease_seconds=3)
    fake_model.queue("answer one", "answer two", "answer three")
    first = await a.gateway.receive(Inbound(CHAT, "m1", "one"))
    await eventually(lambda: a.store.gateway.inbox_counts()[ANSWERED] == 1, what="the first answer")
    session_id = first.session_id
    assert session_id in a.gateway.live and session_id in a.gateway.ownership.held

    second = await b.gateway.receive(Inbound(CHAT, "m2", "two"))
    third = await b.gateway.receive(Inbound(CHAT, "m3", "three"))
    assert second.session_id == third.session_id == session_id  # routed, stored, left to A
    await eventually(lambda: a.store.gateway.inbox_counts()[ANSWERED] == 3, what="A answering what B stored")

    assert session_id not in b.gateway.live  # B never ran the conversation
    assert [r.last_user_text for r in fake_model.requests] == ["one", "two", "three"]
    assert _history(a.store, session_id) == [
        ("user", "one"), ("assistant", "answer one"), ("user", "two"), ("assistant", "answer two"),
        ("user", "three"), ("assistant", "answer three"),
    ]


async def test_a_stopped_worker_lets_the_other_take_its_conversation_at_once(
    workers: Callable[..., Awaitable[Worker]], fake_model: FakeModelServer,
) -> None:
    a, b = await workers(lease_seconds=3), await workers(lease_seconds=3)
    fake_model.queue("before", "after")
    first = await a.gateway.receive(Inbound(CHAT, "m1", "one"))
    await eventually(lambda: a.store.gateway.inbox_counts()[ANSWERED] == 1, what="the first answer")
    await a.gateway.stop(1.0)  # releases its leases

    again = await b.gateway.receive(Inbound(CHAT, "m2", "two"))
    assert again.session_id == first.session_id
    await eventually(lambda: b.store.gateway.inbox_counts()[ANSWERED] == 2, what="B answering")
    assert first.session_id in b.gateway.live
    assert _history(b.store, first.session_id)[-1] == ("assistant", "after")


async def test_concurrent_messages_on_two_workers_run_one_turn_at_a_time(
    workers: Callable[..., Awaitable[Worker]], fake_model: FakeModelServer,
) -> None:
    import asyncio

    a, b = await workers(lease_seconds=3), await workers(lease_seconds=3)
    fake_model.rule(contains="q", reply=Reply.text("ok", chunk_delay=0.01))
    chats = [RouteKey("chat", f"c{n}") for n in range(6)]
    sends = []
    for n in range(4):
        for chat in chats:
            worker = a if (n + int(chat.chat[1:])) % 2 else b
            sends.append(worker.gateway.receive(Inbound(chat, f"{chat.chat}-{n}", f"q{n}")))
    await asyncio.gather(*sends)
    await eventually(lambda: a.store.gateway.inbox_counts()[ANSWERED] == 24, timeout=30, what="every answer")
    for chat in chats:
        session_id = a.store.gateway.route_get(chat)
        history = _history(a.store, session_id)
        # Sent at once to two workers, they are answered in the order they reach the owner.
        assert sorted(text for role, text in history if role == "user") == ["q0", "q1", "q2", "q3"]
        assert [role for role, _ in history] == ["user", "assistant"] * 4  # one turn at a time
        assert (session_id in a.gateway.live) != (session_id in b.gateway.live)
    assert len(fake_model.requests) == 24


async def test_a_watcher_on_one_worker_sees_the_turn_another_worker_runs_stream(
    workers: Callable[..., Awaitable[Worker]], fake_model: FakeModelServer,
) -> None:
    import asyncio

    a, b = await workers(lease_seconds=3), await workers(lease_seconds=3)
    fake_model.queue("first", Reply.text("streamed in many small pieces", chunk_delay=0.02))
    first = await a.gateway.receive(Inbound(CHAT, "m1", "one"))
    await eventually(lambda: a.store.gateway.inbox_counts()[ANSWERED] == 1, what="the first answer")
    watch = b.gateway.subscribe(first.session_id)  # a page served by B
    await b.gateway.receive(Inbound(CHAT, "m2", "two"))  # lands on B, runs on A

    # The first turn's last events may still be on their way to B (the relay is asynchronous
    # and the answer was marked first): the second turn's begin with its message accepted.
    seen: list[dict[str, Any]] = []
    while not any(item["type"] == "turn_ended" for item in seen):
        item = await asyncio.wait_for(watch.next(), 15)
        assert item is not None
        if seen or item["type"] == "message_accepted":
            seen.append(item)
    assert first.session_id not in b.gateway.live  # the turn ran on A
    deltas = "".join(item.get("text") or "" for item in seen if item["type"] == "delta")
    assert deltas == "streamed in many small pieces" and len([i for i in seen if i["type"] == "delta"]) > 1, \
        [(item["type"], item.get("text")) for item in seen]
    assert [i["type"] for i in seen].index("message_accepted") < [i["type"] for i in seen].index("turn_began")
    accepted = next(item for item in seen if item["type"] == "message_accepted")
    assert accepted["client_id"] == "m2"  # the page on B marks its own bubble accepted
    watch.close()


async def test_pages_reload_after_the_workers_lost_their_listening_connection(
    workers: Callable[..., Awaitable[Worker]], fake_model: FakeModelServer, postgres_server: str, pg_schema: str,
) -> None:
    import asyncio

    a, b = await workers(lease_seconds=3), await workers(lease_seconds=3)
    first = await a.gateway.receive(Inbound(CHAT, "m1", "one"))
    await eventually(lambda: a.store.gateway.inbox_counts()[ANSWERED] == 1, what="the first answer")
    watch = b.gateway.subscribe(first.session_id)
    killed = terminate_listeners(postgres_server, f'LISTEN "{pg_schema}.%')
    assert killed and all(killed)
    # Whatever was shared while it was cut off is lost: the page is told to reload its history.
    item = await asyncio.wait_for(watch.next(), 15)
    assert item == {"type": "stale", "session_id": first.session_id}
    # ... and live events flow again afterwards.
    await b.gateway.receive(Inbound(CHAT, "m2", "two"))
    seen = [await asyncio.wait_for(watch.next(), 15) for _ in range(3)]
    assert "message_accepted" in [event["type"] for event in seen]
    watch.close()
