"""Messages in the PostgreSQL store: appending them, reading a session's history back and
searching them. A part of :class:`vigil.store.postgres.store.PostgresStore` (see
``SessionStore`` in ``store.base`` for the contract of each method).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, Callable

import psycopg

from vigil.clock import Clock
from vigil.store.checks import check_limit, check_message, optional_limit
from vigil.store.errors import SessionNotFound
from vigil.store.postgres.conn import Database
from vigil.store.postgres.retry import retried
from vigil.store.postgres.search import search_messages
from vigil.store.postgres.text import ESCAPE, unescape
from vigil.store.records import MessageRecord, NewMessage, SearchHit
from vigil.store.rows import MESSAGE_COLUMNS, MESSAGE_SELECT, canonical_json, messages_from_rows


class PostgresMessages:
    """The messages part of ``PostgresStore``, which gives it ``_db``, ``_run`` and ``_clock``."""

    _db: Database
    _clock: Clock
    _run: Callable[..., "psycopg.Cursor[Any]"]

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
                f"INSERT INTO {{s}}.messages ({MESSAGE_COLUMNS.removeprefix('id, ')}) VALUES (%s,"
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
            (session_id, after_seq, optional_limit(limit)),
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

