"""Numbered, forward-only schema migrations of the SQLite store.

Each migration is a list of statements applied in one ``BEGIN IMMEDIATE`` transaction together
with its row in ``schema_migrations``, so a database is always at exactly one version and
several processes opening a fresh file at once apply each migration once. Released migrations
are never edited; a change to the schema is a new migration at the end of the list.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Callable

from vigil.store.records import ToolCall
from vigil.store.rows import packed_extra


Step = str | Callable[[sqlite3.Connection], None]
"""An SQL statement, or a function doing what SQL alone cannot (in the same transaction)."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``version`` is its position (1-based), ``statements`` run in order."""

    version: int
    name: str
    statements: tuple[Step, ...]


_V1_CORE = Migration(
    1,
    "sessions, messages, state_meta",
    (
        """
        CREATE TABLE sessions (
            id            TEXT PRIMARY KEY,
            source        TEXT NOT NULL,
            title         TEXT,
            parent_id     TEXT REFERENCES sessions(id) ON DELETE SET NULL,
            end_reason    TEXT,
            started_at    REAL NOT NULL,
            ended_at      REAL,
            updated_at    REAL NOT NULL,
            model         TEXT,
            model_config  TEXT NOT NULL DEFAULT '{}',
            tool_names    TEXT NOT NULL DEFAULT '[]',
            message_count INTEGER NOT NULL DEFAULT 0,
            input_tokens  INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0
        )
        """,
        "CREATE INDEX sessions_updated ON sessions(updated_at)",
        "CREATE INDEX sessions_parent ON sessions(parent_id)",
        """
        CREATE TABLE messages (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq          INTEGER NOT NULL,
            role         TEXT NOT NULL,
            content      TEXT,
            tool_calls   TEXT NOT NULL DEFAULT '[]',
            tool_call_id TEXT,
            tool_name    TEXT,
            created_at   REAL NOT NULL,
            UNIQUE (session_id, seq)
        )
        """,
        """
        CREATE TABLE state_meta (
            key        TEXT PRIMARY KEY,
            value      TEXT NOT NULL,
            updated_at REAL NOT NULL
        )
        """,
    ),
)

_FTS_TRIGGERS = (
    """
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END
        """,
    """
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        END
        """,
    """
        CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END
        """,
)
"""What keeps the external-content full-text index in step with messages (text unchanged
since version 2; version 4 creates them again on the rebuilt table)."""

_V2_PROMPTS_USAGE_FTS = Migration(
    2,
    "system prompts, cache usage, message meta, full-text search",
    (
        """
        CREATE TABLE system_prompts (
            hash       TEXT PRIMARY KEY,
            text       TEXT NOT NULL,
            created_at REAL NOT NULL
        )
        """,
        "ALTER TABLE sessions ADD COLUMN system_prompt_hash TEXT REFERENCES system_prompts(hash)",
        "ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN meta TEXT NOT NULL DEFAULT '{}'",
        # External content: the text lives once, in messages; the triggers keep the index in step.
        """
        CREATE VIRTUAL TABLE messages_fts USING fts5(
            content,
            content = 'messages',
            content_rowid = 'id',
            tokenize = 'porter unicode61 remove_diacritics 2'
        )
        """,
        *_FTS_TRIGGERS,
        # Index the messages written before this version.
        "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')",
    ),
)

# Routes go with their session (ON DELETE CASCADE): a deleted conversation is no longer
# where a platform chat talks to. The inbox and outbox only record which session a message
# went to or came from (no foreign key): their history, and a reply still to be sent, outlive
# the session. AUTOINCREMENT: an id is never given out again after prune.
_V3_GATEWAY = Migration(
    3,
    "gateway routes, inbox and outbox",
    (
        """
        CREATE TABLE gateway_routes (
            adapter    TEXT NOT NULL,
            chat       TEXT NOT NULL,
            thread     TEXT NOT NULL DEFAULT '',
            user_key   TEXT NOT NULL DEFAULT '',
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (adapter, chat, thread, user_key)
        )
        """,
        "CREATE INDEX gateway_routes_session ON gateway_routes(session_id)",
        """
        CREATE TABLE gateway_inbox (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            adapter     TEXT NOT NULL,
            chat        TEXT NOT NULL,
            thread      TEXT NOT NULL DEFAULT '',
            user_key    TEXT NOT NULL DEFAULT '',
            external_id TEXT NOT NULL,
            text        TEXT NOT NULL,
            sender      TEXT NOT NULL DEFAULT '',
            received_at REAL NOT NULL,
            status      TEXT NOT NULL DEFAULT 'pending',
            session_id  TEXT,
            attempts    INTEGER NOT NULL DEFAULT 0,
            started_at  REAL,
            finished_at REAL,
            error       TEXT,
            meta        TEXT NOT NULL DEFAULT '{}',
            UNIQUE (adapter, external_id)
        )
        """,
        "CREATE INDEX gateway_inbox_unfinished ON gateway_inbox(status, id)",
        """
        CREATE TABLE gateway_outbox (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            adapter         TEXT NOT NULL,
            chat            TEXT NOT NULL,
            thread          TEXT NOT NULL DEFAULT '',
            user_key        TEXT NOT NULL DEFAULT '',
            kind            TEXT NOT NULL,
            text            TEXT NOT NULL,
            session_id      TEXT,
            inbox_id        INTEGER,
            created_at      REAL NOT NULL,
            status          TEXT NOT NULL DEFAULT 'pending',
            attempts        INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL,
            last_error      TEXT,
            sent_at         REAL,
            failed_at       REAL,
            meta            TEXT NOT NULL DEFAULT '{}'
        )
        """,
        "CREATE INDEX gateway_outbox_pending ON gateway_outbox(next_attempt_at) WHERE status = 'pending'",
        "CREATE INDEX gateway_outbox_status ON gateway_outbox(status, id)",
    ),
)

def _pack_messages(conn: sqlite3.Connection) -> None:
    """Rebuild ``messages`` with the rarely used columns packed into ``extra``, in one pass
    that SQLite streams (memory stays bounded on any size), in the writer's own encoding.

    Ids are kept, so the external-content full-text index stays valid as it is; so is the
    AUTOINCREMENT high-water mark, so that the id of a deleted message is never given out
    again. The old table's triggers go with it (none fires on the way) and are made anew.
    """
    conn.create_function("vigil_packed_extra", 8, _packed_old_row, deterministic=True)
    high = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    conn.execute(
        """
        CREATE TABLE messages_packed (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq        INTEGER NOT NULL,
            role       TEXT NOT NULL,
            content    TEXT,
            created_at REAL NOT NULL,
            extra      TEXT,
            UNIQUE (session_id, seq)
        )
        """
    )
    conn.execute(
        "INSERT INTO messages_packed (id, session_id, seq, role, content, created_at, extra)"
        " SELECT id, session_id, seq, role, content, created_at, vigil_packed_extra(tool_calls,"
        " tool_call_id, tool_name, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,"
        " meta) FROM messages ORDER BY id"
    )
    conn.execute("DROP TABLE messages")
    conn.execute("ALTER TABLE messages_packed RENAME TO messages")
    for trigger in _FTS_TRIGGERS:
        conn.execute(trigger)
    if high is not None:
        conn.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'messages'", (high[0],))


def _packed_old_row(
    calls: Any, call_id: Any, tool_name: Any, i: Any, r: Any, w: Any, o: Any, meta: Any
) -> str | None:
    if calls == "[]" and call_id is None and tool_name is None and not (i or r or w or o) and meta == "{}":
        return None  # most rows: nothing but text
    try:
        return packed_extra(_old_calls(calls), call_id, tool_name, (i, r, w, o), _decoded(meta))
    except (TypeError, ValueError):
        # Damage no JSON can carry (NaN, say): kept as text that is not JSON, so that loading
        # the history reports this message, and what it held is still there to repair by hand.
        return "damaged in schema 3: " + repr((calls, call_id, tool_name, i, r, w, o, meta))


def _old_calls(text: Any) -> Any:
    """The tool calls of an old ``tool_calls`` column, read as the old loader read them."""
    value = _decoded(text)
    if type(value) is list and all(type(item) is dict for item in value):
        try:
            return tuple(ToolCall.from_dict(item) for item in value)
        except KeyError:
            pass
    return value


def _decoded(text: Any) -> Any:
    # Undecodable text (a damaged row) is carried over as it is: loading reports it.
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


# Every history load reads every row of a session, and each column read costs about as
# much as decoding it: the columns most messages leave empty become one nullable column
# (see rows.PACKED_MESSAGE_COLUMNS).
_V4_PACKED_MESSAGES = Migration(4, "messages: rarely used columns packed into one", (_pack_messages,))

# Who may talk to the agent from a platform (see store/pairing_tables.py). Codes are kept as
# their SHA-256 only. No foreign keys: a pairing is about a platform user, not a session.
_V5_PAIRING = Migration(
    5,
    "pairing codes, paired users, rate-limit events, chat speakers",
    (
        """
        CREATE TABLE pairing_codes (
            platform     TEXT NOT NULL,
            user_id      TEXT NOT NULL,
            display_name TEXT NOT NULL DEFAULT '',
            chat         TEXT NOT NULL,
            thread       TEXT NOT NULL DEFAULT '',
            user_key     TEXT NOT NULL DEFAULT '',
            code_hash    TEXT NOT NULL UNIQUE,
            nonce        TEXT NOT NULL,
            created_at   REAL NOT NULL,
            expires_at   REAL NOT NULL,
            PRIMARY KEY (platform, user_id)
        )
        """,
        "CREATE INDEX pairing_codes_expiry ON pairing_codes(platform, expires_at)",
        """
        CREATE TABLE pairing_users (
            platform     TEXT NOT NULL,
            user_id      TEXT NOT NULL,
            display_name TEXT NOT NULL DEFAULT '',
            approved_at  REAL NOT NULL,
            approved_by  TEXT NOT NULL,
            revoked_at   REAL,
            revoked_by   TEXT,
            PRIMARY KEY (platform, user_id)
        )
        """,
        """
        CREATE TABLE pairing_events (
            id       INTEGER PRIMARY KEY AUTOINCREMENT,
            kind     TEXT NOT NULL,
            platform TEXT NOT NULL DEFAULT '',
            user_id  TEXT NOT NULL DEFAULT '',
            at       REAL NOT NULL
        )
        """,
        "CREATE INDEX pairing_events_count ON pairing_events(kind, platform, user_id, at)",
        "CREATE INDEX pairing_events_age ON pairing_events(at)",
        """
        CREATE TABLE pairing_speakers (
            adapter  TEXT NOT NULL,
            chat     TEXT NOT NULL,
            thread   TEXT NOT NULL DEFAULT '',
            user_id  TEXT NOT NULL,
            first_at REAL NOT NULL,
            last_at  REAL NOT NULL,
            PRIMARY KEY (adapter, chat, thread, user_id)
        )
        """,
    ),
)

# Gateways sharing a store claim the outbox entries they send (see
# GatewayTables.outbox_claim). A claim is only ever checked against a chat's older pending
# entries, hence the index by chat over the pending ones.
_V6_OUTBOX_CLAIMS = Migration(
    6,
    "outbox claims",
    (
        "ALTER TABLE gateway_outbox ADD COLUMN claimed_by TEXT",
        "ALTER TABLE gateway_outbox ADD COLUMN claim_until REAL",
        "CREATE INDEX gateway_outbox_pending_chat ON gateway_outbox(adapter, chat, thread, user_key, id)"
        " WHERE status = 'pending'",
    ),
)

# Deaths of the process under an inbox entry's turn, counted to tell a poisonous message from
# one that was only interrupted (see GatewayTables.inbox_interrupted). A set-aside entry is a
# new status value; the column has no check to change.
_V7_INBOX_DEATHS = Migration(
    7,
    "inbox deaths",
    ("ALTER TABLE gateway_inbox ADD COLUMN deaths INTEGER NOT NULL DEFAULT 0",),
)

# Side sessions (/background) point at the session they were forked from. No foreign key: the
# deletion of that session clears the link itself (SQLiteSessions.delete_sessions), and a copy
# between backends may bring the rows in any order.
_V8_FORKS = Migration(
    8,
    "session forks",
    (
        "ALTER TABLE sessions ADD COLUMN forked_from TEXT",
        "CREATE INDEX sessions_forked ON sessions(forked_from) WHERE forked_from IS NOT NULL",
    ),
)

MIGRATIONS: tuple[Migration, ...] = (
    _V1_CORE, _V2_PROMPTS_USAGE_FTS, _V3_GATEWAY, _V4_PACKED_MESSAGES, _V5_PAIRING, _V6_OUTBOX_CLAIMS,
    _V7_INBOX_DEATHS, _V8_FORKS,
)
LATEST_VERSION: int = MIGRATIONS[-1].version

_CREATE_LEDGER = """
    CREATE TABLE IF NOT EXISTS schema_migrations (
        version    INTEGER PRIMARY KEY,
        applied_at REAL NOT NULL
    )
"""


def applied_version(conn: sqlite3.Connection) -> int:
    """The highest migration recorded in ``conn``'s database; 0 for a database without any."""
    has_ledger = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if not has_ledger:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection, target: int | None = None, *, now: float | None = None) -> int:
    """Apply the pending migrations up to ``target`` (default: the latest); return the version.

    ``conn`` must not be inside a transaction. A database already at or past ``target`` is left
    alone; deciding whether a newer database is acceptable is the caller's business.
    """
    goal = LATEST_VERSION if target is None else target
    if not 0 <= goal <= LATEST_VERSION:
        raise ValueError(f"no migration {goal}: this vigil knows versions 1 to {LATEST_VERSION}")
    for migration in MIGRATIONS[applied_version(conn) : goal]:
        _apply(conn, migration, time.time() if now is None else now)
    return applied_version(conn)


def _apply(conn: sqlite3.Connection, migration: Migration, now: float) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_CREATE_LEDGER)
        # Re-read under the write lock: another process may have applied it a moment ago.
        if applied_version(conn) < migration.version:
            for statement in migration.statements:
                if isinstance(statement, str):
                    conn.execute(statement)
                else:
                    statement(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (migration.version, now),
            )
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
