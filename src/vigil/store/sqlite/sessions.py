"""Sessions in the SQLite store: their rows, their chains of continuations and the system
prompts they point to. A part of :class:`vigil.store.sqlite.store.SQLiteStore` (see
``SessionStore`` in ``store.base`` for the contract of each method).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable, Sequence

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
from vigil.store.records import ConversationHead, SessionRecord
from vigil.store.rows import SESSION_COLUMNS, canonical_json, session_from_row
from vigil.store.sqlite import meta
from vigil.store.sqlite.conn import Database

# rowid breaks ties between equal timestamps (a fake clock, a fast machine) by creation order.
_MOST_RECENT_FIRST = "ORDER BY updated_at DESC, rowid DESC"
# Of several continuations of one session, the newest is the one started last.
_NEWEST_CHILD_LAST = "ORDER BY started_at, rowid"
_NEWEST_CHILD_FIRST = "ORDER BY started_at DESC, rowid DESC"


class SQLiteSessions:
    """The sessions part of ``SQLiteStore``, which gives it ``_db`` and ``_clock``."""

    _db: Database
    _clock: Clock

    # -- sessions -------------------------------------------------------------------------
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
            for linked in (parent_id, forked_from):
                if linked is not None and not _exists(conn, linked):
                    raise SessionNotFound(linked)
            if session_id is None:
                session_id = _unused_id(conn)
            elif _exists(conn, session_id):
                raise StoreError(f"a session with id {session_id} already exists")
            hash_ = None if system_prompt is None else _put_prompt(conn, system_prompt, now)
            conn.execute(
                "INSERT INTO sessions (id, source, title, parent_id, started_at, updated_at, model,"
                " model_config, system_prompt_hash, tool_names, forked_from)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, source, title, parent_id, now, now, model, config_json, hash_, tools_json,
                 forked_from),
            )
            return session_from_row(_session_row(conn, session_id))

    def get_session(self, session_id: str) -> SessionRecord:
        with self._db.read() as conn:
            return session_from_row(_session_row(conn, session_id))

    def resolve_session(self, ref: str) -> str:
        if not is_session_ref(ref):
            raise SessionNotFound(ref)
        with self._db.read() as conn:
            if _exists(conn, ref):
                return ref
            # ref is hex only, so it cannot smuggle GLOB wildcards in.
            rows = conn.execute("SELECT id FROM sessions WHERE id GLOB ? ORDER BY id", (ref + "*",))
            ids: list[str] = [r[0] for r in rows]
        if not ids:
            raise SessionNotFound(ref)
        if len(ids) > 1:
            raise AmbiguousSession(ref, ids)
        return ids[0]

    def list_sessions(self, *, limit: int | None = None, source: str | None = None) -> list[SessionRecord]:
        return self._recent_sessions(limit, source, lenient=True)

    def latest_session(self, *, source: str | None = None) -> SessionRecord | None:
        found = self._recent_sessions(1, source, lenient=False)
        return found[0] if found else None

    def _recent_sessions(
        self, limit: int | None, source: str | None, *, lenient: bool
    ) -> list[SessionRecord]:
        where, params = ("WHERE source = ?", [source]) if source is not None else ("", [])
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions {where} {_MOST_RECENT_FIRST} LIMIT ?",
                (*params, sql_limit(limit)),
            ).fetchall()
        return [session_from_row(r, lenient=lenient) for r in rows]

    def list_conversations(self, *, limit: int | None = None) -> list[ConversationHead]:
        with self._db.read() as conn:
            rows = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions {_NEWEST_CHILD_LAST}").fetchall()
        chains = collapse(rows)
        if limit is not None:
            chains = chains[: check_limit(limit)]
        return [
            ConversationHead(c.root_id, session_from_row(c.head, lenient=True), c.segments) for c in chains
        ]

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
        with self._db.write() as conn:
            if callable(model_config):
                changes["model_config"] = _updated_config(conn, session_id, model_config)
            if changes:
                assignments = ", ".join(f"{column} = ?" for column in changes)  # fixed names only
                conn.execute(
                    f"UPDATE sessions SET {assignments} WHERE id = ?", (*changes.values(), session_id)
                )
            return session_from_row(_session_row(conn, session_id))

    def set_session_prompt(
        self, session_id: str, prompt: str, *, model_config: ModelConfigChange | None = None
    ) -> str:
        check_prompt(prompt)
        config_json = prompt_config(model_config)
        with self._db.write() as conn:
            if not _exists(conn, session_id):
                raise SessionNotFound(session_id)
            if callable(model_config):
                config_json = _updated_config(conn, session_id, model_config)
            hash_ = _put_prompt(conn, prompt, self._clock.now())
            conn.execute(
                "UPDATE sessions SET system_prompt_hash = ?, model_config = COALESCE(?, model_config)"
                " WHERE id = ?",
                (hash_, config_json, session_id),
            )
        return hash_

    def end_session(self, session_id: str, reason: str, *, ended_at: float | None = None) -> None:
        check_reason(reason)
        when = self._clock.now() if ended_at is None else ended_at
        with self._db.write() as conn:
            if not _exists(conn, session_id):
                raise SessionNotFound(session_id)
            conn.execute(
                "UPDATE sessions SET ended_at = ?, end_reason = ?, updated_at = MAX(updated_at, ?)"
                " WHERE id = ? AND ended_at IS NULL",
                (when, reason, when, session_id),
            )

    def reopen_session(self, session_id: str) -> None:
        with self._db.write() as conn:
            cursor = conn.execute(
                "UPDATE sessions SET ended_at = NULL, end_reason = NULL, updated_at = MAX(updated_at, ?)"
                " WHERE id = ?",
                (self._clock.now(), session_id),
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(session_id)

    def delete_session(self, session_id: str) -> None:
        self.delete_sessions([session_id])

    def delete_sessions(self, session_ids: Sequence[str]) -> Deleted:
        wanted = canonical_json(list(dict.fromkeys(session_ids)))
        in_set = "IN (SELECT value FROM json_each(?))"
        now = self._clock.now()
        with self._db.write() as conn:
            for session_id in json.loads(wanted):
                if not _exists(conn, session_id):
                    raise SessionNotFound(session_id)
            gone = deleted_of_row(
                conn.execute(f"SELECT {TOTALS_OF_SESSIONS} FROM sessions WHERE id {in_set}", (wanted,)).fetchone()
            )
            for link in ("parent_id", "forked_from"):
                conn.execute(
                    f"UPDATE sessions SET {link} = NULL WHERE {link} {in_set} AND id NOT {in_set}",
                    (wanted, wanted),
                )
            conn.execute(f"DELETE FROM messages WHERE session_id {in_set}", (wanted,))  # triggers clean FTS
            conn.execute(f"DELETE FROM sessions WHERE id {in_set}", (wanted,))
            before = meta.get(conn, DELETED_KEY)
            total = gone + Deleted.from_json(None if before is None else before.value)
            meta.put(conn, DELETED_KEY, canonical_json(total.to_json()), now)
        return gone

    def conversation_sessions(self, session_id: str) -> list[SessionRecord]:
        with self._db.read() as conn:
            root = _session_row(conn, session_id)
            seen = {root["id"]}
            while root["parent_id"] is not None and root["parent_id"] not in seen:
                parent = _find_session_row(conn, root["parent_id"])
                if parent is None:
                    break
                root = parent
                seen.add(root["id"])
            rows = conn.execute(
                "WITH RECURSIVE down(id) AS (SELECT ? UNION SELECT s.id FROM sessions s JOIN down d"
                f" ON s.parent_id = d.id) SELECT {SESSION_COLUMNS} FROM sessions"
                f" WHERE id IN (SELECT id FROM down) {_NEWEST_CHILD_LAST}",
                (root["id"],),
            ).fetchall()
        return [session_from_row(r, lenient=True) for r in rows]

    def parent_chain(self, session_id: str) -> list[SessionRecord]:
        chain: list[SessionRecord] = []
        with self._db.read() as conn:
            row: sqlite3.Row | None = _session_row(conn, session_id)
            seen: set[str] = set()
            while row is not None and row["id"] not in seen:
                seen.add(row["id"])
                chain.append(session_from_row(row))
                parent = row["parent_id"]
                row = None if parent is None else _find_session_row(conn, parent)
        chain.reverse()
        return chain

    def newest_continuation(self, session_id: str) -> str:
        with self._db.read() as conn:
            if not _exists(conn, session_id):
                raise SessionNotFound(session_id)
            current, seen = session_id, {session_id}
            while True:
                child = conn.execute(
                    "SELECT c.id FROM sessions c JOIN sessions p ON p.id = c.parent_id"
                    " WHERE c.parent_id = ? AND p.end_reason = ?"
                    f" {_NEWEST_CHILD_FIRST.replace('started_at', 'c.started_at').replace('rowid', 'c.rowid')}"
                    " LIMIT 1",
                    (current, COMPRESSION),
                ).fetchone()
                if child is None or child[0] in seen:
                    return current
                current = child[0]
                seen.add(current)

    def forks(self, session_id: str) -> list[SessionRecord]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE forked_from = ? {_NEWEST_CHILD_LAST}",
                (session_id,),
            ).fetchall()
        return [session_from_row(r, lenient=True) for r in rows]

    # -- system prompts -------------------------------------------------------------------
    def put_prompt(self, text: str) -> str:
        check_prompt(text)
        with self._db.write() as conn:
            return _put_prompt(conn, text, self._clock.now())

    def get_prompt(self, prompt_hash: str) -> str | None:
        with self._db.read() as conn:
            row = conn.execute("SELECT text FROM system_prompts WHERE hash = ?", (prompt_hash,)).fetchone()
        return None if row is None else row[0]


# -- helpers that run inside a transaction ------------------------------------------------
def _updated_config(conn: sqlite3.Connection, session_id: str, update: ConfigUpdate) -> str:
    """Apply ``update`` to the stored model configuration, inside the caller's transaction."""
    current = session_from_row(_session_row(conn, session_id)).model_config
    return updated_config(current, update)


def _exists(conn: sqlite3.Connection, session_id: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None


def _find_session_row(conn: sqlite3.Connection, session_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return row


def _session_row(conn: sqlite3.Connection, session_id: str) -> sqlite3.Row:
    row = _find_session_row(conn, session_id)
    if row is None:
        raise SessionNotFound(session_id)
    return row


def _unused_id(conn: sqlite3.Connection) -> str:
    # Under the write lock nobody can take the id between this check and the insert.
    while _exists(conn, candidate := new_session_id()):
        pass
    return candidate


def _put_prompt(conn: sqlite3.Connection, text: str, now: float) -> str:
    hash_ = prompt_hash(text)
    # Storing the right text again heals a row whose text was damaged.
    conn.execute(
        "INSERT INTO system_prompts (hash, text, created_at) VALUES (?, ?, ?)"
        " ON CONFLICT (hash) DO UPDATE SET text = excluded.text WHERE text != excluded.text",
        (hash_, text, now),
    )
    return hash_


def sql_limit(limit: int | None) -> int:
    """``limit`` for SQLite's ``LIMIT ?``, checked: ``-1`` for no limit."""
    checked = optional_limit(limit)
    return -1 if checked is None else checked
