"""The embedded session store: one SQLite file (``state.db``) in WAL mode."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

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
from vigil.store.errors import (
    AmbiguousSession,
    SchemaTooNew,
    SessionNotFound,
    StoreError,
    StoreUnreadable,
    StoreUnwritable,
)
from vigil.store.fts import to_match_query
from vigil.store.ids import check_session_id, is_session_ref, new_session_id, prompt_hash
from vigil.store.meta_batch import encode_swaps
from vigil.store.records import (
    ConversationHead,
    MessageRecord,
    MetaEntry,
    MetaSwap,
    NewMessage,
    SearchHit,
    SessionRecord,
)
from vigil.store.rows import (
    PACKED_MESSAGE_COLUMNS,
    PACKED_MESSAGE_SELECT,
    canonical_json,
    messages_from_packed_rows,
    packed_extra,
    session_from_row,
)
from vigil.store.sqlite import meta
from vigil.store.sqlite.conn import (
    Database,
    is_busy,
    new_sidecars,
    prepare_file,
    sidecar_names,
    write_problem,
)
from vigil.store.sqlite.group import GroupCommit
from vigil.store.sqlite.migrations import LATEST_VERSION, applied_version, migrate

if TYPE_CHECKING:
    from vigil.store.sqlite.gateway_tables import SQLiteGatewayTables
    from vigil.store.sqlite.pairing_tables import SQLitePairingTables

_SESSION_COLUMNS = (
    "id, source, title, parent_id, end_reason, started_at, ended_at, updated_at, model, "
    "model_config, system_prompt_hash, tool_names, message_count, "
    "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens"
)
# rowid breaks ties between equal timestamps (a fake clock, a fast machine) by creation order.
_MOST_RECENT_FIRST = "ORDER BY updated_at DESC, rowid DESC"
# Of several continuations of one session, the newest is the one started last.
_NEWEST_CHILD_LAST = "ORDER BY started_at, rowid"
_NEWEST_CHILD_FIRST = "ORDER BY started_at DESC, rowid DESC"
# A message copied into a continuation is listed once, under the newest session holding it:
# see postgres/search.py for why this look at the copy's canonical meta is exact (SQLite keeps
# it inside the canonical JSON of extra, in the same text).
_NOT_CARRIED = (
    "AND NOT EXISTS (SELECT 1 FROM sessions k JOIN messages c ON c.session_id = k.id"
    " WHERE k.parent_id = m.session_id AND c.created_at = m.created_at"
    """ AND instr(c.extra, '"copied_from":{"seq":' || m.seq || ',"session":"' || m.session_id || '"}') > 0)"""
)


class SQLiteStore:
    """``SessionStore`` on an SQLite file, safe to share between threads and processes.

    ``path`` is created (mode 0600, parent directories too) if missing and migrated to the
    newest schema. ``durable=False`` trades the last few transactions on power loss (never
    on a crash of vigil itself) for faster commits: ``synchronous=NORMAL`` instead of ``FULL``.
    Raises ``StoreUnreadable`` for a file that is not a vigil database and ``SchemaTooNew``
    for one written by a newer vigil; in both cases the file is left as it was.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, clock: Clock | None = None, durable: bool = True
    ) -> None:
        self.path = Path(path).expanduser()
        self._clock: Clock = clock or SystemClock()
        prepare_file(self.path)
        before = sidecar_names(self.path)
        self._db = Database(self.path, durable=durable)
        self._group = GroupCommit(self._db)
        self._gateway: SQLiteGatewayTables | None = None  # made on first use: a chat needs neither
        self._pairing: SQLitePairingTables | None = None
        try:
            self._open_schema(self._db.connection())
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, StoreUnreadable):
                # A refused file is left as it was: without the journal files SQLite just
                # made beside it (nothing was committed to them).
                for sidecar in new_sidecars(self.path, before):
                    sidecar.unlink(missing_ok=True)
            raise

    def _open_schema(self, conn: sqlite3.Connection) -> None:
        try:
            version = applied_version(conn)
            if (
                version == 0
                and conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name NOT LIKE 'sqlite%' LIMIT 1"
                ).fetchone()
            ):
                raise StoreUnreadable(
                    f"{self.path} is an SQLite database of some other program, not a vigil "
                    "session database; it was left untouched"
                )
            if version > LATEST_VERSION:
                raise SchemaTooNew(
                    f"{self.path} was written by a newer vigil (schema {version}, this vigil "
                    f"knows up to {LATEST_VERSION}); upgrade vigil"
                )
            conn.execute("PRAGMA journal_mode = WAL")
            migrate(conn, now=self._clock.now())
        except sqlite3.DatabaseError as exc:
            if is_busy(exc):
                raise self._db.translate(exc) from exc
            raise StoreUnreadable(f"{self.path} is not a usable vigil session database: {exc}") from exc

    @property
    def group_commit(self) -> GroupCommit:
        """How this store's writes are committed together (its counters are for tests and
        benchmarks)."""
        return self._group

    @property
    def gateway(self) -> SQLiteGatewayTables:
        """The gateway's routes, inbox and outbox in this file (see ``store.gateway_tables``)."""
        if self._gateway is None:
            from vigil.store.sqlite.gateway_tables import SQLiteGatewayTables

            self._gateway = SQLiteGatewayTables(self._db, self._group)
        return self._gateway

    @property
    def pairing(self) -> SQLitePairingTables:
        """Pairing codes and paired platform users in this file (see ``store.pairing_tables``)."""
        if self._pairing is None:
            from vigil.store.sqlite.pairing_tables import SQLitePairingTables

            self._pairing = SQLitePairingTables(self._db, self._group)
        return self._pairing

    def schema_version(self) -> int:
        with self._db.read() as conn:
            return applied_version(conn)

    def check_writable(self) -> None:
        problem = write_problem(self.path)
        if problem is not None:
            raise StoreUnwritable(problem)
        if self._db.unwritable is not None:  # the last write failed: does one commit now?
            self._group.run(_probe_write)

    def close(self) -> None:
        self._db.close()

    def notifications(self) -> None:
        """None: one SQLite file serves processes on one machine without a channel between
        them; callers read the store (poll) instead."""
        return None

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
            if parent_id is not None and not _exists(conn, parent_id):
                raise SessionNotFound(parent_id)
            if session_id is None:
                session_id = _unused_id(conn)
            elif _exists(conn, session_id):
                raise StoreError(f"a session with id {session_id} already exists")
            hash_ = None if system_prompt is None else _put_prompt(conn, system_prompt, now)
            conn.execute(
                "INSERT INTO sessions (id, source, title, parent_id, started_at, updated_at, model,"
                " model_config, system_prompt_hash, tool_names) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, source, title, parent_id, now, now, model, config_json, hash_, tools_json),
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
                f"SELECT {_SESSION_COLUMNS} FROM sessions {where} {_MOST_RECENT_FIRST} LIMIT ?",
                (*params, _sql_limit(limit)),
            ).fetchall()
        return [session_from_row(r, lenient=lenient) for r in rows]

    def list_conversations(self, *, limit: int | None = None) -> list[ConversationHead]:
        with self._db.read() as conn:
            rows = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions {_NEWEST_CHILD_LAST}").fetchall()
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
        changes: dict[str, Any] = {}
        if title is not UNSET:
            changes["title"] = title
        if model is not UNSET:
            changes["model"] = model
        if model_config is not UNSET and not callable(model_config):
            changes["model_config"] = canonical_json(check_dict(model_config, "model_config"))
        if tool_names is not UNSET:
            changes["tool_names"] = canonical_json(check_names(tool_names))
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
        config_json = (
            None
            if model_config is None or callable(model_config)
            else canonical_json(check_dict(model_config, "model_config"))
        )
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
        if not reason:
            raise ValueError("ending a session needs a reason")
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
            conn.execute(
                f"UPDATE sessions SET parent_id = NULL WHERE parent_id {in_set} AND id NOT {in_set}",
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
                f" ON s.parent_id = d.id) SELECT {_SESSION_COLUMNS} FROM sessions"
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

    # -- messages -------------------------------------------------------------------------
    def append_message(
        self, session_id: str, message: NewMessage, *, created_at: float | None = None
    ) -> MessageRecord:
        check_message(message)
        usage = message.usage
        counts = (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens)
        extra = packed_extra(message.tool_calls, message.tool_call_id, message.tool_name, counts, message.meta)
        when = self._clock.now() if created_at is None else created_at

        def write(conn: sqlite3.Connection) -> tuple[int | None, int]:
            found = conn.execute(
                "SELECT (SELECT MAX(seq) FROM messages WHERE session_id = s.id)"
                " FROM sessions s WHERE s.id = ?",
                (session_id,),
            ).fetchone()
            if found is None:
                raise SessionNotFound(session_id)
            seq = (found[0] or 0) + 1
            cursor = conn.execute(
                f"INSERT INTO messages ({PACKED_MESSAGE_COLUMNS.removeprefix('id, ')}) VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, seq, message.role, message.content, when, extra),
            )
            conn.execute(
                "UPDATE sessions SET message_count = message_count + 1, input_tokens = input_tokens + ?,"
                " cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ?,"
                " output_tokens = output_tokens + ?, updated_at = MAX(updated_at, ?) WHERE id = ?",
                (*counts, when, session_id),
            )
            return cursor.lastrowid, seq

        # Appends of several conversations at once share one commit (see group.py).
        message_id, seq = self._group.run(write)
        assert message_id is not None
        return MessageRecord(
            id=message_id,
            session_id=session_id,
            seq=seq,
            role=message.role,
            content=message.content,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            created_at=when,
            usage=usage,
            meta=json.loads(canonical_json(message.meta)) if message.meta else {},
        )

    def get_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[MessageRecord]:
        rows = self._db.query(
            f"SELECT {PACKED_MESSAGE_SELECT} FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq"
            " LIMIT ?",
            (session_id, after_seq, _sql_limit(limit)),
        )
        if not rows and not self._db.query("SELECT 1 FROM sessions WHERE id = ?", (session_id,)):
            raise SessionNotFound(session_id)
        return messages_from_packed_rows(session_id, rows)

    def search(self, query: str, *, limit: int = 20, session_id: str | None = None) -> list[SearchHit]:
        match = to_match_query(query)
        if match is None:
            return []
        where, params = ("AND m.session_id = ?", [session_id]) if session_id is not None else (_NOT_CARRIED, [])
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT m.id, m.session_id, m.role, m.created_at, s.title,"
                " snippet(messages_fts, 0, '«', '»', '…', 16) AS snippet"
                " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
                " JOIN sessions s ON s.id = m.session_id"
                f" WHERE messages_fts MATCH ? {where} ORDER BY rank LIMIT ?",
                (match, *params, _sql_limit(limit)),
            ).fetchall()
        return [
            SearchHit(
                session_id=r["session_id"],
                message_id=r["id"],
                role=r["role"],
                snippet=r["snippet"],
                created_at=r["created_at"],
                session_title=r["title"],
            )
            for r in rows
        ]

    # -- system prompts -------------------------------------------------------------------
    def put_prompt(self, text: str) -> str:
        check_prompt(text)
        with self._db.write() as conn:
            return _put_prompt(conn, text, self._clock.now())

    def get_prompt(self, prompt_hash: str) -> str | None:
        with self._db.read() as conn:
            row = conn.execute("SELECT text FROM system_prompts WHERE hash = ?", (prompt_hash,)).fetchone()
        return None if row is None else row[0]

    # -- state_meta (see meta.py) -------------------------------------------------------
    def get_meta(self, key: str) -> MetaEntry | None:
        with self._db.read() as conn:
            return meta.get(conn, key)

    def set_meta(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``; ``None`` deletes the key, as in compare-and-set."""
        if value is None:
            self.delete_meta(key)
            return
        encoded = canonical_json(value)
        check_key(key)
        now = self._clock.now()
        self._group.run(lambda conn: meta.put(conn, key, encoded, now))

    def delete_meta(self, key: str) -> bool:
        return self._group.run(lambda conn: meta.delete(conn, key))

    def compare_and_set_meta(self, key: str, expected: Any, new: Any) -> bool:
        check_key(key)
        want = None if expected is None else canonical_json(expected)
        encoded = None if new is None else canonical_json(new)
        now = self._clock.now()
        return self._group.run(lambda conn: meta.compare_and_set(conn, key, want, encoded, now))

    def get_meta_many(self, keys: Iterable[str]) -> dict[str, MetaEntry]:
        wanted = list(dict.fromkeys(keys))
        with self._db.read() as conn:
            return meta.get_many(conn, wanted)

    def compare_and_set_many(self, swaps: Sequence[MetaSwap]) -> list[bool]:
        batch = encode_swaps(swaps)
        if not batch:
            return []
        now = self._clock.now()
        return self._group.run(lambda conn: meta.compare_and_set_many(conn, batch, now))

    def list_meta(self, prefix: str) -> list[MetaEntry]:
        with self._db.read() as conn:
            return meta.with_prefix(conn, prefix)


# -- helpers that run inside a transaction ------------------------------------------------
def _probe_write(conn: sqlite3.Connection) -> None:
    """A write that leaves nothing behind yet reaches the disk: the page it changed and
    changed back is written to the log at the commit all the same."""
    conn.execute("INSERT OR REPLACE INTO state_meta (key, value, updated_at) VALUES ('store:write-probe', 'null', 0)")
    conn.execute("DELETE FROM state_meta WHERE key = 'store:write-probe'")


def _updated_config(conn: sqlite3.Connection, session_id: str, update: ConfigUpdate) -> str:
    """Apply ``update`` to the stored model configuration, inside the caller's transaction."""
    current = session_from_row(_session_row(conn, session_id)).model_config
    return canonical_json(check_dict(update(dict(current)), "model_config"))


def _exists(conn: sqlite3.Connection, session_id: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None


def _find_session_row(conn: sqlite3.Connection, session_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
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


def _sql_limit(limit: int | None) -> int:
    return -1 if limit is None else check_limit(limit)
