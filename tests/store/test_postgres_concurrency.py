"""Several threads and processes writing to one PostgreSQL store at once."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import pytest

from vigil.store import NewMessage, SessionStore

pytestmark = pytest.mark.postgres

pytest.importorskip("psycopg")

from vigil.store.postgres import PostgresStore  # noqa: E402

DEADLINE = 60.0  # only a guard against a hang; nothing here is timed


def append_many(url: str, session_id: str, worker: str, count: int, start: Any, results: Any) -> None:
    """A process body: append ``count`` messages, one transaction each; report every error."""
    errors: list[str] = []
    try:
        store = PostgresStore(url)
        try:
            start.wait(DEADLINE)  # every writer has its store open: they start together
            for i in range(count):
                try:
                    store.append_message(session_id, NewMessage(role="user", content=f"{worker}:{i}"))
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"append {i}: {exc!r}")
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001
        errors.append(f"open: {exc!r}")
    results.put((worker, errors))


def assert_interleaved_in_order(store: SessionStore, session_id: str, workers: list[str], each: int) -> None:
    messages = store.get_messages(session_id)
    assert [m.seq for m in messages] == list(range(1, len(workers) * each + 1))
    for w in workers:  # every writer's messages kept their order
        assert [m.content for m in messages if (m.content or "").startswith(f"{w}:")] == [
            f"{w}:{i}" for i in range(each)
        ]
    assert store.get_session(session_id).message_count == len(workers) * each


def test_threads_append_to_one_session(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    session = store.create_session(source="cli")
    other = store.create_session(source="cli")
    workers, each = [f"t{i}" for i in range(8)], 40
    barrier = threading.Barrier(len(workers))
    failures: list[BaseException] = []

    def turn(worker: str) -> None:
        barrier.wait()
        try:
            for i in range(each):
                store.append_message(session.id, NewMessage(role="user", content=f"{worker}:{i}"))
                store.append_message(other.id, NewMessage(role="user", content=f"{worker}:{i}"))
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=turn, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert failures == []
    assert_interleaved_in_order(store, session.id, workers, each)
    assert_interleaved_in_order(store, other.id, workers, each)
    store.close()


def test_processes_append_to_one_session(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    session = store.create_session(source="cli")
    ctx = multiprocessing.get_context("spawn")
    workers, each = ["p0", "p1", "p2"], 100
    start, results = ctx.Barrier(len(workers)), ctx.Queue()
    processes = [
        ctx.Process(target=append_many, args=(pg_url, session.id, w, each, start, results)) for w in workers
    ]
    for p in processes:
        p.start()
    try:
        reports = [results.get(timeout=DEADLINE) for _ in processes]
    finally:
        for p in processes:
            p.join(DEADLINE)
            if p.is_alive():
                p.terminate()
    assert sorted(reports) == [(w, []) for w in workers]
    assert_interleaved_in_order(store, session.id, workers, each)
    store.close()


def test_compare_and_set_races_have_one_winner_per_slot(pg_url: str) -> None:
    stores = [PostgresStore(pg_url) for _ in range(2)]  # two pools, as two processes would have
    contenders, slots = 8, 10
    barrier = threading.Barrier(contenders)
    won: dict[str, list[int]] = {f"cron:job:{n}": [] for n in range(slots)}

    def claim(i: int) -> None:
        store = stores[i % 2]
        for key in won:
            barrier.wait()
            if store.compare_and_set_meta(key, None, {"owner": i}):
                won[key].append(i)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(contenders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    for key, winners in won.items():
        assert len(winners) == 1, (key, winners)
        assert stores[1].get_meta(key).value == {"owner": winners[0]}  # type: ignore[union-attr]
    for store in stores:
        store.close()


def test_compare_and_set_loses_no_update(pg_url: str) -> None:
    """A counter bumped only through compare-and-set ends at the number of bumps."""
    stores = [PostgresStore(pg_url) for _ in range(2)]
    stores[0].set_meta("counter", {"n": 0})
    threads_count, bumps = 6, 15
    barrier = threading.Barrier(threads_count)
    losses: list[int] = []

    def bump(i: int) -> None:
        store = stores[i % 2]
        barrier.wait()
        lost = 0
        for _ in range(bumps):
            while True:
                current = store.get_meta("counter").value  # type: ignore[union-attr]
                if store.compare_and_set_meta("counter", current, {"n": current["n"] + 1}):
                    break
                lost += 1
        losses.append(lost)

    threads = [threading.Thread(target=bump, args=(i,)) for i in range(threads_count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert len(losses) == threads_count
    assert stores[0].get_meta("counter").value == {"n": threads_count * bumps}  # type: ignore[union-attr]
    for store in stores:
        store.close()
