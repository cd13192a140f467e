"""``Notifications`` on PostgreSQL: ``NOTIFY`` sent through the store's pool by a background
thread, ``LISTEN`` on a dedicated autocommit connection read by a listener thread.

Channels are namespaced by the store's schema (``<schema>.<channel>``), so two profiles in
one database never hear each other. A listener connection that is lost is opened again with
back-off (0.1 s doubling to 5 s) and every channel listened to again; subscribers' optional
``on_reconnect()`` is then called, since what was published meanwhile is lost.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import select
import threading
from collections import deque
from typing import Any, Callable

import psycopg
from psycopg import pq, sql

from vigil.backoff import Backoff, Streak
from vigil.store.errors import StoreError
from vigil.store.notify import check_channel, check_payload
from vigil.store.postgres.conn import CONNECT_TIMEOUT_SECONDS, Database

log = logging.getLogger(__name__)

SUBSCRIBE_TIMEOUT = 10.0
"""Seconds a subscribe waits for its ``LISTEN`` before failing."""
PING_SECONDS = 30.0
"""A quiet listener connection is checked this often, so a dead one is noticed and replaced."""
BACKOFF = (0.1, 5.0)
"""First and longest pause between attempts to open a lost listener connection again."""
SEND_RETRIES = (0.1, 0.5, 2.0)
"""Pauses between attempts to send a batch; after the last it is dropped (and logged)."""
MAX_BATCH = 500
CLOSE_FLUSH_SECONDS = 2.0


def namespaced(schema: str, channel: str) -> str:
    """The PostgreSQL channel for ``channel`` in ``schema``: ``schema.channel`` while that fits
    in an identifier (63 bytes); a long schema is cut and marked with a hash of its name
    (``~`` cannot occur in a schema name, so the short form of one never equals another's)."""
    name = f"{schema}.{check_channel(channel)}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(schema.encode()).hexdigest()[:8]
    return f"{schema[: 63 - len(channel) - 10]}~{digest}.{channel}"


class PostgresNotifications:
    """Notifications of one ``PostgresStore`` (see ``vigil.store.notify.Notifications``)."""

    def __init__(self, db: Database, schema: str) -> None:
        self._schema = schema
        self._sender = _Sender(db)
        self._listener = _Listener(db)

    def channel_name(self, channel: str) -> str:
        """The PostgreSQL channel ``channel`` is sent on (for diagnostics)."""
        return namespaced(self._schema, channel)

    def publish(self, channel: str, payload: str) -> None:
        self._sender.put(namespaced(self._schema, channel), check_payload(payload))

    def subscribe(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        return self._listener.subscribe(namespaced(self._schema, channel), callback)

    def flush(self, timeout: float = 5.0) -> bool:
        return self._sender.flush(timeout)

    def close(self) -> None:
        self._sender.close()
        self._listener.close()


class _Sender:
    """Sends queued notifications in order, all those queued at once in one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cond = threading.Condition()
        self._queue: deque[tuple[str, str]] = deque()
        self._queued = 0
        self._handled = 0
        self._closing = False
        self._thread: threading.Thread | None = None

    def put(self, channel: str, payload: str) -> None:
        with self._cond:
            if self._closing:
                raise StoreError(f"the notifications of {self._db.target.where} are closed")
            self._queue.append((channel, payload))
            self._queued += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="vigil-notify-sender", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        with self._cond:
            target = self._queued
            return self._cond.wait_for(lambda: self._handled >= target, timeout)

    def close(self) -> None:
        self.flush(CLOSE_FLUSH_SECONDS)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=CLOSE_FLUSH_SECONDS + sum(SEND_RETRIES))

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing)
                if not self._queue:
                    return
                batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
            self._send(batch)
            with self._cond:
                self._handled += len(batch)
                self._cond.notify_all()

    def _send(self, batch: list[tuple[str, str]]) -> None:
        for pause in (*SEND_RETRIES, None):
            try:
                with self._db.write() as conn:
                    conn.cursor().executemany("SELECT pg_notify(%s, %s)", batch)
                return
            except (StoreError, psycopg.Error) as exc:
                if pause is None or self._closing:
                    log.warning("dropped %d notifications: %s", len(batch), exc)
                    return
                threading.Event().wait(pause)


class _Listener:
    """One connection that LISTENs to every subscribed channel, read by one thread."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cond = threading.Condition()
        self._subs: dict[str, dict[int, Callable[[str], None]]] = {}
        self._tokens = itertools.count()
        self._requested = 0  # bumped by every change of the set of channels wanted
        self._synced = 0  # the last request the connection has caught up with
        self._failures = 0
        self._last_failure = ""
        self._listening: set[str] = set()
        self._closing = False
        self._pipe_open = True
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def subscribe(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        with self._cond:
            if self._closing:
                raise StoreError(f"the notifications of {self._db.target.where} are closed")
            token = next(self._tokens)
            self._subs.setdefault(channel, {})[token] = callback
            if channel not in self._listening:
                self._requested += 1
                target, failures = self._requested, self._failures
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="vigil-notify-listener", daemon=True)
                    self._thread.start()
                self._poke()
                done = self._cond.wait_for(
                    lambda: self._synced >= target or self._failures > failures or self._closing,
                    SUBSCRIBE_TIMEOUT,
                )
                if not done or self._synced < target:
                    self._remove(channel, token)
                    reason = self._last_failure if self._failures > failures else "no answer in time"
                    raise StoreError(f"cannot listen for notifications at {self._db.target.where}: {reason}")

        def unsubscribe() -> None:
            with self._cond:
                self._remove(channel, token)

        return unsubscribe

    def close(self) -> None:
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
            self._poke()
        if thread is not None:
            thread.join(timeout=CONNECT_TIMEOUT_SECONDS)
            if thread.is_alive():  # still connecting: it may yet read the pipe, leave it be
                return
        with self._cond:
            self._pipe_open = False
        os.close(self._wake_r)
        os.close(self._wake_w)

    # -- in the caller's thread, holding the lock -----------------------------------------------
    def _remove(self, channel: str, token: int) -> None:
        callbacks = self._subs.get(channel)
        if callbacks is None or callbacks.pop(token, None) is None:
            return
        if not callbacks:
            del self._subs[channel]
            self._requested += 1
            self._poke()

    def _poke(self) -> None:
        if not self._pipe_open:  # closed: its descriptor number may belong to another file now
            return
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass  # a full pipe wakes the thread just as well

    # -- in the listener thread ---------------------------------------------------------------
    def _run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        connected_before = False
        failures = Streak(Backoff(*BACKOFF))
        while not self._closing:
            try:
                if conn is None:
                    conn = self._connect()
                    self._set_listening(set())
                    self._sync(conn)
                    if connected_before:
                        self._reconnected()
                    connected_before = True
                    failures.reset()
                self._sync(conn)
                ready, _, _ = select.select([conn.fileno(), self._wake_r], [], [], PING_SECONDS)
                if self._wake_r in ready:
                    os.read(self._wake_r, 4096)
                if conn.fileno() in ready:
                    self._drain(conn)
                elif not ready:
                    conn.execute("SELECT 1")  # a quiet connection may be a dead one
            except (psycopg.Error, StoreError, OSError) as exc:
                if self._closing:
                    break
                message = self._db.target.scrub(str(exc))
                # Said once per outage; the attempts that follow are logged at debug level.
                level = logging.WARNING if failures.failures == 0 else logging.DEBUG
                pause = failures.next()
                log.log(level, "lost the notification listener at %s (%s); trying again in %.1f s",
                        self._db.target.where, message, pause)
                with self._cond:
                    self._failures += 1
                    self._last_failure = message
                    self._cond.notify_all()
                conn = self._discard(conn)
                select.select([self._wake_r], [], [], pause)
        self._discard(conn)

    def _connect(self) -> psycopg.Connection[Any]:
        target = self._db.target
        kwargs: dict[str, Any] = {"autocommit": True}
        defaults = {"connect_timeout": CONNECT_TIMEOUT_SECONDS, "application_name": "vigil listener"}
        kwargs.update((k, v) for k, v in defaults.items() if k not in target.url_params)
        conn = psycopg.Connection.connect(target.conninfo, **kwargs)
        conn.add_notify_handler(lambda n: self._deliver(n.channel, n.payload))
        return conn

    def _sync(self, conn: psycopg.Connection[Any]) -> None:
        with self._cond:
            wanted, target = set(self._subs), self._requested
            listening = set(self._listening)
        if target == self._synced and wanted == listening:
            return
        for channel in wanted - listening:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        for channel in listening - wanted:
            conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)))
        with self._cond:
            self._listening = wanted
            self._synced = target
            self._cond.notify_all()

    def _set_listening(self, channels: set[str]) -> None:
        with self._cond:
            self._listening = channels

    def _drain(self, conn: psycopg.Connection[Any]) -> None:
        pgconn = conn.pgconn
        pgconn.consume_input()  # raises when the connection is gone
        encoding = conn.info.encoding
        while (pgn := pgconn.notifies()) is not None:
            self._deliver(pgn.relname.decode(encoding), pgn.extra.decode(encoding))
        if pgconn.status == pq.ConnStatus.BAD:
            raise psycopg.OperationalError("the server closed the connection")

    def _deliver(self, channel: str, payload: str) -> None:
        with self._cond:
            callbacks = list(self._subs.get(channel, {}).values())
        for callback in callbacks:
            try:
                callback(payload)
            except Exception:  # noqa: BLE001 - one subscriber's bug must not stop the others
                log.exception("a notification subscriber on %s failed", channel)

    def _reconnected(self) -> None:
        with self._cond:
            callbacks = [cb for subs in self._subs.values() for cb in subs.values()]
        for callback in callbacks:
            on_reconnect = getattr(callback, "on_reconnect", None)
            if callable(on_reconnect):
                try:
                    on_reconnect()
                except Exception:  # noqa: BLE001
                    log.exception("a notification subscriber's on_reconnect failed")

    def _discard(self, conn: psycopg.Connection[Any] | None) -> None:
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass
        return None
