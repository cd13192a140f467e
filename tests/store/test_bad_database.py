"""Files that are not (usable) vigil databases, and damaged rows inside one."""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from vigil.clock import FakeClock
from vigil.store import (
    NewMessage,
    SchemaTooNew,
    StoreError,
    StoreUnreadable,
    ToolCall,
    open_store,
)
from vigil.store.sqlite import SQLiteStore
from vigil.store.sqlite.migrations import LATEST_VERSION


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


@pytest.mark.parametrize(
    "content",
    [
        b"these are my notes, not a database\n" * 100,
        bytes(range(256)) * 40,
        b"SQLite format 3\x00" + b"\xff" * 4080,  # the right header, then nonsense
        b"SQLite",  # a truncated header
    ],
    ids=["text", "binary", "bad-pages", "truncated"],
)
def test_a_file_that_is_not_a_database_is_refused_and_left_alone(db_path: Path, content: bytes) -> None:
    db_path.write_bytes(content)
    before = digest(db_path)
    with pytest.raises(StoreUnreadable) as refused:
        SQLiteStore(db_path)
    assert str(db_path) in str(refused.value)
    assert digest(db_path) == before
    assert siblings(db_path) == ["state.db"]  # no -wal or -shm left behind


def test_another_programs_database_is_refused_and_left_alone(db_path: Path) -> None:
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("CREATE TABLE recipes (name TEXT)")
        conn.execute("INSERT INTO recipes VALUES ('soup')")
        conn.commit()
    before = digest(db_path)
    with pytest.raises(StoreUnreadable, match="other program"):
        SQLiteStore(db_path)
    assert digest(db_path) == before


def test_a_directory_in_the_way_is_refused(db_path: Path) -> None:
    db_path.mkdir()
    with pytest.raises(StoreUnreadable):
        SQLiteStore(db_path)


def test_an_empty_file_becomes_a_database(db_path: Path) -> None:
    db_path.touch()
    store = SQLiteStore(db_path)
    assert store.schema_version() == LATEST_VERSION
    store.close()


def test_an_empty_file_with_an_empty_wal_beside_it_becomes_a_database(db_path: Path) -> None:
    db_path.touch()
    db_path.with_name("state.db-wal").touch()  # nothing in it: nothing to lose
    store = SQLiteStore(db_path)
    assert store.schema_version() == LATEST_VERSION
    store.close()


@pytest.mark.parametrize("sidecar", ["state.db-wal", "state.db-journal"])
def test_an_empty_file_beside_a_journal_with_data_is_refused_and_left_alone(
    db_path: Path, sidecar: str
) -> None:
    # What a store truncated to 0 bytes looks like: its last transactions still in the WAL.
    SQLiteStore(db_path).close()
    saved = db_path.read_bytes()
    db_path.write_bytes(b"")
    db_path.with_name(sidecar).write_bytes(saved)
    with pytest.raises(StoreUnreadable) as refused:
        SQLiteStore(db_path)
    message = str(refused.value)
    assert f"{db_path} is empty but {sidecar} beside it holds {len(saved):,} bytes" in message
    assert "left untouched" in message
    assert db_path.read_bytes() == b"" and db_path.with_name(sidecar).read_bytes() == saved
    assert siblings(db_path) == sorted(["state.db", sidecar])


def _filled_store(db_path: Path) -> bytes:
    store = SQLiteStore(db_path)
    for number in range(3):
        session = store.create_session(source="cli", title=f"talk {number}")
        for turn in range(6):
            store.append_message(session.id, NewMessage(role="user", content=f"question {turn} " * 60))
    store.close()
    return db_path.read_bytes()


@pytest.mark.parametrize("keep", [20, 100, 4096 + 7, 3 * 4096 - 1])
def test_a_database_cut_inside_a_page_is_refused_before_sqlite_touches_it(db_path: Path, keep: int) -> None:
    db_path.write_bytes(_filled_store(db_path)[:keep])
    with pytest.raises(StoreUnreadable, match="not a whole number of database pages"):
        SQLiteStore(db_path)
    assert db_path.stat().st_size == keep and siblings(db_path) == ["state.db"]


def test_a_database_cut_at_a_page_boundary_is_refused_without_leftovers(db_path: Path) -> None:
    whole = _filled_store(db_path)
    db_path.write_bytes(whole[: 2 * 4096])
    before = digest(db_path)
    with pytest.raises(StoreError):
        SQLiteStore(db_path).list_sessions()
    assert digest(db_path) == before
    assert siblings(db_path) == ["state.db"]  # no -wal or -shm left behind


def test_a_symlink_loop_or_a_dangling_link_is_refused(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    db_path.symlink_to(db_path)
    with pytest.raises(StoreUnreadable, match="symbolic link loop"):
        SQLiteStore(db_path)
    db_path.unlink()
    db_path.symlink_to(db_path.with_name("elsewhere.db"))
    with pytest.raises(StoreUnreadable, match="symbolic link to a file that does not exist"):
        SQLiteStore(db_path)
    assert siblings(db_path) == ["state.db"]  # nothing created at the link's target


def test_a_fifo_is_refused_without_waiting_for_a_writer(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(db_path)
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            SQLiteStore(db_path).close()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    worker = threading.Thread(target=open_it, daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # unblock the hung open so the test run can go on
        with open(db_path, "wb"):
            pass
        pytest.fail("opening a FIFO as the session database hung")
    assert isinstance(outcome[0], StoreUnreadable)
    assert "is a FIFO (named pipe), not a regular file" in str(outcome[0])


def test_a_newer_schema_is_refused(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)", (LATEST_VERSION + 5,)
        )
        conn.commit()
    before = digest(db_path)
    with pytest.raises(SchemaTooNew) as refused:
        SQLiteStore(db_path)
    message = str(refused.value)
    assert f"schema {LATEST_VERSION + 5}" in message and f"knows up to {LATEST_VERSION}" in message
    assert "upgrade vigil" in message and "state.db" in message
    assert digest(db_path) == before


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    store = open_store(tmp_path / "state.db")
    assert isinstance(store, SQLiteStore)
    store.close()
    # A URL picks PostgreSQL (port 1: nothing listens, so this needs no server).
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL at vigil@127.0.0.1:1/vigil"):
        open_store("postgresql://vigil@127.0.0.1:1/vigil?connect_timeout=2")


def test_a_closed_store_says_so(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.list_sessions()


# -- damaged rows -------------------------------------------------------------------------
def damage(path: Path, sql: str, *params: object) -> None:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(sql, params)
        conn.commit()


def test_a_damaged_session_row_is_named_not_a_traceback(
    db_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(db_path, clock=clock)
    healthy = store.create_session(source="cli", model_config={"epoch": 1}, tool_names=["terminal"])
    clock.set_sync(clock.now() + 1)
    broken = store.create_session(source="cli", model_config={"epoch": 1}, tool_names=["terminal"])
    damage(
        db_path,
        "UPDATE sessions SET model_config = '{not json', tool_names = '\"x\"' WHERE id = ?",
        broken.id,
    )

    # Strict reads name the session and the column.
    for read in (
        lambda: store.get_session(broken.id),
        lambda: store.latest_session(),
        lambda: store.parent_chain(broken.id),
    ):
        with pytest.raises(StoreError) as refused:
            read()
        assert broken.id in str(refused.value) and "model_config" in str(refused.value)

    # List views still work: the damaged fields show as empty and a warning says why.
    with caplog.at_level(logging.WARNING, logger="vigil.store"):
        listed = {s.id: s for s in store.list_sessions()}
    assert listed[broken.id].model_config == {} and listed[broken.id].tool_names == ()
    assert listed[healthy.id].model_config == {"epoch": 1}
    assert any(broken.id in r.getMessage() and "tool_names" in r.getMessage() for r in caplog.records)
    assert {c.head.id for c in store.list_conversations()} == {healthy.id, broken.id}

    store.delete_session(broken.id)  # and it can be cleared away
    assert [s.id for s in store.list_sessions()] == [healthy.id]
    store.close()


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ('[[["c","terminal"]],null,null,null,null]', "tool_calls"),  # a call without its arguments
        ('[[["c",1,"{}"]],null,null,null,null]', "tool_calls"),
        ('["x",null,null,null,null]', "tool_calls"),
        ("[[[", "extra"),  # not JSON
        ('[null,null,null,[1,2,"three",4],null]', "usage"),
        ('[null,null,null,null,[]]', "meta"),
        ('[null,"c",7,null,null]', "tool_name"),
        ('{"tool_calls":[]}', "five fields"),
        ("[null,null,null,null]", "five fields"),
    ],
)
def test_a_damaged_message_row_is_named(db_path: Path, extra: str, named: str) -> None:
    store = SQLiteStore(db_path)
    session = store.create_session(source="cli")
    store.append_message(session.id, NewMessage(role="user", content="hello"))
    store.append_message(
        session.id, NewMessage(role="assistant", tool_calls=(ToolCall("c", "terminal", "{}"),))
    )
    damage(db_path, "UPDATE messages SET extra = ? WHERE session_id = ? AND seq = 2", extra, session.id)
    with pytest.raises(StoreError) as refused:
        store.get_messages(session.id)
    assert f"session {session.id} message 2" in str(refused.value) and named in str(refused.value)
    assert [m.content for m in store.get_messages(session.id, limit=1)] == ["hello"]  # the rest still reads
    store.close()


def test_a_damaged_meta_value_is_named(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.set_meta("heartbeat:abc", {"status": "active"})
    damage(db_path, "UPDATE state_meta SET value = 'nope' WHERE key = 'heartbeat:abc'")
    with pytest.raises(StoreError, match="heartbeat:abc"):
        store.get_meta("heartbeat:abc")
    store.set_meta("heartbeat:abc", {"status": "paused"})  # overwriting repairs it
    assert store.get_meta("heartbeat:abc").value == {"status": "paused"}  # type: ignore[union-attr]
    store.close()


def test_a_deleted_file_is_not_silently_recreated(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    for path in db_path.parent.iterdir():
        path.unlink()
    failures: list[BaseException] = []

    def use_from_a_new_thread() -> None:  # a new thread opens a new connection
        try:
            store.list_sessions()
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    worker = threading.Thread(target=use_from_a_new_thread)
    worker.start()
    worker.join()
    assert len(failures) == 1 and isinstance(failures[0], StoreError)
    assert not db_path.exists()
    store.close()
