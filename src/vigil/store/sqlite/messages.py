"""Messages in the SQLite store: appending them (through the group commit), reading a
session's history back and searching them. A part of
:class:`vigil.store.sqlite.store.SQLiteStore` (see ``SessionStore`` in ``store.base`` for the
contract of each method).
"""

from __future__ import annotations

import json
import sqlite3

from vigil.clock import Clock
from vigil.store.checks import check_message
from vigil.store.errors import SessionNotFound
from vigil.store.fts import to_match_query
from vigil.store.records import MessageRecord, NewMessage, SearchHit
from vigil.store.rows import (
    PACKED_MESSAGE_COLUMNS,
    PACKED_MESSAGE_SELECT,
    canonical_json,
    messages_from_packed_rows,
    packed_extra,
)
from vigil.store.sqlite.conn import Database
from vigil.store.sqlite.group import GroupCommit
from vigil.store.sqlite.sessions import sql_limit

# A message copied into a continuation is listed once, under the newest session holding it:
# see postgres/search.py for why this look at the copy's canonical meta is exact (SQLite keeps
# it inside the canonical JSON of extra, in the same text).
_NOT_CARRIED = (
    "AND NOT EXISTS (SELECT 1 FROM sessions k JOIN messages c ON c.session_id = k.id"
    " WHERE k.parent_id = m.session_id AND c.created_at = m.created_at"
    """ AND instr(c.extra, '"copied_from":{"seq":' || m.seq || ',"session":"' || m.session_id || '"}') > 0)"""
)


class SQLiteMessages:
    """The messages part of ``SQLiteStore``, which gives it ``_db``, ``_group`` and ``_clock``."""

    _db: Database
    _group: GroupCommit
    _clock: Clock

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
            (session_id, after_seq, sql_limit(limit)),
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
                (match, *params, sql_limit(limit)),
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
