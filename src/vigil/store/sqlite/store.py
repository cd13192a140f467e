"""The embedded session store: one SQLite file (``state.db``) in WAL mode.

This module opens the file and keeps its ``state_meta``; sessions and their prompts are in
``sqlite.sessions``, messages and search in ``sqlite.messages``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from vigil.clock import Clock, SystemClock
from vigil.store.checks import check_key, encoded_swap
from vigil.store.errors import SchemaTooNew, StoreUnreadable, StoreUnwritable
from vigil.store.meta_batch import encode_swaps
from vigil.store.records import MetaEntry, MetaSwap
from vigil.store.rows import canonical_json
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
from vigil.store.sqlite.messages import SQLiteMessages
from vigil.store.sqlite.migrations import LATEST_VERSION, applied_version, migrate
from vigil.store.sqlite.sessions import SQLiteSessions

if TYPE_CHECKING:
    from vigil.store.sqlite.gateway_tables import SQLiteGatewayTables
    from vigil.store.sqlite.pairing_tables import SQLitePairingTables


class SQLiteStore(SQLiteSessions, SQLiteMessages):
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
        """The gateway's routes, inbox and outbox in this file (see ``store.gateway.gateway_tables``)."""
        if self._gateway is None:
            from vigil.store.sqlite.gateway_tables import SQLiteGatewayTables

            self._gateway = SQLiteGatewayTables(self._db, self._group)
        return self._gateway

    @property
    def pairing(self) -> SQLitePairingTables:
        """Pairing codes and paired platform users in this file (see ``store.gateway.pairing_tables``)."""
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
        want, encoded = encoded_swap(key, expected, new)
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
