"""The SQLite file itself: creating it privately, refusing what is not a database, and giving
each thread its own connection with short read and write transactions."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

from vigil.safe_files import CappedRead, UnsafeFile, read_bytes
from vigil.store.errors import StoreError, StoreUnavailable, StoreUnreadable, StoreUnwritable

BUSY_TIMEOUT_SECONDS = 30.0
"""How long a writer waits for another process's write transaction before giving up."""

_SQLITE_HEADER = b"SQLite format 3\x00"
_HEADER_BYTES = 100
_SIDECARS = ("-wal", "-shm", "-journal")
_SETTLE_CHECKS = 20
_SETTLE_SECONDS = 0.05


CLOSE_WAIT = 10.0
"""Seconds :meth:`Database.close` waits for statements running in other threads."""

_open_files: dict[tuple[int, int], int] = {}
"""Database files this process has open, by (device, inode), with how many stores use each."""
_open_files_lock = threading.Lock()


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _already_open(path: Path) -> bool:
    key = _file_id(path)
    with _open_files_lock:
        return key is not None and _open_files.get(key, 0) > 0


def prepare_file(path: Path) -> None:
    """Make sure ``path`` can be handed to SQLite without SQLite ever writing to a stranger.

    A file this process already has open as a store is not read again: closing any descriptor
    of a file drops every POSIX lock the process holds on it, SQLite's included, and another
    process could then checkpoint and delete the write-ahead log under the open store.

    A missing file is created empty with mode 0600 (SQLite gives the ``-wal`` and ``-shm``
    files the database's mode), its directory too. An existing file must be a regular file
    that starts with the SQLite header, or be empty with nothing beside it that could hold
    data (a ``-wal`` or ``-journal`` file with content); anything else - a FIFO, a directory,
    a symlink loop, another program's file - raises ``StoreUnreadable`` and is not touched.
    """
    if _already_open(path):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        _check_existing(path)
    except OSError as exc:
        raise StoreUnreadable(f"cannot create the session database {path}: {exc.strerror}") from exc
    else:
        os.close(fd)


def _head(path: Path) -> CappedRead | None:
    try:
        return read_bytes(path, _HEADER_BYTES)
    except UnsafeFile as exc:
        raise StoreUnreadable(
            f"the session database {exc.path} {exc.reason}; it was left untouched"
        ) from None


def _check_existing(path: Path) -> None:
    head = _head(path)
    if head is None:  # a dangling symlink: SQLite would create a file we do not own
        raise StoreUnreadable(
            f"the session database {path} is a symbolic link to a file that does not exist; "
            "fix or remove the link"
        )
    if not head.data:
        if _holding_sidecar(path) is None:
            return
        # Another process creating the store writes its journal a moment before the header:
        # give it that moment before calling the store damaged.
        for _ in range(_SETTLE_CHECKS):
            time.sleep(_SETTLE_SECONDS)
            head = _head(path) or head
            sidecar = _holding_sidecar(path)
            if head.data or sidecar is None:
                break
        else:
            raise StoreUnreadable(
                f"the session database {path} is empty but {sidecar[0].name} beside it holds "
                f"{sidecar[1]:,} bytes: the store looks damaged, not new, so it was left untouched "
                "- restore it from a backup, or move all three files aside to start afresh"
            )
    if head.data and head.data[: len(_SQLITE_HEADER)] != _SQLITE_HEADER:
        raise StoreUnreadable(
            f"{path} is not a vigil session database (not an SQLite file); "
            "it was left untouched - move it aside or choose another path"
        )
    if head.data:
        _check_whole_pages(path, head)


def _check_whole_pages(path: Path, head: CappedRead) -> None:
    """An SQLite file is a whole number of pages: anything else was cut short (or is not one),
    and SQLite would only find out after creating its journal files beside it."""
    page_size = int.from_bytes(head.data[16:18], "big") if len(head.data) >= 18 else 0
    page_size = 65536 if page_size == 1 else page_size
    valid_size = 512 <= page_size <= 65536 and page_size & (page_size - 1) == 0
    if len(head.data) < _HEADER_BYTES or not valid_size or head.size % page_size:
        raise StoreUnreadable(
            f"the session database {path} is damaged: {head.size:,} bytes is not a whole number "
            "of database pages (the file was cut short or overwritten); it was left untouched "
            "- restore it from a backup or move it aside"
        )


def new_sidecars(path: Path, existed: set[str]) -> list[Path]:
    """The ``-wal``/``-shm``/``-journal`` files beside ``path`` not in ``existed`` (names)."""
    return [
        sidecar
        for suffix in _SIDECARS
        if (sidecar := path.with_name(path.name + suffix)).name not in existed and sidecar.exists()
    ]


def sidecar_names(path: Path) -> set[str]:
    """The names of the ``-wal``/``-shm``/``-journal`` files beside ``path`` right now."""
    return {path.name + suffix for suffix in _SIDECARS if path.with_name(path.name + suffix).exists()}


def _holding_sidecar(path: Path) -> tuple[Path, int] | None:
    """A ``-wal`` or ``-journal`` file beside ``path`` that holds data, with its size: next to
    an empty database it means a damaged store, not a new one."""
    for suffix in ("-wal", "-journal"):
        sidecar = path.with_name(path.name + suffix)
        try:
            size = sidecar.lstat().st_size
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreUnreadable(f"cannot check {sidecar}: {exc.strerror}") from exc
        if size:
            return sidecar, size
    return None


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` means another connection held a lock for longer than the busy timeout."""
    return _code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _code(exc: sqlite3.Error) -> int:
    """The primary result code of ``exc`` (without the extended part)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF


_UNWRITABLE = (sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR)


def is_unwritable(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is a full disk, a read-only file or a disk I/O error: a failure of the
    file, not of the statement, that every write meets alike until someone acts."""
    return _code(exc) in _UNWRITABLE

MIN_FREE_BYTES = 16 * 1024
"""Less room than this on the file system of the database counts as a full disk (a commit
needs at least a page of the write-ahead log and its header)."""


def write_problem(path: Path) -> str | None:
    """Why the database at ``path`` cannot be written, seen from the file system (a full disk,
    a file that cannot be modified), or ``None``. Cheap: no SQLite, a few system calls."""
    for file in (path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))):
        # os.access answers for this process: root may write a 0400 file, not an immutable one.
        if file.exists() and not os.access(file, os.W_OK):
            return (
                f"read-only: {file} cannot be modified (check its owner and permissions, "
                "an immutable flag (lsattr), or a file system mounted read-only)"
            )
    try:
        space = os.statvfs(path.parent)
    except OSError:
        return None
    blocks = space.f_bfree if os.geteuid() == 0 else space.f_bavail  # root may use the reserve
    if blocks * space.f_frsize < MIN_FREE_BYTES:
        return f"disk full: no space left on the file system holding {path}"
    return None


class Database:
    """One SQLite file shared by the threads of this process, one connection per thread.

    A connection per thread (rather than one behind a lock) lets readers run while a writer
    holds the WAL write lock; SQLite's own locking then serialises writers across threads and
    processes alike. Connections of threads that have ended are closed when a new one opens.
    """

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self._synchronous = "FULL" if durable else "NORMAL"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._closed = False
        self._closing_done = False
        self._busy = 0
        self._idle = threading.Condition()
        self.unwritable: str | None = None
        """Why the last write failed, while it was for a reason that lasts (see
        ``StoreUnwritable``); cleared by the next write that commits."""
        self._file = _file_id(path)
        if self._file is not None:
            with _open_files_lock:
                _open_files[self._file] = _open_files.get(self._file, 0) + 1

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use (autocommit; transactions explicit)."""
        if self._closed:
            raise StoreError(f"the session store {self.path} is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._close_orphans()
                self._conns.append((weakref.ref(threading.current_thread()), conn))
        return conn

    def _connect(self) -> sqlite3.Connection:
        try:
            # mode=rw: SQLite must never create the file itself (it would not be private), so a
            # file deleted under a running store is an error instead of a fresh empty database.
            # check_same_thread=False only so that close() may close every thread's connection.
            conn = sqlite3.connect(
                f"file:{quote(str(self.path))}?mode=rw",
                uri=True,
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error as exc:
            raise StoreUnreadable(f"cannot open the session database {self.path}: {exc}") from exc
        except UnicodeDecodeError as exc:  # SQLite's own message quoted damaged bytes of the schema
            raise StoreUnreadable(
                f"cannot open the session database {self.path}: it is damaged (its schema is not valid text)"
            ) from exc
        return conn

    def _close_orphans(self) -> None:
        alive = []
        for thread_ref, conn in self._conns:
            thread = thread_ref()
            if thread is not None and thread.is_alive():
                alive.append((thread_ref, conn))
            else:
                conn.close()
        self._conns = alive

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on any error.

        Taking the write lock up front means the busy timeout applies and a read-then-write
        never fails half-way because another writer got in between.
        """
        with self._transaction("BEGIN IMMEDIATE") as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees the same snapshot."""
        with self._transaction("BEGIN") as conn:
            yield conn

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Count a statement in progress, so that :meth:`close` does not close a connection
        under a thread still using it (the sqlite3 module would crash the process)."""
        with self._idle:
            self._busy += 1
        try:
            yield
        finally:
            with self._idle:
                self._busy -= 1
                if self._busy == 0:
                    self._idle.notify_all()

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with self.in_use():
            with self._transaction_on(self.connection(), begin) as conn:
                yield conn

    @contextmanager
    def _transaction_on(self, conn: sqlite3.Connection, begin: str) -> Iterator[sqlite3.Connection]:
        try:
            conn.execute(begin)
            try:
                yield conn
                conn.execute("COMMIT")
            finally:
                if conn.in_transaction:  # the body or the COMMIT failed
                    conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise self.failed(conn, exc) from exc
        if begin != "BEGIN":
            self.wrote()

    def wrote(self) -> None:
        """A write transaction committed: the store can be written (again)."""
        self.unwritable = None

    def failed(self, conn: sqlite3.Connection, exc: sqlite3.Error) -> StoreError:
        """The error to raise for ``exc``, which ended a transaction on this thread's ``conn``.

        A full disk or a read-only file is remembered until a write commits again (see
        :attr:`unwritable`). A connection SQLite opened read-only (the file could not be
        opened for writing then) stays so for good: it is closed, so that the next use opens
        one that can write once the file can be written again.
        """
        error = self.translate(exc)
        if isinstance(error, StoreUnwritable):
            self.unwritable = error.reason
        if _code(exc) == sqlite3.SQLITE_READONLY:
            self._forget(conn)
        return error

    def _forget(self, conn: sqlite3.Connection) -> None:
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with self._lock:
            self._conns = [(thread, kept) for thread, kept in self._conns if kept is not conn]
        conn.close()

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """The rows of one read statement as plain tuples, outside any explicit transaction.

        A single statement sees one snapshot by itself; skipping ``BEGIN`` and ``COMMIT``
        saves two statements on the hot path of loading a history.
        """
        with self.in_use():
            cursor = self.connection().cursor()
            cursor.row_factory = None
            try:
                return cursor.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self.translate(exc) from exc
            finally:
                cursor.close()

    def translate(self, exc: sqlite3.Error) -> StoreError:
        """A user-facing ``StoreError`` for an SQLite failure on this file: ``StoreUnwritable``
        for a full disk, a read-only file or a disk I/O error (the reason found on the file
        system when it can be), ``StoreUnavailable`` for a lock held too long."""
        if is_busy(exc):
            return StoreUnavailable(
                f"the session database {self.path} stayed locked by another process for "
                f"{BUSY_TIMEOUT_SECONDS:.0f} s; try again"
            )
        code = _code(exc)
        if is_unwritable(exc):
            found = write_problem(self.path)
            if found is not None:
                return StoreUnwritable(found)
            if code == sqlite3.SQLITE_FULL:
                return StoreUnwritable(f"disk full: SQLite says {exc} ({self.path})")
            if code == sqlite3.SQLITE_READONLY:
                return StoreUnwritable(f"read-only: SQLite says {exc} ({self.path})")
            return StoreUnwritable(f"a disk I/O error on {self.path} ({exc})")
        return StoreError(f"session database {self.path}: {exc}")

    def close(self) -> None:
        """Close every thread's connection; further use raises ``StoreError``. Statements
        still running in other threads are waited for (at most :data:`CLOSE_WAIT` seconds)."""
        with self._idle:
            self._closed = True
            self._idle.wait_for(lambda: self._busy == 0, CLOSE_WAIT)
        with self._lock:
            already, self._closing_done = self._closing_done, True
            for _, conn in self._conns:
                conn.close()
            self._conns = []
        if not already and self._file is not None:
            with _open_files_lock:
                left = _open_files.get(self._file, 1) - 1
                if left > 0:
                    _open_files[self._file] = left
                else:
                    _open_files.pop(self._file, None)
