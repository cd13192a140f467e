"""Group commit in the SQLite store: appends that threads of one process make at the same time
share one commit; each writer still gets its own result or its own error."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from vigil.store import NewMessage, SessionNotFound
from vigil.store.sqlite import SQLiteStore


def test_writes_waiting_together_share_one_commit_and_fail_alone(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    sessions = [store.create_session(source=f"chat-{n}").id for n in range(6)]
    outcomes: dict[str, object] = {}
    targets = [*sessions, "0" * 32]  # the last session does not exist

    def append(session_id: str) -> None:
        try:
            outcomes[session_id] = store.append_message(session_id, NewMessage(role="user", content=session_id))
        except Exception as exc:  # noqa: BLE001 - reported to the test
            outcomes[session_id] = exc

    before = store.group_commit.commits
    with closing(sqlite3.connect(db_path, isolation_level=None)) as other_process:
        other_process.execute("BEGIN IMMEDIATE")  # holds the write lock: every writer waits
        threads = [threading.Thread(target=append, args=(sid,)) for sid in targets]
        for t in threads:
            t.start()
        while store.group_commit.pending < len(targets):  # one leads and waits, the rest queue
            time.sleep(0.001)
        other_process.execute("COMMIT")
    for t in threads:
        t.join()

    assert isinstance(outcomes.pop("0" * 32), SessionNotFound)
    for sid in sessions:
        assert [m.content for m in store.get_messages(sid)] == [sid]
        assert outcomes[sid].seq == 1  # type: ignore[attr-defined]
    # Seven writes, two commits at most: whatever the leader had taken when it began waiting
    # for the lock, then everything that queued meanwhile.
    assert 1 <= store.group_commit.commits - before <= 2
    store.close()


def test_a_single_writer_is_not_held_up(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    session = store.create_session(source="cli").id
    before = store.group_commit.commits
    for n in range(5):
        assert store.append_message(session, NewMessage(role="user", content=str(n))).seq == n + 1
    assert store.group_commit.commits - before == 5
    with pytest.raises(SessionNotFound):
        store.append_message("1" * 32, NewMessage(role="user", content="x"))
    assert len(store.get_messages(session)) == 5
    store.close()
