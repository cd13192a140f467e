"""The scale-out session store: PostgreSQL, shared by any number of vigil processes and machines.

This module opens the store and keeps its ``state_meta``; sessions and their prompts are in
``postgres.sessions``, messages and search in ``postgres.messages``.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any, Iterable, Sequence, cast

from vigil.clock import Clock, SystemClock
from vigil.store.checks import check_key, encoded_swap
from vigil.store.meta_batch import encode_swaps
from vigil.store.postgres import meta
from vigil.store.postgres.conn import Database, parse_target
from vigil.store.postgres.gateway_tables import PostgresGatewayTables
from vigil.store.postgres.messages import PostgresMessages
from vigil.store.postgres.migrations import applied_version, open_schema
from vigil.store.postgres.notify import PostgresNotifications
from vigil.store.postgres.pairing_tables import PostgresPairingTables
from vigil.store.postgres.retry import Retried, retried
from vigil.store.postgres.sessions import PostgresSessions
from vigil.store.records import MetaEntry, MetaSwap
from vigil.store.rows import canonical_json


class PostgresStore(PostgresSessions, PostgresMessages):
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
        """The gateway's routes, inbox and outbox in this schema (see ``store.gateway.gateway_tables``)."""
        return self._gateway

    @property
    def pairing(self) -> PostgresPairingTables:
        """Pairing codes and paired platform users in this schema (see ``store.gateway.pairing_tables``)."""
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
        want, encoded = encoded_swap(key, expected, new)
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
