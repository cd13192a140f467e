"""The SQLite store being migrated, opened read-only: its rows in rowid order, counts and
digests, all inside one read transaction so that what is copied and what is verified are
the same snapshot even while another process writes.

Rows go out in rowid order, which is the order they were created in: a copy can stop after
any batch and go on after the last rowid it copied, and PostgreSQL's ``created_order`` (the
tie-breaker SQLite takes from the rowid) comes out in the same order.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

from vigil.safe_files import describe_kind
from vigil.store.records import MessageRecord
from vigil.store.rows import canonical_json, messages_from_packed_rows
from vigil.store.sqlite.migrations import LATEST_VERSION, applied_version
from vigil.store.transfer.errors import MigrateError
from vigil.store.transfer.tables import MARKER_KEY, Digest, Table, canonical_message, canonical_row

_SQLITE_HEADER = b"SQLite format 3\x00"
_MESSAGE_SELECT = "session_id, id, seq, role, content, created_at, extra"


class SQLiteSource:
    """A vigil SQLite store at ``path``, never written to. ``MigrateError`` when there is no
    store there, it is not one, or its schema is not this vigil's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        _check_file(path)
        try:
            self._conn = sqlite3.connect(
                f"file:{quote(str(path))}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
            )
            version = applied_version(self._conn)
        except sqlite3.Error as exc:
            raise MigrateError(f"cannot read the SQLite session store {path}: {exc}") from None
        if version == 0:
            self._conn.close()
            raise MigrateError(f"{path} holds no vigil session store (no schema): nothing to migrate")
        if version != LATEST_VERSION:
            self._conn.close()
            if version > LATEST_VERSION:
                raise MigrateError(
                    f"{path} was written by a newer vigil (schema {version}, this vigil knows up to "
                    f"{LATEST_VERSION}); migrate it with that vigil"
                )
            raise MigrateError(
                f"{path} is at schema {version}, older than this vigil's {LATEST_VERSION}: open it once "
                "with this vigil (e.g. `vigil sessions list`) to bring it up to date, then migrate"
            )
        created = self._one("SELECT applied_at FROM schema_migrations WHERE version = 1")
        self.identity: dict[str, Any] = {"path": str(path.resolve()), "created_at": created}
        """What tells this store apart from another: the target remembers it while unfinished."""

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: everything read inside sees the store as it was when it began."""
        self._execute("BEGIN")
        try:
            yield
        finally:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")  # nothing was written: ending the read is all

    def count(self, table: Table, *, upto: int | None = None) -> int:
        """Rows of ``table`` (those with rowid up to ``upto`` when given)."""
        where, params = _where(table, () if upto is None else (("rowid <= ?", upto),))
        return int(self._one(f"SELECT count(*) FROM {table.name}{where}", params))

    def rows_after(self, table: Table, after: int, limit: int) -> list[tuple[int, tuple[Any, ...]]]:
        """Up to ``limit`` rows with rowid above ``after``, oldest first, as ``(rowid, values)``
        with the values in the target's column order (messages unpacked into their columns).

        A session whose parent comes later in rowid order (never made by vigil itself) goes
        out without its parent; :meth:`late_parents` gives those links back afterwards.
        """
        if table.name == "messages":
            rows = self._rows(
                f"SELECT rowid, {_MESSAGE_SELECT} FROM messages WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (after, limit),
            )
            return [(row[0], _message_columns(_message(row[1:]))) for row in rows]
        if table.name == "sessions":
            columns = ", ".join(
                "CASE WHEN p.rowid < s.rowid THEN s.parent_id END" if c == "parent_id" else f"s.{c}"
                for c in table.column_names
            )
            sql = (
                f"SELECT s.rowid, {columns} FROM sessions s LEFT JOIN sessions p ON p.id = s.parent_id"
                " WHERE s.rowid > ? ORDER BY s.rowid LIMIT ?"
            )
            params: tuple[Any, ...] = (after, limit)
        else:
            where, params = _where(table, (("rowid > ?", after),))
            sql = f"SELECT rowid, {', '.join(table.column_names)} FROM {table.name}{where} ORDER BY rowid LIMIT ?"
            params = (*params, limit)
        return [(row[0], tuple(row[1:])) for row in self._rows(sql, params)]

    def late_parents(self) -> list[tuple[str, str]]:
        """``(session, parent)`` of sessions created before their parent (see :meth:`rows_after`)."""
        return [
            (row[0], row[1])
            for row in self._rows(
                "SELECT s.id, s.parent_id FROM sessions s JOIN sessions p ON p.id = s.parent_id"
                " WHERE p.rowid > s.rowid ORDER BY s.rowid"
            )
        ]

    def high_water(self, table: Table) -> int:
        """The highest id ``table`` ever gave out (AUTOINCREMENT remembers deleted ones too)."""
        given = self._one("SELECT seq FROM sqlite_sequence WHERE name = ?", (table.name,)) or 0
        return max(int(given), int(self._one(f"SELECT COALESCE(MAX(rowid), 0) FROM {table.name}")))

    def digest(self, table: Table) -> Digest:
        """Count and content hash of ``table`` (see ``tables.Digest``)."""
        digest = Digest()
        if table.name == "messages":
            for row in self._cursor(f"SELECT {_MESSAGE_SELECT} FROM messages"):
                digest.add(canonical_message(_message(row)))
            return digest
        where, params = _where(table, ())
        names = table.column_names
        for row in self._cursor(f"SELECT {', '.join(names)} FROM {table.name}{where}", params):
            digest.add(canonical_row(table, dict(zip(names, row))))
        return digest

    # -- plumbing -------------------------------------------------------------------------
    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise MigrateError(f"session database {self.path}: {exc}") from None

    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self._execute(sql, params).fetchone()
        return None if row is None else row[0]

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._execute(sql, params).fetchall()

    def _cursor(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        cursor = self._execute(sql, params)
        try:
            yield from cursor
        except sqlite3.Error as exc:
            raise MigrateError(f"session database {self.path}: {exc}") from None


def _where(table: Table, conditions: tuple[tuple[str, Any], ...]) -> tuple[str, tuple[Any, ...]]:
    """A WHERE clause of ``conditions`` (SQL, parameter); for ``state_meta`` also leaving out
    the target's own marker key (a source never has it, but one that did must not count it)."""
    if table.name == "state_meta":
        conditions = (*conditions, ("key <> ?", MARKER_KEY))
    if not conditions:
        return "", ()
    return " WHERE " + " AND ".join(sql for sql, _ in conditions), tuple(value for _, value in conditions)


def _check_file(path: Path) -> None:
    """Only a regular file that starts like an SQLite database is opened (SQLite would wait
    forever on a FIFO, or create a file where there was none)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise MigrateError(f"there is no SQLite session store at {path}: nothing to migrate") from None
    except OSError as exc:
        raise MigrateError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise MigrateError(f"{path} is {describe_kind(mode)}, not an SQLite session store")
    try:
        with open(path, "rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise MigrateError(f"cannot read {path}: {exc.strerror}") from None
    if not head:
        raise MigrateError(f"the SQLite session store {path} is empty: nothing to migrate")
    if head != _SQLITE_HEADER:
        raise MigrateError(f"{path} is not an SQLite file, so not a vigil session store")


def _message(row: tuple[Any, ...]) -> MessageRecord:
    """A message read as the SQLite store reads it; damage raises ``StoreError`` naming it."""
    session_id, *rest = row
    return messages_from_packed_rows(session_id, [tuple(rest)])[0]


def _message_columns(message: MessageRecord) -> tuple[Any, ...]:
    """A message as the PostgreSQL store writes it: a column per field, JSON as it encodes it."""
    usage = message.usage
    try:
        meta = canonical_json(message.meta)
    except ValueError as exc:  # a NaN in damaged JSON: PostgreSQL's store could not read it back
        raise MigrateError(
            f"session {message.session_id} message {message.seq}: its meta holds damaged data ({exc}); "
            "repair or delete this session"
        ) from None
    return (
        message.id,
        message.session_id,
        message.seq,
        message.role,
        message.content,
        canonical_json([call.as_dict() for call in message.tool_calls]),
        message.tool_call_id,
        message.tool_name,
        message.created_at,
        usage.input_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
        meta,
    )
