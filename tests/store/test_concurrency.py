"""Several processes and threads using one state.db at once."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from vigil.store import NewMessage
from vigil.store.sqlite import SQLiteStore
from vigil.store.sqlite.migrations import LATEST_VERSION

from . import workers

WRITERS = 4
MESSAGES_EACH = 2000
DEADLINE = 300.0  # only a guard against a hang; nothing here is timed


def collect(results: Any, count: int) -> list[tuple[Any, ...]]:
    return [results.get(timeout=DEADLINE) for _ in range(count)]


def finish(processes: list[Any]) -> None:
    for p in processes:
        p.join(timeout=DEADLINE)
        if p.is_alive():
            p.terminate()
    assert [p.exitcode for p in processes] == [0] * len(processes)


def test_processes_append_while_another_reads(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    session_ids = [store.create_session(source=f"writer-{i}").id for i in range(WRITERS)]
    ctx = multiprocessing.get_context("spawn")
    ready, start, stop = ctx.Event(), ctx.Event(), ctx.Event()
    write_results, read_results = ctx.Queue(), ctx.Queue()
    writers = [
        ctx.Process(target=workers.append, args=(str(db_path), sid, MESSAGES_EACH, start, write_results))
        for sid in session_ids
    ]
    reader = ctx.Process(target=workers.read, args=(str(db_path), session_ids, ready, stop, read_results))
    for p in [reader, *writers]:
        p.start()
    try:
        assert ready.wait(DEADLINE), "the reader did not start"
        start.set()
        written = collect(write_results, WRITERS)
        stop.set()
        (read_report,) = collect(read_results, 1)
    finally:
        stop.set()
        finish([reader, *writers])

    assert sorted(r[1] for r in written) == sorted(session_ids)
    assert [errors for *_, errors in written] == [[]] * WRITERS
    assert read_report[0] == "reader" and read_report[2] == [] and read_report[1] > 0

    for sid in session_ids:
        messages = store.get_messages(sid)
        assert [m.seq for m in messages] == list(range(1, MESSAGES_EACH + 1))
        assert [m.content for m in messages] == [workers.content(sid, i) for i in range(MESSAGES_EACH)]
        assert store.get_session(sid).message_count == MESSAGES_EACH
    assert sum(s.message_count for s in store.list_sessions()) == WRITERS * MESSAGES_EACH
    store.close()


def test_processes_opening_a_new_database_together(db_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    openers = [
        ctx.Process(target=workers.open_and_create, args=(str(db_path), start, results)) for _ in range(4)
    ]
    for p in openers:
        p.start()
    try:
        start.set()
        reports = collect(results, len(openers))
    finally:
        finish(openers)
    assert [status for status, _ in reports] == ["ok"] * len(openers), reports
    with closing(sqlite3.connect(db_path)) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == list(range(1, LATEST_VERSION + 1))
        assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone() == (len(openers),)


async def test_threads_append_to_one_session(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    session = store.create_session(source="cli")

    def turn(worker: int, count: int) -> None:
        for i in range(count):
            store.append_message(session.id, NewMessage(role="user", content=f"{worker}:{i}"))

    await asyncio.gather(*(asyncio.to_thread(turn, w, 100) for w in range(8)))
    messages = store.get_messages(session.id)
    assert [m.seq for m in messages] == list(range(1, 801))
    for w in range(8):  # each thread's messages kept their order
        mine = [m.content for m in messages if m.content and m.content.startswith(f"{w}:")]
        assert mine == [f"{w}:{i}" for i in range(100)]
    store.close()


def test_two_processes_accepting_the_same_messages_store_each_once(db_path: Path) -> None:
    """Two gateway processes (four threads each) get the same 300 deliveries: every message
    is stored once, and exactly one delivery of it, in one of the processes, hears ``True``."""
    SQLiteStore(db_path).close()
    external_ids = [f"update-{n}" for n in range(300)]
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    processes = [
        ctx.Process(target=workers.accept_inbox, args=(str(db_path), external_ids, 4, start, results))
        for _ in range(2)
    ]
    for p in processes:
        p.start()
    try:
        start.set()
        reports = collect(results, len(processes))
    finally:
        finish(processes)
    assert [errors for _, _, errors in reports] == [[], []]
    first, second = ({eid for eid, _ in stored} for _, stored, _ in reports)
    assert not first & second and first | second == set(external_ids)
    assert len(reports[0][1]) + len(reports[1][1]) == len(external_ids)  # no id won twice
    store = SQLiteStore(db_path)
    stored = store.gateway.inbox_unfinished()
    assert sorted(e.external_id for e in stored) == sorted(external_ids)
    by_id = {e.id: e.external_id for e in stored}
    assert all(by_id[entry_id] == eid for _, won, _ in reports for eid, entry_id in won)
    store.close()
