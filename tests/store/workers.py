"""Bodies of the processes in test_concurrency (importable by a "spawn" child)."""

from __future__ import annotations

import threading
from multiprocessing.synchronize import Event
from multiprocessing.queues import Queue
from typing import Any

from vigil.store import NewMessage
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.store.sqlite import SQLiteStore


def content(session_id: str, i: int) -> str:
    return f"{session_id} message {i}"


def append(path: str, session_id: str, count: int, start: Event, results: Queue[Any]) -> None:
    """Append ``count`` messages to one session, one transaction each; report every error."""
    errors: list[str] = []
    try:
        # durable=False skips the fsync per commit: it changes when the WAL reaches the disk,
        # not the locking under test, and keeps the run time independent of the disk.
        store = SQLiteStore(path, durable=False)
        try:
            start.wait()
            for i in range(count):
                try:
                    store.append_message(session_id, NewMessage(role="user", content=content(session_id, i)))
                except Exception as exc:  # noqa: BLE001 - every failure is reported to the test
                    errors.append(f"append {i}: {exc!r}")
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001
        errors.append(f"open: {exc!r}")
    results.put(("writer", session_id, errors))


def read(path: str, session_ids: list[str], ready: Event, stop: Event, results: Queue[Any]) -> None:
    """Follow every session's new messages until ``stop``, as a live view would; a gap, a
    repeat or a reordering is reported as an error, and so is any exception."""
    errors: list[str] = []
    seen = dict.fromkeys(session_ids, 0)
    reads = 0
    try:
        store = SQLiteStore(path)
        ready.set()
        try:
            while not stop.is_set() and len(errors) < 20:
                try:
                    for session_id in session_ids:
                        new = store.get_messages(session_id, after_seq=seen[session_id])
                        first = seen[session_id]
                        expected = [(first + i + 1, content(session_id, first + i)) for i in range(len(new))]
                        if [(m.seq, m.content) for m in new] != expected:
                            errors.append(f"session {session_id}: messages after {first} out of order")
                        seen[session_id] += len(new)
                    store.list_sessions()
                    store.search("message 7")
                    reads += 1
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"read: {exc!r}")
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001
        errors.append(f"reader: {exc!r}")
    ready.set()  # in case opening failed: the test must not wait for it
    results.put(("reader", reads, errors))


def open_and_create(path: str, start: Event, results: Queue[Any]) -> None:
    """Open a (possibly brand-new) database at the same moment as others and create a session."""
    try:
        start.wait()
        store = SQLiteStore(path)
        try:
            results.put(("ok", store.create_session(source="race").id))
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001
        results.put(("error", repr(exc)))


def accept_inbox(path: str, external_ids: list[str], threads: int, start: Event, results: Queue[Any]) -> None:
    """Deliver every message of ``external_ids`` to the gateway inbox from ``threads`` threads
    at once (each in its own order), as a platform redelivering to two gateways would; report
    the ids this process was told it stored first, and every error."""
    stored: list[tuple[str, int]] = []
    errors: list[str] = []
    lock = threading.Lock()
    try:
        store = SQLiteStore(path, durable=False)  # see append(): the locking is what is tested
        try:

            def deliver(offset: int) -> None:
                order = external_ids[offset:] + external_ids[:offset]
                for external_id in order:
                    try:
                        entry, new = store.gateway.inbox_accept(
                            RouteKey("web", "chat"), external_id, f"text {external_id}", received_at=1.0
                        )
                    except Exception as exc:  # noqa: BLE001 - every failure is reported
                        with lock:
                            errors.append(f"accept {external_id}: {exc!r}")
                        continue
                    if new:
                        with lock:
                            stored.append((external_id, entry.id))

            workers = [
                threading.Thread(target=deliver, args=(n * len(external_ids) // threads,)) for n in range(threads)
            ]
            start.wait()
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001
        errors.append(f"open: {exc!r}")
    results.put(("accepted", stored, errors))
