"""The scale-out session store: PostgreSQL, shared by any number of vigil processes and machines."""

from __future__ import annotations

import json
import threading
from functools import partial
from typing import Any, Iterable, Sequence, cast

import psycopg

from vigil.clock import Clock, SystemClock
from vigil.store.base import UNSET, ConfigUpdate, ModelConfigChange
from vigil.store.checks import (
    check_dict,
    check_key,
    check_limit,
    check_message,
    check_names,
    check_prompt,
)
from vigil.store.conversations import COMPRESSION, collapse
from vigil.store.deletions import DELETED_KEY, TOTALS_OF_SESSIONS, Deleted, deleted_of_row
from vigil.store.errors import AmbiguousSession, SessionNotFound, StoreError
from vigil.store.ids import check_session_id, is_session_ref, new_session_id, prompt_hash
from vigil.store.postgres import meta
from vigil.store.meta_batch import encode_swaps
from vigil.store.postgres.conn import Database, parse_target
from vigil.store.postgres.gateway_tables import PostgresGatewayTables
from vigil.store.postgres.pairing_tables import PostgresPairingTables
from vigil.store.postgres.retry import Retried, retried
from vigil.store.postgres.migrations import applied_version, open_schema
from vigil.store.postgres.notify import PostgresNotifications
from vigil.store.postgres.search import search_messages
from vigil.store.postgres.text import ESCAPE, unescape
from vigil.store.records import (
    ConversationHead,
    MessageRecord,
    MetaEntry,
    MetaSwap,
    NewMessage,
    SearchHit,
    SessionRecord,
)
from vigil.store.rows import MESSAGE_COLUMNS, MESSAGE_SELECT, canonical_json, messages_from_rows, session_from_row

_SESSION_COLUMNS = (
    "id, source, title, parent_id, end_reason, started_at, ended_at, updated_at, model, "
    "model_config, system_prompt_hash, tool_names, message_count, "
    "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens"
)
_MESSAGE_COLUMNS = MESSAGE_COLUMNS
# created_order breaks ties between equal timestamps (a fake clock, a fast machine).
_MOST_RECENT_FIRST = "ORDER BY updated_at DESC, created_order DESC"
_OLDEST_START_FIRST = "ORDER BY started_at, created_order"


class PostgresStore:
    """``SessionStore`` on a PostgreSQL server, safe to share between threads, processes and hosts.

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/dbname``); the tables live in
    the PostgreSQL schema named by ``schema`` or the URL's ``?schema=`` (default ``vigil``),
    which is created and migrated to the newest version if needed. Raises ``StoreError`` when
    the server cannot be reached (the message names user, host, port and database, never the
    password), ``StoreUnreadable`` for a schema of another program and ``SchemaTooNew`` for
    one written by a newer vigil.

    Every method (but ``schema_version``) is one transaction, run again whole on another
    connection while the server cannot be reached or a connection is lost under it, for up to
    30 s (see ``postgres.retry``); after that it raises ``StoreUnavailable``.

    Differences from SQLite a person could notice: search does not fold diacritics ("cafe"
    does not find "café") and indexes the first 100,000 characters of a message.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        clock: Clock | None = None,
        max_connections: int = 8,
    ) -> None:
        self._clock: Clock = clock or SystemClock()
        target = parse_target(url, schema)
        self.schema = target.schema
        self.where = target.where
        self._db = Database(
            target,
            lambda conn: open_schema(conn, target.schema, target.where, now=self._clock.now()),
            max_size=max_connections,
        )
        self._run = self._db.run
        # Each of their methods is one transaction too, run again whole like the store's own.
        self._gateway = cast(PostgresGatewayTables, Retried(PostgresGatewayTables(self._db), self._db.retry))
        self._pairing = cast(PostgresPairingTables, Retried(PostgresPairingTables(self._db, target.schema), self._db.retry))
        self._notifications: PostgresNotifications | None = None
        self._notifications_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PostgresStore({self.where}, schema={self.schema})"

    @property
    def gateway(self) -> PostgresGatewayTables:
        """The gateway's routes, inbox and outbox in this schema (see ``store.gateway_tables``)."""
        return self._gateway

    @property
    def pairing(self) -> PostgresPairingTables:
        """Pairing codes and paired platform users in this schema (see ``store.pairing_tables``)."""
        return self._pairing

    def schema_version(self) -> int:  # not retried: /healthz asks it, and wants the present state
        with self._db.read() as conn:
            return applied_version(conn, self.schema)

    def check_writable(self) -> None:
        """Nothing to look at here: the server refuses a write itself when its disk is full or
        it is read-only (``StoreUnwritable``), and /healthz's read shows whether it answers."""

    def close(self) -> None:
        with self._notifications_lock:
            notifications, self._notifications = self._notifications, None
        if notifications is not None:
            notifications.close()  # first: it sends what is queued through the pool
        self._db.close()

    def notifications(self) -> PostgresNotifications:
        """``LISTEN``/``NOTIFY`` between every process on this schema: one instance per store
        object, started on first use (see ``store.postgres.notify``)."""
        with self._notifications_lock:
            if self._notifications is None:
                self._notifications = PostgresNotifications(self._db, self.schema)
            return self._notifications

    # -- sessions -------------------------------------------------------------------------
    @retried
    def create_session(
        self,
        *,
        source: str,
        model: str | None = None,
        model_config: dict[str, Any] | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        tool_names: Iterable[str] = (),
        system_prompt: str | None = None,
        session_id: str | None = None,
        started_at: float | None = None,
    ) -> SessionRecord:
        if not source:
            raise ValueError("a session needs a source")
        config_json = canonical_json(check_dict(model_config or {}, "model_config"))
        tools_json = canonical_json(check_names(tool_names))
        if session_id is not None:
            check_session_id(session_id)
        check_prompt(system_prompt)
        now = self._clock.now() if started_at is None else started_at
        with self._db.write() as conn:
            if parent_id is not None and not self._exists(conn, parent_id):
                raise SessionNotFound(parent_id)
            hash_ = None if system_prompt is None else self._put_prompt(conn, system_prompt, now)
            while True:
                candidate = new_session_id() if session_id is None else session_id
                try:
                    row = self._run(
                        conn,
                        "INSERT INTO {s}.sessions (id, source, title, parent_id, started_at, updated_at,"
                        " model, model_config, system_prompt_hash, tool_names)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                        f" ON CONFLICT (id) DO NOTHING RETURNING {_SESSION_COLUMNS}",
                        (candidate, source, title, parent_id, now, now, model, config_json, hash_,
                         tools_json),
                    ).fetchone()
                except psycopg.errors.ForeignKeyViolation as exc:  # the parent was deleted just now
                    raise SessionNotFound(parent_id or "") from exc
                if row is not None:
                    return session_from_row(row)
                if session_id is not None:
                    raise StoreError(f"a session with id {session_id} already exists")

    @retried
    def get_session(self, session_id: str) -> SessionRecord:
        with self._db.read() as conn:
            return session_from_row(self._session_row(conn, session_id))

    @retried
    def resolve_session(self, ref: str) -> str:
        if not is_session_ref(ref):
            raise SessionNotFound(ref)
        with self._db.read() as conn:
            # ref is hex only, so it cannot smuggle LIKE wildcards in.
            rows = self._run(
                conn, "SELECT id FROM {s}.sessions WHERE id LIKE %s || '%%' ORDER BY id", (ref,)
            ).fetchall()
        ids: list[str] = [r["id"] for r in rows]
        if ref in ids:
            return ref
        if not ids:
            raise SessionNotFound(ref)
        if len(ids) > 1:
            raise AmbiguousSession(ref, ids)
        return ids[0]

    @retried
    def list_sessions(self, *, limit: int | None = None, source: str | None = None) -> list[SessionRecord]:
        return self._recent_sessions(limit, source, lenient=True)

    @retried
    def latest_session(self, *, source: str | None = None) -> SessionRecord | None:
        found = self._recent_sessions(1, source, lenient=False)
        return found[0] if found else None

    def _recent_sessions(
        self, limit: int | None, source: str | None, *, lenient: bool
    ) -> list[SessionRecord]:
        where, params = ("WHERE source = %s", (source,)) if source is not None else ("", ())
        with self._db.read() as conn:
            rows = self._run(
                conn,
                f"SELECT {_SESSION_COLUMNS} FROM {{s}}.sessions {where} {_MOST_RECENT_FIRST} LIMIT %s",
                (*params, _sql_limit(limit)),
            ).fetchall()
        return [session_from_row(r, lenient=lenient) for r in rows]

    @retried
    def list_conversations(self, *, limit: int | None = None) -> list[ConversationHead]:
        if limit is not None:
            check_limit(limit)
        with self._db.read() as conn:
            # Of several continuations of one session, collapse takes the one started last.
            rows = self._run(
                conn, f"SELECT {_SESSION_COLUMNS} FROM {{s}}.sessions {_OLDEST_START_FIRST}"
            ).fetchall()
        chains = collapse(rows)
        if limit is not None:
            chains = chains[:limit]
        return [
            ConversationHead(c.root_id, session_from_row(c.head, lenient=True), c.segments) for c in chains
        ]

    @retried
    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = UNSET,
        model: str | None = UNSET,
        model_config: ModelConfigChange = UNSET,
        tool_names: Iterable[str] = UNSET,
    ) -> SessionRecord:
        changes: dict[str, Any] = {}
        if title is not UNSET:
            changes["title"] = title
        if model is not UNSET:
            changes["model"] = model
        if model_config is not UNSET and not callable(model_config):
            changes["model_config"] = canonical_json(check_dict(model_config, "model_config"))
        if tool_names is not UNSET:
            changes["tool_names"] = canonical_json(check_names(tool_names))
        if not changes and not callable(model_config):
            return self.get_session(session_id)
        with self._db.write() as conn:
            if callable(model_config):
                changes["model_config"] = self._updated_config(conn, session_id, model_config)
            assignments = ", ".join(f"{column} = %s" for column in changes)  # fixed names only
            row = self._run(
                conn,
                f"UPDATE {{s}}.sessions SET {assignments} WHERE id = %s RETURNING {_SESSION_COLUMNS}",
                (*changes.values(), session_id),
            ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return session_from_row(row)

    @retried
    def set_session_prompt(
        self, session_id: str, prompt: str, *, model_config: ModelConfigChange | None = None
    ) -> str:
        check_prompt(prompt)
        config_json = (
            None
            if model_config is None or callable(model_config)
            else canonical_json(check_dict(model_config, "model_config"))
        )
        with self._db.write() as conn:
            if callable(model_config):
                config_json = self._updated_config(conn, session_id, model_config)
            hash_ = self._put_prompt(conn, prompt, self._clock.now())
            updated = self._run(
                conn,
                "UPDATE {s}.sessions SET system_prompt_hash = %s,"
                " model_config = COALESCE(%s, model_config) WHERE id = %s RETURNING id",
                (hash_, config_json, session_id),
            ).fetchone()
            if updated is None:  # raising rolls the prompt back too
                raise SessionNotFound(session_id)
        return hash_

    def _updated_config(self, conn: Any, session_id: str, update: ConfigUpdate) -> str:
        """Apply ``update`` to the stored configuration with the row locked, in ``conn``'s
        transaction, so concurrent updates queue instead of overwriting each other."""
        row = self._run(
            conn,
            f"SELECT {_SESSION_COLUMNS} FROM {{s}}.sessions WHERE id = %s FOR UPDATE",
            (session_id,),
        ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        current = session_from_row(row).model_config
        return canonical_json(check_dict(update(dict(current)), "model_config"))

    @retried
    def end_session(self, session_id: str, reason: str, *, ended_at: float | None = None) -> None:
        if not reason:
            raise ValueError("ending a session needs a reason")
        when = self._clock.now() if ended_at is None else ended_at
        with self._db.write() as conn:
            ended = self._run(
                conn,
                "UPDATE {s}.sessions SET ended_at = %s, end_reason = %s,"
                " updated_at = GREATEST(updated_at, %s) WHERE id = %s AND ended_at IS NULL",
                (when, reason, when, session_id),
            ).rowcount
            if not ended and not self._exists(conn, session_id):
                raise SessionNotFound(session_id)

    @retried
    def reopen_session(self, session_id: str) -> None:
        with self._db.write() as conn:
            reopened = self._run(
                conn,
                "UPDATE {s}.sessions SET ended_at = NULL, end_reason = NULL,"
                " updated_at = GREATEST(updated_at, %s) WHERE id = %s",
                (self._clock.now(), session_id),
            ).rowcount
        if not reopened:
            raise SessionNotFound(session_id)

    @retried
    def delete_session(self, session_id: str) -> None:
        self.delete_sessions([session_id])

    @retried
    def delete_sessions(self, session_ids: Sequence[str]) -> Deleted:
        wanted = list(dict.fromkeys(session_ids))
        now = self._clock.now()
        with self._db.write() as conn:
            # Locks the rows, so what is counted is exactly what is deleted.
            found = self._run(
                conn, "SELECT id FROM {s}.sessions WHERE id = ANY(%s) FOR UPDATE", (wanted,)
            ).fetchall()
            missing = set(wanted) - {r["id"] for r in found}
            if missing:
                raise SessionNotFound(min(missing))
            gone = deleted_of_row(
                self._run(
                    conn, f"SELECT {TOTALS_OF_SESSIONS} FROM {{s}}.sessions WHERE id = ANY(%s)", (wanted,)
                ).fetchone()
            )
            # The foreign keys do the rest: messages go (and their search entries with them),
            # children stay with no parent.
            self._run(conn, "DELETE FROM {s}.sessions WHERE id = ANY(%s)", (wanted,))
            self._add_deleted(conn, gone, now)
        return gone

    def _add_deleted(self, conn: psycopg.Connection[Any], gone: Deleted, now: float) -> None:
        """Add ``gone`` to the totals in ``state_meta``, its row locked: concurrent deletions
        queue here instead of overwriting each other's counts."""
        run = partial(self._run, conn)
        run(
            "INSERT INTO {s}.state_meta (key, value, updated_at) VALUES (%s, '{}', %s)"
            " ON CONFLICT (key) DO NOTHING",
            (DELETED_KEY, now),
        )
        row = run("SELECT value FROM {s}.state_meta WHERE key = %s FOR UPDATE", (DELETED_KEY,)).fetchone()
        try:
            before = json.loads(row["value"])
        except ValueError:
            before = None
        meta.put(run, DELETED_KEY, canonical_json((gone + Deleted.from_json(before)).to_json()), now)

    @retried
    def conversation_sessions(self, session_id: str) -> list[SessionRecord]:
        with self._db.read() as conn:
            rows = self._run(
                conn,
                "WITH RECURSIVE up AS ("
                " SELECT id, parent_id, 0 AS depth, ARRAY[id] AS path FROM {s}.sessions WHERE id = %s"
                " UNION ALL SELECT p.id, p.parent_id, u.depth + 1, u.path || p.id"
                " FROM up u JOIN {s}.sessions p ON p.id = u.parent_id WHERE p.id <> ALL (u.path)"
                "), root AS (SELECT id FROM up ORDER BY depth DESC LIMIT 1),"
                " down AS (SELECT id FROM root UNION"
                " SELECT s.id FROM {s}.sessions s JOIN down d ON s.parent_id = d.id)"
                f" SELECT {_SESSION_COLUMNS} FROM {{s}}.sessions WHERE id IN (SELECT id FROM down)"
                f" {_OLDEST_START_FIRST}",
                (session_id,),
            ).fetchall()
        if not rows:
            raise SessionNotFound(session_id)
        return [session_from_row(r, lenient=True) for r in rows]

    @retried
    def parent_chain(self, session_id: str) -> list[SessionRecord]:
        with self._db.read() as conn:
            rows = self._run(
                conn,
                "WITH RECURSIVE chain AS ("
                f" SELECT {_SESSION_COLUMNS}, 0 AS depth, ARRAY[id] AS path FROM {{s}}.sessions WHERE id = %s"
                f" UNION ALL SELECT {_prefixed('p', _SESSION_COLUMNS)}, c.depth + 1, c.path || p.id"
                " FROM chain c JOIN {s}.sessions p ON p.id = c.parent_id WHERE p.id <> ALL (c.path)"
                f") SELECT {_SESSION_COLUMNS} FROM chain ORDER BY depth DESC",
                (session_id,),
            ).fetchall()
        if not rows:
            raise SessionNotFound(session_id)
        return [session_from_row(r) for r in rows]

    @retried
    def newest_continuation(self, session_id: str) -> str:
        with self._db.read() as conn:
            if not self._exists(conn, session_id):
                raise SessionNotFound(session_id)
            current, seen = session_id, {session_id}
            while True:
                child = self._run(
                    conn,
                    "SELECT c.id FROM {s}.sessions c JOIN {s}.sessions p ON p.id = c.parent_id"
                    " WHERE c.parent_id = %s AND p.end_reason = %s"
                    " ORDER BY c.started_at DESC, c.created_order DESC LIMIT 1",
                    (current, COMPRESSION),
                ).fetchone()
                if child is None or child["id"] in seen:
                    return current
                current = child["id"]
                seen.add(current)

    # -- messages -------------------------------------------------------------------------
    @retried
    def append_message(
        self, session_id: str, message: NewMessage, *, created_at: float | None = None
    ) -> MessageRecord:
        check_message(message)
        usage = message.usage
        counts = (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens)
        calls_json = canonical_json([call.as_dict() for call in message.tool_calls])
        meta_json = canonical_json(message.meta)
        when = self._clock.now() if created_at is None else created_at
        with self._db.write() as conn:
            # Updating the session row first locks it until the commit: appends to one session
            # queue up here, so the next seq read below cannot be taken by anyone else.
            locked = self._run(
                conn,
                "UPDATE {s}.sessions SET message_count = message_count + 1,"
                " input_tokens = input_tokens + %s, cache_read_tokens = cache_read_tokens + %s,"
                " cache_write_tokens = cache_write_tokens + %s, output_tokens = output_tokens + %s,"
                " updated_at = GREATEST(updated_at, %s) WHERE id = %s",
                (*counts, when, session_id),
            ).rowcount
            if not locked:
                raise SessionNotFound(session_id)
            # A new statement, so a new snapshot: it sees every append committed before the lock.
            row = self._run(
                conn,
                f"INSERT INTO {{s}}.messages ({_MESSAGE_COLUMNS.removeprefix('id, ')}) VALUES (%s,"
                " (SELECT COALESCE(MAX(seq), 0) + 1 FROM {s}.messages WHERE session_id = %s),"
                " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id, seq",
                (
                    session_id,
                    session_id,
                    message.role,
                    message.content,
                    calls_json,
                    message.tool_call_id,
                    message.tool_name,
                    when,
                    *counts,
                    meta_json,
                ),
            ).fetchone()
        return MessageRecord(
            id=row["id"],
            session_id=session_id,
            seq=row["seq"],
            role=message.role,
            content=message.content,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            created_at=when,
            usage=usage,
            meta=json.loads(meta_json),
        )

    @retried
    def get_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[MessageRecord]:
        rows = self._db.query(
            f"SELECT {MESSAGE_SELECT}, NULL FROM {{s}}.messages"
            " WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s",
            (session_id, after_seq, _sql_limit(limit)),
        )
        if not rows and not self._db.query("SELECT 1 FROM {s}.sessions WHERE id = %s", (session_id,)):
            raise SessionNotFound(session_id)
        if _holds_escapes(rows):  # rare: text holding a NUL or the escape character
            rows = [tuple(unescape(v) if type(v) is str else v for v in row) for row in rows]
        return messages_from_rows(session_id, rows)

    @retried
    def search(self, query: str, *, limit: int = 20, session_id: str | None = None) -> list[SearchHit]:
        check_limit(limit)
        with self._db.read() as conn:
            return search_messages(partial(self._run, conn), query, limit, session_id)

    # -- system prompts -------------------------------------------------------------------
    @retried
    def put_prompt(self, text: str) -> str:
        check_prompt(text)
        with self._db.write() as conn:
            return self._put_prompt(conn, text, self._clock.now())

    @retried
    def get_prompt(self, prompt_hash: str) -> str | None:
        with self._db.read() as conn:
            row = self._run(
                conn, "SELECT text FROM {s}.system_prompts WHERE hash = %s", (prompt_hash,)
            ).fetchone()
        return None if row is None else row["text"]

    # -- state_meta -----------------------------------------------------------------------
    @retried
    def get_meta(self, key: str) -> MetaEntry | None:
        with self._db.read() as conn:
            return meta.get(partial(self._run, conn), key)

    @retried
    def set_meta(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``; ``None`` deletes the key, as in compare-and-set."""
        if value is None:
            self.delete_meta(key)
            return
        encoded = canonical_json(value)
        with self._db.write() as conn:
            meta.put(partial(self._run, conn), check_key(key), encoded, self._clock.now())

    @retried
    def delete_meta(self, key: str) -> bool:
        with self._db.write() as conn:
            return meta.delete(partial(self._run, conn), key)

    @retried
    def compare_and_set_meta(self, key: str, expected: Any, new: Any) -> bool:
        check_key(key)
        want = None if expected is None else canonical_json(expected)
        encoded = None if new is None else canonical_json(new)
        with self._db.write() as conn:
            return meta.compare_and_set(partial(self._run, conn), key, want, encoded, self._clock.now())

    @retried
    def get_meta_many(self, keys: Iterable[str]) -> dict[str, MetaEntry]:
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        with self._db.read() as conn:
            return meta.get_many(partial(self._run, conn), wanted)

    @retried
    def compare_and_set_many(self, swaps: Sequence[MetaSwap]) -> list[bool]:
        batch = encode_swaps(swaps)
        if not batch:
            return []
        with self._db.write() as conn:
            return meta.compare_and_set_many(partial(self._run, conn), batch, self._clock.now())

    @retried
    def list_meta(self, prefix: str) -> list[MetaEntry]:
        with self._db.read() as conn:
            return meta.with_prefix(partial(self._run, conn), prefix)

    # -- helpers that run inside a transaction --------------------------------------------
    def _exists(self, conn: psycopg.Connection[Any], session_id: str) -> bool:
        found = self._run(conn, "SELECT 1 FROM {s}.sessions WHERE id = %s", (session_id,)).fetchone()
        return found is not None

    def _session_row(self, conn: psycopg.Connection[Any], session_id: str) -> dict[str, Any]:
        row = self._run(
            conn, f"SELECT {_SESSION_COLUMNS} FROM {{s}}.sessions WHERE id = %s", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return row  # type: ignore[no-any-return]

    def _put_prompt(self, conn: psycopg.Connection[Any], text: str, now: float) -> str:
        hash_ = prompt_hash(text)
        # Storing the right text again heals a row whose text was damaged.
        self._run(
            conn,
            "INSERT INTO {s}.system_prompts AS p (hash, text, created_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (hash) DO UPDATE SET text = excluded.text WHERE p.text <> excluded.text",
            (hash_, text, now),
        )
        return hash_


def _holds_escapes(rows: list[tuple[Any, ...]]) -> bool:
    """Whether any text column of rows selected as ``MESSAGE_SELECT`` holds an escape (see
    postgres/text.py). Looking in Python costs a tenth of asking the server to look."""
    escape = ESCAPE
    return any(
        (r[3] is not None and escape in r[3])
        or (r[4] is not None and escape in r[4])
        or (r[5] is not None and escape in r[5])
        or (r[6] is not None and escape in r[6])
        or (r[12] is not None and escape in r[12])
        for r in rows
    )


def _prefixed(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


def _sql_limit(limit: int | None) -> int | None:
    return None if limit is None else check_limit(limit)
