"""Sessions in the PostgreSQL store: their rows, their chains of continuations and the system
prompts they point to. A part of :class:`vigil.store.postgres.store.PostgresStore` (see
``SessionStore`` in ``store.base`` for the contract of each method).

Every public method is one transaction, run again whole while the server cannot be reached
(``@retried``, see ``postgres.retry``).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, Callable, Iterable, Sequence

import psycopg

from vigil.clock import Clock
from vigil.store.base import UNSET, ConfigUpdate, ModelConfigChange
from vigil.store.checks import (
    check_limit,
    check_new_session,
    check_prompt,
    check_reason,
    optional_limit,
    prompt_config,
    session_changes,
    updated_config,
)
from vigil.store.conversations import COMPRESSION, collapse
from vigil.store.deletions import DELETED_KEY, TOTALS_OF_SESSIONS, Deleted, deleted_of_row
from vigil.store.errors import AmbiguousSession, SessionNotFound, StoreError
from vigil.store.ids import is_session_ref, new_session_id, prompt_hash
from vigil.store.postgres import meta
from vigil.store.postgres.conn import Database
from vigil.store.postgres.retry import retried
from vigil.store.records import ConversationHead, SessionRecord
from vigil.store.rows import SESSION_COLUMNS, canonical_json, session_from_row

# created_order breaks ties between equal timestamps (a fake clock, a fast machine).
_MOST_RECENT_FIRST = "ORDER BY updated_at DESC, created_order DESC"
_OLDEST_START_FIRST = "ORDER BY started_at, created_order"


class PostgresSessions:
    """The sessions part of ``PostgresStore``, which gives it ``_db``, ``_run`` and ``_clock``."""

    _db: Database
    _clock: Clock
    _run: Callable[..., "psycopg.Cursor[Any]"]

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
        forked_from: str | None = None,
    ) -> SessionRecord:
        config_json, tools_json = check_new_session(
            source=source, model_config=model_config, tool_names=tool_names, session_id=session_id,
            system_prompt=system_prompt,
        )
        now = self._clock.now() if started_at is None else started_at
        with self._db.write() as conn:
            if parent_id is not None and not self._exists(conn, parent_id):
                raise SessionNotFound(parent_id)
            # Locked against a deletion until this commits (no foreign key does it for a fork).
            if forked_from is not None and not self._exists(conn, forked_from, lock=True):
                raise SessionNotFound(forked_from)
            hash_ = None if system_prompt is None else self._put_prompt(conn, system_prompt, now)
            while True:
                candidate = new_session_id() if session_id is None else session_id
                try:
                    row = self._run(
                        conn,
                        "INSERT INTO {s}.sessions (id, source, title, parent_id, started_at, updated_at,"
                        " model, model_config, system_prompt_hash, tool_names, forked_from)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                        f" ON CONFLICT (id) DO NOTHING RETURNING {SESSION_COLUMNS}",
                        (candidate, source, title, parent_id, now, now, model, config_json, hash_,
                         tools_json, forked_from),
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
                f"SELECT {SESSION_COLUMNS} FROM {{s}}.sessions {where} {_MOST_RECENT_FIRST} LIMIT %s",
                (*params, optional_limit(limit)),
            ).fetchall()
        return [session_from_row(r, lenient=lenient) for r in rows]

    @retried
    def list_conversations(self, *, limit: int | None = None) -> list[ConversationHead]:
        if limit is not None:
            check_limit(limit)
        with self._db.read() as conn:
            # Of several continuations of one session, collapse takes the one started last.
            rows = self._run(
                conn, f"SELECT {SESSION_COLUMNS} FROM {{s}}.sessions {_OLDEST_START_FIRST}"
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
        changes = session_changes(title=title, model=model, model_config=model_config, tool_names=tool_names)
        if not changes and not callable(model_config):
            return self.get_session(session_id)
        with self._db.write() as conn:
            if callable(model_config):
                changes["model_config"] = self._updated_config(conn, session_id, model_config)
            assignments = ", ".join(f"{column} = %s" for column in changes)  # fixed names only
            row = self._run(
                conn,
                f"UPDATE {{s}}.sessions SET {assignments} WHERE id = %s RETURNING {SESSION_COLUMNS}",
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
        config_json = prompt_config(model_config)
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
            f"SELECT {SESSION_COLUMNS} FROM {{s}}.sessions WHERE id = %s FOR UPDATE",
            (session_id,),
        ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        current = session_from_row(row).model_config
        return updated_config(current, update)

    @retried
    def end_session(self, session_id: str, reason: str, *, ended_at: float | None = None) -> None:
        check_reason(reason)
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
            # children stay with no parent. Forks have no foreign key: they lose their link here.
            self._run(conn, "DELETE FROM {s}.sessions WHERE id = ANY(%s)", (wanted,))
            self._run(conn, "UPDATE {s}.sessions SET forked_from = NULL WHERE forked_from = ANY(%s)", (wanted,))
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
                f" SELECT {SESSION_COLUMNS} FROM {{s}}.sessions WHERE id IN (SELECT id FROM down)"
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
                f" SELECT {SESSION_COLUMNS}, 0 AS depth, ARRAY[id] AS path FROM {{s}}.sessions WHERE id = %s"
                f" UNION ALL SELECT {_prefixed('p', SESSION_COLUMNS)}, c.depth + 1, c.path || p.id"
                " FROM chain c JOIN {s}.sessions p ON p.id = c.parent_id WHERE p.id <> ALL (c.path)"
                f") SELECT {SESSION_COLUMNS} FROM chain ORDER BY depth DESC",
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

    @retried
    def forks(self, session_id: str) -> list[SessionRecord]:
        with self._db.read() as conn:
            rows = self._run(
                conn,
                f"SELECT {SESSION_COLUMNS} FROM {{s}}.sessions WHERE forked_from = %s {_OLDEST_START_FIRST}",
                (session_id,),
            ).fetchall()
        return [session_from_row(r, lenient=True) for r in rows]

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

    # -- helpers that run inside a transaction --------------------------------------------
    def _exists(self, conn: psycopg.Connection[Any], session_id: str, *, lock: bool = False) -> bool:
        """Whether the session exists (``lock``: its row held FOR SHARE until the transaction ends)."""
        sql = "SELECT 1 FROM {s}.sessions WHERE id = %s" + (" FOR SHARE" if lock else "")
        found = self._run(conn, sql, (session_id,)).fetchone()
        return found is not None

    def _session_row(self, conn: psycopg.Connection[Any], session_id: str) -> dict[str, Any]:
        row = self._run(
            conn, f"SELECT {SESSION_COLUMNS} FROM {{s}}.sessions WHERE id = %s", (session_id,)
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


def _prefixed(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))

