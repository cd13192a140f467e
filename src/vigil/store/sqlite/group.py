"""Group commit for the SQLite store: writes that threads of one process make at the same time
share one transaction, and so one commit and one fsync.

Leader and followers. A thread with a write to make queues it; if no other thread is
committing, it becomes the leader: it takes everything queued, runs each write in a
savepoint of one ``BEGIN IMMEDIATE`` transaction on its own connection, commits once, and
hands each writer its own result (or its own error: a write that fails is rolled back to
its savepoint and leaves the others alone). Writes that arrive meanwhile queue up and go
together in the next commit, led by the first of them. A thread alone never waits for
anybody and pays no savepoint: a single caller's write costs what it did before.

Durability is unchanged: a write returns only after the commit that holds it (with
``synchronous=FULL``, after the fsync); if that commit fails, every write in it fails.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Callable, Generic, TypeVar

from vigil.store.errors import StoreError
from vigil.store.sqlite.conn import Database, is_unwritable

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]
"""A write: runs inside the shared transaction on the connection it is given."""


class _Request(Generic[T]):
    __slots__ = ("work", "result", "error", "lead", "done")

    def __init__(self, work: Work[T]) -> None:
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.lead = False  # set by the previous leader: this request's thread leads next
        self.done = threading.Event()

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[no-any-return]


class GroupCommit:
    """Runs the writes of many threads in shared transactions on one :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._queue: list[_Request[Any]] = []
        self._leading = False
        self.commits = 0
        """Transactions committed (for tests and benchmarks: writes / commits = batch size)."""
        self.writes = 0
        self.pending = 0
        """Writes handed to :meth:`run` and not yet answered."""

    def run(self, work: Work[T]) -> T:
        """Run ``work`` in a transaction, durably committed when this returns.

        Errors ``work`` raises reach only its own caller (``sqlite3.Error`` translated to a
        ``StoreError``); a failed commit reaches everybody whose write it held.
        """
        request: _Request[T] = _Request(work)
        with self._lock:
            self.pending += 1
            self._queue.append(request)
            lead = not self._leading
            self._leading = True
        if not lead:
            request.done.wait()
            if not request.lead:
                return request.outcome()
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            self._commit(batch)
        finally:
            with self._lock:
                self.pending -= len(batch)
                if self._queue:
                    self._queue[0].lead = True
                    self._queue[0].done.set()
                else:
                    self._leading = False
            for other in batch:
                if other is not request:
                    other.done.set()
        return request.outcome()

    def _commit(self, batch: list[_Request[Any]]) -> None:
        with self._db.in_use():
            self._commit_on(batch)

    def _commit_on(self, batch: list[_Request[Any]]) -> None:
        try:
            conn = self._db.connection()
        except StoreError as exc:
            for request in batch:
                request.error = exc
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            if len(batch) == 1:
                batch[0].result = batch[0].work(conn)
            else:
                for request in batch:
                    self._run_in_savepoint(conn, request)
            conn.execute("COMMIT")
            self.commits += 1
            self.writes += len(batch)
            if any(request.error is None for request in batch):
                self._db.wrote()
        except BaseException as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            shared = self._db.failed(conn, exc) if isinstance(exc, sqlite3.Error) else exc
            for request in batch:
                if request.error is None:
                    request.result = None
                    request.error = _failure(self._db, shared, alone=len(batch) == 1)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt and the like: the others were told; stop here

    def _run_in_savepoint(self, conn: sqlite3.Connection, request: _Request[Any]) -> None:
        conn.execute("SAVEPOINT grouped")
        try:
            request.result = request.work(conn)
        except Exception as exc:  # this write fails alone; the rest of the batch goes on
            if isinstance(exc, sqlite3.Error) and is_unwritable(exc):
                raise  # a full disk or a read-only file fails every write alike: the batch ends
            # Some other errors end the whole transaction too; then ROLLBACK TO fails and the
            # error reaches everybody through the caller's handler.
            conn.execute("ROLLBACK TO grouped")
            request.error = _failure(self._db, exc, alone=True)
        conn.execute("RELEASE grouped")


def _failure(db: Database, exc: BaseException, *, alone: bool) -> BaseException:
    """What a writer whose write did not commit is told."""
    if isinstance(exc, sqlite3.Error):
        return db.translate(exc)
    if alone or isinstance(exc, StoreError):
        return exc
    if not isinstance(exc, Exception):
        return StoreError("the write was interrupted before it was committed; nothing was saved")
    return exc
