"""Numbered, forward-only schema migrations of the PostgreSQL store.

Everything lives in one PostgreSQL schema (``vigil`` unless configured), so several stores can
share a database. Pending migrations are applied in one transaction holding an advisory lock
on the schema's name, together with their rows in ``schema_migrations``: processes opening a
fresh schema at the same moment wait for each other and apply each migration once, and a
failure leaves the schema as it was. Released migrations are never edited; a change to the
schema is a new migration at the end of the list. Statements name the schema as ``{s}``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from vigil.store.errors import SchemaTooNew, StoreUnreadable

SEARCH_CONFIG = "{s}.search_words"
"""The text search configuration of ``messages.words``; queries must use the same one."""
INDEXED_CHARS = 100_000
"""Only this much of a message is indexed: PostgreSQL refuses a tsvector over 1 MB."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``version`` is its position (1-based), ``statements`` run in order."""

    version: int
    name: str
    statements: tuple[str, ...]


_V1_CORE = Migration(
    1,
    "sessions, messages, system prompts, state_meta, full-text search",
    (
        # Words are stemmed like SQLite's porter tokenizer and, like it, no word is a stop
        # word: "not" or "the" in a query must still have to match.
        "CREATE TEXT SEARCH DICTIONARY {s}.english_stem_all"
        " (TEMPLATE = pg_catalog.snowball, LANGUAGE = english)",
        f"CREATE TEXT SEARCH CONFIGURATION {SEARCH_CONFIG} (COPY = pg_catalog.english)",
        f"ALTER TEXT SEARCH CONFIGURATION {SEARCH_CONFIG}"
        " ALTER MAPPING REPLACE pg_catalog.english_stem WITH {s}.english_stem_all",
        # ASCII punctuation separates words, as in SQLite's tokenizer; PostgreSQL's parser
        # would otherwise keep "src/vigil/store.py" or "example.com" as one unsearchable
        # token. An escaped NUL (see text.py) separates words too.
        rf"""
        CREATE FUNCTION {{s}}.search_text(content text) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT pg_catalog.regexp_replace(
                pg_catalog.left(COALESCE(content, ''), {INDEXED_CHARS}),
                E'(\uFDD0[0\uFDD0]?|[\x01-\x2F\x3A-\x40\x5B-\x60\x7B-\x7F])+', ' ', 'g')
        $$
        """,
        # AND of many tsqueries: a query needs every one of its words.
        "CREATE AGGREGATE {s}.all_of(tsquery) (SFUNC = pg_catalog.tsquery_and, STYPE = tsquery)",
        """
        CREATE TABLE {s}.system_prompts (
            hash       text COLLATE "C" PRIMARY KEY,
            text       text NOT NULL,
            created_at double precision NOT NULL
        )
        """,
        # Ids and keys compare as code points (COLLATE "C"), as in SQLite, which also lets the
        # primary key indexes serve prefix searches (LIKE 'abc%').
        """
        CREATE TABLE {s}.sessions (
            id                 text COLLATE "C" PRIMARY KEY,
            created_order      bigint GENERATED ALWAYS AS IDENTITY,
            source             text NOT NULL,
            title              text,
            parent_id          text COLLATE "C" REFERENCES {s}.sessions(id) ON DELETE SET NULL,
            end_reason         text,
            started_at         double precision NOT NULL,
            ended_at           double precision,
            updated_at         double precision NOT NULL,
            model              text,
            model_config       text NOT NULL DEFAULT '{}',
            system_prompt_hash text COLLATE "C" REFERENCES {s}.system_prompts(hash),
            tool_names         text NOT NULL DEFAULT '[]',
            message_count      bigint NOT NULL DEFAULT 0,
            input_tokens       bigint NOT NULL DEFAULT 0,
            cache_read_tokens  bigint NOT NULL DEFAULT 0,
            cache_write_tokens bigint NOT NULL DEFAULT 0,
            output_tokens      bigint NOT NULL DEFAULT 0
        )
        """,
        "CREATE INDEX sessions_recent ON {s}.sessions (updated_at DESC, created_order DESC)",
        "CREATE INDEX sessions_source_recent ON {s}.sessions (source, updated_at DESC, created_order DESC)",
        "CREATE INDEX sessions_children ON {s}.sessions (parent_id, started_at, created_order)",
        f"""
        CREATE TABLE {{s}}.messages (
            id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id         text COLLATE "C" NOT NULL REFERENCES {{s}}.sessions(id) ON DELETE CASCADE,
            seq                bigint NOT NULL,
            role               text NOT NULL,
            content            text,
            tool_calls         text NOT NULL DEFAULT '[]',
            tool_call_id       text,
            tool_name          text,
            created_at         double precision NOT NULL,
            input_tokens       bigint NOT NULL DEFAULT 0,
            cache_read_tokens  bigint NOT NULL DEFAULT 0,
            cache_write_tokens bigint NOT NULL DEFAULT 0,
            output_tokens      bigint NOT NULL DEFAULT 0,
            meta               text NOT NULL DEFAULT '{{}}',
            words              tsvector GENERATED ALWAYS AS
                (pg_catalog.to_tsvector('{SEARCH_CONFIG}'::regconfig, {{s}}.search_text(content))) STORED,
            UNIQUE (session_id, seq)
        )
        """,
        "CREATE INDEX messages_words ON {s}.messages USING gin (words)",
        """
        CREATE TABLE {s}.state_meta (
            key        text COLLATE "C" PRIMARY KEY,
            value      text NOT NULL,
            updated_at double precision NOT NULL
        )
        """,
    ),
)

# Routes go with their session (ON DELETE CASCADE): a deleted conversation is no longer
# where a platform chat talks to. The inbox and outbox only record which session a message
# went to or came from (no foreign key): their history, and a reply still to be sent, outlive
# the session. created_order breaks ties between routes created at the same moment.
_V2_GATEWAY = Migration(
    2,
    "gateway routes, inbox and outbox",
    (
        """
        CREATE TABLE {s}.gateway_routes (
            adapter       text COLLATE "C" NOT NULL,
            chat          text COLLATE "C" NOT NULL,
            thread        text COLLATE "C" NOT NULL DEFAULT '',
            user_key      text COLLATE "C" NOT NULL DEFAULT '',
            session_id    text COLLATE "C" NOT NULL REFERENCES {s}.sessions(id) ON DELETE CASCADE,
            created_at    double precision NOT NULL,
            updated_at    double precision NOT NULL,
            created_order bigint GENERATED ALWAYS AS IDENTITY,
            PRIMARY KEY (adapter, chat, thread, user_key)
        )
        """,
        "CREATE INDEX gateway_routes_session ON {s}.gateway_routes (session_id, created_at, created_order)",
        """
        CREATE TABLE {s}.gateway_inbox (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            adapter     text COLLATE "C" NOT NULL,
            chat        text COLLATE "C" NOT NULL,
            thread      text COLLATE "C" NOT NULL DEFAULT '',
            user_key    text COLLATE "C" NOT NULL DEFAULT '',
            external_id text COLLATE "C" NOT NULL,
            text        text NOT NULL,
            sender      text NOT NULL DEFAULT '',
            received_at double precision NOT NULL,
            status      text NOT NULL DEFAULT 'pending',
            session_id  text COLLATE "C",
            attempts    integer NOT NULL DEFAULT 0,
            started_at  double precision,
            finished_at double precision,
            error       text,
            meta        text NOT NULL DEFAULT '{}',
            UNIQUE (adapter, external_id)
        )
        """,
        "CREATE INDEX gateway_inbox_unfinished ON {s}.gateway_inbox (status, id)",
        """
        CREATE TABLE {s}.gateway_outbox (
            id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            adapter         text COLLATE "C" NOT NULL,
            chat            text COLLATE "C" NOT NULL,
            thread          text COLLATE "C" NOT NULL DEFAULT '',
            user_key        text COLLATE "C" NOT NULL DEFAULT '',
            kind            text NOT NULL,
            text            text NOT NULL,
            session_id      text COLLATE "C",
            inbox_id        bigint,
            created_at      double precision NOT NULL,
            status          text NOT NULL DEFAULT 'pending',
            attempts        integer NOT NULL DEFAULT 0,
            next_attempt_at double precision NOT NULL,
            last_error      text,
            sent_at         double precision,
            failed_at       double precision,
            meta            text NOT NULL DEFAULT '{}'
        )
        """,
        "CREATE INDEX gateway_outbox_pending ON {s}.gateway_outbox (next_attempt_at) WHERE status = 'pending'",
        "CREATE INDEX gateway_outbox_status ON {s}.gateway_outbox (status, id)",
    ),
)

# Who may talk to the agent from a platform (see store/pairing_tables.py). Codes are kept as
# their SHA-256 only. No foreign keys: a pairing is about a platform user, not a session.
_V3_PAIRING = Migration(
    3,
    "pairing codes, paired users, rate-limit events, chat speakers",
    (
        """
        CREATE TABLE {s}.pairing_codes (
            platform     text COLLATE "C" NOT NULL,
            user_id      text COLLATE "C" NOT NULL,
            display_name text NOT NULL DEFAULT '',
            chat         text COLLATE "C" NOT NULL,
            thread       text COLLATE "C" NOT NULL DEFAULT '',
            user_key     text COLLATE "C" NOT NULL DEFAULT '',
            code_hash    text COLLATE "C" NOT NULL UNIQUE,
            nonce        text NOT NULL,
            created_at   double precision NOT NULL,
            expires_at   double precision NOT NULL,
            PRIMARY KEY (platform, user_id)
        )
        """,
        "CREATE INDEX pairing_codes_expiry ON {s}.pairing_codes (platform, expires_at)",
        """
        CREATE TABLE {s}.pairing_users (
            platform     text COLLATE "C" NOT NULL,
            user_id      text COLLATE "C" NOT NULL,
            display_name text NOT NULL DEFAULT '',
            approved_at  double precision NOT NULL,
            approved_by  text NOT NULL,
            revoked_at   double precision,
            revoked_by   text,
            PRIMARY KEY (platform, user_id)
        )
        """,
        """
        CREATE TABLE {s}.pairing_events (
            id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind     text COLLATE "C" NOT NULL,
            platform text COLLATE "C" NOT NULL DEFAULT '',
            user_id  text COLLATE "C" NOT NULL DEFAULT '',
            at       double precision NOT NULL
        )
        """,
        "CREATE INDEX pairing_events_count ON {s}.pairing_events (kind, platform, user_id, at)",
        "CREATE INDEX pairing_events_age ON {s}.pairing_events (at)",
        """
        CREATE TABLE {s}.pairing_speakers (
            adapter  text COLLATE "C" NOT NULL,
            chat     text COLLATE "C" NOT NULL,
            thread   text COLLATE "C" NOT NULL DEFAULT '',
            user_id  text COLLATE "C" NOT NULL,
            first_at double precision NOT NULL,
            last_at  double precision NOT NULL,
            PRIMARY KEY (adapter, chat, thread, user_id)
        )
        """,
    ),
)

# Gateways sharing a store claim the outbox entries they send (see
# GatewayTables.outbox_claim). A claim is only ever checked against a chat's older pending
# entries, hence the index by chat over the pending ones.
_V4_OUTBOX_CLAIMS = Migration(
    4,
    "outbox claims",
    (
        "ALTER TABLE {s}.gateway_outbox ADD COLUMN claimed_by text COLLATE \"C\"",
        "ALTER TABLE {s}.gateway_outbox ADD COLUMN claim_until double precision",
        "CREATE INDEX gateway_outbox_pending_chat ON {s}.gateway_outbox (adapter, chat, thread, user_key, id)"
        " WHERE status = 'pending'",
    ),
)

# Deaths of the process under an inbox entry's turn, counted to tell a poisonous message from
# one that was only interrupted (see GatewayTables.inbox_interrupted). A set-aside entry is a
# new status value; the column has no check to change.
_V5_INBOX_DEATHS = Migration(
    5,
    "inbox deaths",
    ("ALTER TABLE {s}.gateway_inbox ADD COLUMN deaths integer NOT NULL DEFAULT 0",),
)

# Side sessions (/background) point at the session they were forked from. No foreign key, as
# in SQLite: deleting that session clears the link (PostgresSessions.delete_sessions), and a
# copy from SQLite may bring the rows in any order.
_V6_FORKS = Migration(
    6,
    "session forks",
    (
        'ALTER TABLE {s}.sessions ADD COLUMN forked_from text COLLATE "C"',
        "CREATE INDEX sessions_forked ON {s}.sessions (forked_from, started_at, created_order)"
        " WHERE forked_from IS NOT NULL",
    ),
)

MIGRATIONS: tuple[Migration, ...] = (
    _V1_CORE, _V2_GATEWAY, _V3_PAIRING, _V4_OUTBOX_CLAIMS, _V5_INBOX_DEATHS, _V6_FORKS,
)
LATEST_VERSION: int = MIGRATIONS[-1].version

# pg_advisory_xact_lock(class, key): the class keeps vigil's locks apart from other programs'.
_LOCK_CLASS = 0x76696769  # "vigi"

_CREATE_LEDGER = """
    CREATE TABLE IF NOT EXISTS {s}.schema_migrations (
        version    integer PRIMARY KEY,
        applied_at double precision NOT NULL
    )
"""


def in_schema(statement: str, schema: str) -> str:
    """``statement`` with ``{s}`` naming ``schema`` (a checked name, see ``parse_target``)."""
    return statement.replace("{s}", f'"{schema}"')


def applied_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """The highest migration recorded in ``schema``; 0 if it has none (or does not exist)."""
    cur = conn.cursor(row_factory=tuple_row)
    found = cur.execute("SELECT pg_catalog.to_regclass(%s)", (f'"{schema}".schema_migrations',)).fetchone()
    if found is None or found[0] is None:
        return 0
    row = cur.execute(in_schema("SELECT MAX(version) FROM {s}.schema_migrations", schema)).fetchone()
    return int(row[0] or 0) if row else 0


def open_schema(conn: psycopg.Connection[Any], schema: str, where: str, *, now: float) -> int:
    """Check that ``schema`` can be used by this vigil and migrate it to the latest version.

    Raises ``StoreUnreadable`` for a schema holding another program's tables and
    ``SchemaTooNew`` for one written by a newer vigil; in both cases nothing is changed.
    """
    with conn.transaction():
        _lock(conn, schema)
        version = applied_version(conn, schema)
        if version == 0 and _holds_relations(conn, schema):
            raise StoreUnreadable(
                f"PostgreSQL schema '{schema}' at {where} holds tables of some other program, not "
                "a vigil session store; it was left untouched - choose another schema (?schema=NAME)"
            )
        if version > LATEST_VERSION:
            raise SchemaTooNew(
                f"PostgreSQL schema '{schema}' at {where} was written by a newer vigil (schema "
                f"{version}, this vigil knows up to {LATEST_VERSION}); upgrade vigil"
            )
        return _apply_pending(conn, schema, LATEST_VERSION, now)


def migrate(
    conn: psycopg.Connection[Any], schema: str, target: int | None = None, *, now: float | None = None
) -> int:
    """Apply the pending migrations up to ``target`` (default: the latest); return the version.

    A schema already at or past ``target`` is left alone. Runs in a transaction of its own, or
    in a savepoint when ``conn`` is already in one.
    """
    goal = LATEST_VERSION if target is None else target
    if not 0 <= goal <= LATEST_VERSION:
        raise ValueError(f"no migration {goal}: this vigil knows versions 1 to {LATEST_VERSION}")
    with conn.transaction():
        _lock(conn, schema)
        return _apply_pending(conn, schema, goal, time.time() if now is None else now)


def _lock(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(
        "SELECT pg_catalog.pg_advisory_xact_lock(%s::int4, pg_catalog.hashtext(%s))", (_LOCK_CLASS, schema)
    )


def _holds_relations(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s)",
        (schema,),
    ).fetchone()
    return bool(row and row[0])


def _apply_pending(conn: psycopg.Connection[Any], schema: str, goal: int, now: float) -> int:
    """Run under the lock, so the version read here cannot change before the commit."""
    version = applied_version(conn, schema)
    pending = MIGRATIONS[version:goal]
    if not pending:
        return version
    conn.execute(in_schema("CREATE SCHEMA IF NOT EXISTS {s}", schema))
    conn.execute(in_schema(_CREATE_LEDGER, schema))
    for migration in pending:
        for statement in migration.statements:
            conn.execute(in_schema(statement, schema))
        conn.execute(
            in_schema("INSERT INTO {s}.schema_migrations (version, applied_at) VALUES (%s, %s)", schema),
            (migration.version, now),
        )
    return pending[-1].version
