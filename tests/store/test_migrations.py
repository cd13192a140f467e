"""Schema migrations of the SQLite store: forward-only, recorded, and lossless."""

from __future__ import annotations

import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import pytest

from vigil.clock import FakeClock
from vigil.store import NewMessage, SessionRecord, StoreError, ToolCall
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.store.sqlite import SQLiteStore
from vigil.store.sqlite.migrations import LATEST_VERSION, MIGRATIONS, applied_version, migrate
from vigil.usage import Usage


def make_v1_database(path: Path) -> None:
    """A database as the first schema version left it, with a parent chain, messages and meta."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert migrate(conn, target=1, now=100.0) == 1
        # fmt: off
        conn.executemany(
            "INSERT INTO sessions (id, source, title, parent_id, end_reason, started_at, ended_at,"
            " updated_at, model, model_config, tool_names, message_count, input_tokens, output_tokens)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                ("aaaaaaaaaaaa", "cli", "old talk", None, "compression", 10.0, 20.0, 20.0,
                 "gpt-old", '{"epoch": 1}', '["terminal"]', 2, 50, 7),
                ("bbbbbbbbbbbb", "cli", None, "aaaaaaaaaaaa", None, 20.0, None, 30.0,
                 "gpt-old", "{}", '["terminal", "files"]', 1, 5, 1),
            ],
        )
        conn.executemany(
            "INSERT INTO messages (session_id, seq, role, content, tool_calls, tool_call_id, tool_name,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                ("aaaaaaaaaaaa", 1, "user", "remember the lighthouse keeper", "[]", None, None, 11.0),
                ("aaaaaaaaaaaa", 2, "assistant", None,
                 '[{"id": "c1", "name": "terminal", "arguments": "{}"}]', None, None, 12.0),
                ("bbbbbbbbbbbb", 1, "summary", "we spoke about a lighthouse", "[]", None, None, 21.0),
            ],
        )
        # fmt: on
        conn.execute("INSERT INTO state_meta (key, value, updated_at) VALUES ('refresh_epoch', '3', 15.0)")
    finally:
        conn.close()


def test_migrations_are_numbered_from_one() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, LATEST_VERSION + 1))
    assert LATEST_VERSION >= 2


def test_a_new_database_is_at_the_latest_version(db_path: Path, clock: FakeClock) -> None:
    store = SQLiteStore(db_path, clock=clock)
    assert store.schema_version() == LATEST_VERSION
    store.close()
    with closing(sqlite3.connect(db_path)) as conn:
        ledger = conn.execute("SELECT version, applied_at FROM schema_migrations ORDER BY version").fetchall()
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert ledger == [(v, clock.now()) for v in range(1, LATEST_VERSION + 1)]


def test_reopening_applies_nothing_twice(db_path: Path, clock: FakeClock) -> None:
    SQLiteStore(db_path, clock=clock).close()
    clock.set_sync(clock.now() + 60)
    store = SQLiteStore(db_path, clock=clock)
    store.close()
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("SELECT COUNT(*), MAX(applied_at) FROM schema_migrations").fetchone() == (
            LATEST_VERSION,
            clock.now() - 60,
        )


def test_migrate_to_a_target_and_never_back(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        assert applied_version(conn) == 0
        assert migrate(conn, target=1) == 1
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"sessions", "messages", "state_meta"} <= tables and "system_prompts" not in tables
        assert migrate(conn) == LATEST_VERSION
        assert migrate(conn, target=1) == LATEST_VERSION  # forward only: nothing is undone
        with pytest.raises(ValueError):
            migrate(conn, target=LATEST_VERSION + 1)
    finally:
        conn.close()


def test_a_first_version_database_migrates_without_loss(db_path: Path, clock: FakeClock) -> None:
    make_v1_database(db_path)
    store = SQLiteStore(db_path, clock=clock)
    assert store.schema_version() == LATEST_VERSION

    old = store.get_session("aaaaaaaaaaaa")
    assert old == SessionRecord(
        id="aaaaaaaaaaaa",
        source="cli",
        title="old talk",
        parent_id=None,
        end_reason="compression",
        started_at=10.0,
        ended_at=20.0,
        updated_at=20.0,
        model="gpt-old",
        model_config={"epoch": 1},
        system_prompt_hash=None,
        tool_names=("terminal",),
        message_count=2,
        usage=Usage(50, 0, 0, 7),
    )
    newer = store.get_session("bbbbbbbbbbbb")
    assert newer.parent_id == old.id and newer.tool_names == ("terminal", "files")
    assert [c.head.id for c in store.list_conversations()] == ["bbbbbbbbbbbb"]

    messages = store.get_messages(old.id)
    assert [(m.seq, m.role, m.content) for m in messages] == [
        (1, "user", "remember the lighthouse keeper"),
        (2, "assistant", None),
    ]
    assert messages[1].tool_calls[0].name == "terminal"
    assert all(m.usage == Usage() and m.meta == {} for m in messages)
    assert store.get_meta("refresh_epoch").value == 3  # type: ignore[union-attr]

    # Messages written before full-text search existed are found, and new ones join them.
    assert {h.session_id for h in store.search("lighthouse")} == {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}
    appended = store.append_message(old.id, NewMessage(role="user", content="the lighthouse again"))
    assert appended.seq == 3 and len(store.search("lighthouse")) == 3
    assert store.get_session(old.id).message_count == 3
    store.close()


def test_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "profile" / "nested" / "state.db"
    store = SQLiteStore(path)
    store.create_session(source="cli")  # something in the WAL
    for suffix in ("", "-wal", "-shm"):
        mode = stat.S_IMODE((path.parent / (path.name + suffix)).stat().st_mode)
        assert mode == 0o600, f"{path.name}{suffix} has mode {oct(mode)}"
    store.close()


def test_a_second_version_database_gains_the_gateway_tables(db_path: Path, clock: FakeClock) -> None:
    make_v1_database(db_path)
    with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
        assert migrate(conn, target=2, now=200.0) == 2
    store = SQLiteStore(db_path, clock=clock)
    assert store.schema_version() == LATEST_VERSION >= 3
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("SELECT applied_at FROM schema_migrations WHERE version = 3").fetchone() == (clock.now(),)
    # What was there is untouched...
    assert [(m.seq, m.content) for m in store.get_messages("bbbbbbbbbbbb")] == [(1, "we spoke about a lighthouse")]
    assert store.get_meta("refresh_epoch").value == 3  # type: ignore[union-attr]
    # ...and the old conversations can be routed to, with routes going when their session goes.
    route = RouteKey("web", "browser-1")
    store.gateway.route_set(route, "bbbbbbbbbbbb", now=clock.now())
    entry, new = store.gateway.inbox_accept(route, "m1", "hello again", received_at=clock.now())
    assert new and store.gateway.inbox_start(entry.id, "bbbbbbbbbbbb", now=clock.now()).attempts == 1
    store.delete_session("bbbbbbbbbbbb")
    assert store.gateway.route_get(route) is None
    assert store.gateway.inbox_unfinished()[0].session_id == "bbbbbbbbbbbb"
    store.close()


def make_v3_database(path: Path) -> None:
    """A database as schema version 3 left it (a column per message field): a compressed
    conversation whose continuation carries a copy, tool calls with usage and meta, a
    session with one damaged row, and one long enough to take several batches to rewrite."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert migrate(conn, target=3, now=100.0) == 3
        conn.executemany(
            "INSERT INTO sessions (id, source, parent_id, end_reason, started_at, updated_at)"
            " VALUES (?, 'cli', ?, ?, ?, ?)",
            [
                ("aaaaaaaaaaaa", None, "compression", 10.0, 20.0),
                ("bbbbbbbbbbbb", "aaaaaaaaaaaa", None, 20.0, 30.0),
                ("dddddddddddd", None, None, 40.0, 40.0),
                ("eeeeeeeeeeee", None, None, 50.0, 50.0),
                ("ffffffffffff", None, None, 60.0, 60.0),
            ],
        )
        columns = (
            "session_id, seq, role, content, tool_calls, tool_call_id, tool_name, created_at,"
            " input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, meta"
        )
        # fmt: off
        rows = [
            ("aaaaaaaaaaaa", 1, "user", "remember the lighthouse keeper", "[]", None, None, 11.0, 0, 0, 0, 0, "{}"),
            ("aaaaaaaaaaaa", 2, "assistant", None, '[{"arguments":"{}","id":"c1","name":"terminal"}]',
             None, None, 12.0, 5, 900, 2, 30, '{"stop_reason":"tool_calls"}'),
            ("aaaaaaaaaaaa", 3, "tool", "no such file", "[]", "c1", "terminal", 13.0, 0, 0, 0, 0, '{"is_error":true}'),
            ("bbbbbbbbbbbb", 1, "user", "remember the lighthouse keeper", "[]", None, None, 11.0, 0, 0, 0, 0,
             '{"copied_from":{"seq":1,"session":"aaaaaaaaaaaa"}}'),
            ("dddddddddddd", 1, "assistant", "fine", "{not json", None, None, 41.0, 0, 0, 0, 0, "{}"),
            ("ffffffffffff", 1, "user", "hi", "[]", None, None, 61.0, 0, 0, 0, 0, '{"x": NaN}'),
        ]
        # fmt: on
        rows += [("eeeeeeeeeeee", n, "assistant", f"step {n}", "[]", None, None, 50.0 + n, 1, 2, 3, n, "{}") for n in range(1, 2346)]
        conn.execute("BEGIN")
        conn.executemany(f"INSERT INTO messages ({columns}) VALUES ({', '.join('?' * 13)})", rows)
        conn.execute("DELETE FROM messages WHERE id = (SELECT MAX(id) FROM messages)")  # its id is never reused
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_third_version_database_packs_its_messages_without_loss(db_path: Path, clock: FakeClock) -> None:
    make_v3_database(db_path)
    with closing(sqlite3.connect(db_path)) as conn:
        ids_before = conn.execute("SELECT id FROM messages ORDER BY id").fetchall()
        last_id = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()[0]
    store = SQLiteStore(db_path, clock=clock)
    assert store.schema_version() == LATEST_VERSION >= 4

    old = store.get_messages("aaaaaaaaaaaa")
    assert [(m.seq, m.role, m.content) for m in old] == [
        (1, "user", "remember the lighthouse keeper"),
        (2, "assistant", None),
        (3, "tool", "no such file"),
    ]
    assert old[0].tool_calls == () and old[0].usage == Usage() and old[0].meta == {}
    assert old[1].tool_calls == (ToolCall("c1", "terminal", "{}"),)
    assert old[1].usage == Usage(5, 900, 2, 30) and old[1].meta == {"stop_reason": "tool_calls"}
    assert (old[2].tool_call_id, old[2].tool_name, old[2].meta) == ("c1", "terminal", {"is_error": True})
    long = store.get_messages("eeeeeeeeeeee")
    assert len(long) == 2344 and all(m.usage == Usage(1, 2, 3, m.seq) for m in long)

    # Ids are kept: the full-text index still points at the right rows, and a copy carried
    # into a continuation is still listed once, under the newest session.
    hits = store.search("lighthouse")
    assert [(h.session_id, h.message_id) for h in hits] == [("bbbbbbbbbbbb", ids_before[3][0])]
    assert store.search("lighthouse", session_id="aaaaaaaaaaaa")[0].message_id == ids_before[0][0]
    # A damaged row is still reported, naming the session and the message.
    with pytest.raises(StoreError) as refused:
        store.get_messages("dddddddddddd")
    assert "session dddddddddddd message 1" in str(refused.value) and "tool_calls" in str(refused.value)
    with pytest.raises(StoreError, match="session ffffffffffff message 1"):
        store.get_messages("ffffffffffff")  # even damage JSON cannot hold

    added = store.append_message("eeeeeeeeeeee", NewMessage(role="user", content="and now?"))
    assert added.seq == 2345 and added.id > last_id
    assert store.get_messages("eeeeeeeeeeee", after_seq=2344) == [added]
    assert [h.message_id for h in store.search("and now")] == [added.id]  # the index follows new rows
    store.close()
    with closing(sqlite3.connect(db_path)) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(messages)")]
    assert columns == ["id", "session_id", "seq", "role", "content", "created_at", "extra"]


def test_packed_rows_read_loosely_typed_fields_back_as_the_typed_columns_did(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    session = store.create_session(source="cli")
    calls = (ToolCall(7, "terminal", "{}"),)  # type: ignore[arg-type]
    store.append_message(session.id, NewMessage(role="assistant", tool_calls=calls, usage=Usage(True, 0, 0, 2)))
    store.append_message(session.id, NewMessage(role="tool", content="ok", tool_call_id=7, tool_name="terminal"))  # type: ignore[arg-type]
    asked, answered = store.get_messages(session.id)
    assert asked.tool_calls == (ToolCall("7", "terminal", "{}"),) and asked.usage == Usage(1, 0, 0, 2)
    assert answered.tool_call_id == "7"
    store.close()
