"""The PostgreSQL schema a store is migrated into: checking it may be written, creating its
tables (the PostgreSQL store's own migrations), copying batches with ``COPY``, remembering how
far each table got, and reading it back for the verification.

Progress lives in the target itself, in the ``state_meta`` row ``MARKER_KEY``: the source's
identity and, per table, the last source rowid copied. Each batch and its new position commit
in one transaction, so after a Ctrl-C or a SIGKILL the marker says exactly what is there, and
the same command goes on from it. While the marker is there, the schema is an unfinished
migrate from that source (a re-run from it is not "non-empty"); it goes once the copy is
verified. A session-level advisory lock keeps two migrates out of one schema.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from vigil.store.errors import StoreError
from vigil.store.rows import MESSAGE_SELECT, messages_from_rows
from vigil.store.transfer.errors import MigrateError, TargetNotEmpty
from vigil.store.transfer.tables import (
    MARKER_KEY,
    TABLES,
    Digest,
    Table,
    canonical_message,
    canonical_row,
)
from vigil.config.store_location import store_location

try:  # psycopg is an optional dependency: without it, check_url says what to install
    import psycopg

    from vigil.store.postgres.conn import CONNECT_TIMEOUT_SECONDS, parse_target
    from vigil.store.postgres.migrations import applied_version, in_schema, open_schema
    from vigil.store.postgres.text import escape, unescape
except ImportError:  # pragma: no cover - exercised only without the postgres extra
    psycopg = None  # type: ignore[assignment]

_LOCK_CLASS = 0x76736D67  # "vsmg": apart from the store's own advisory lock classes
_READ_ROWS = 2000


def check_url(url: str) -> Any:
    """The parsed target of ``--to URL`` (a ``postgres.conn.Target``), without connecting.

    ``MigrateError`` for anything but a usable ``postgresql://`` URL, or when psycopg is
    not installed; the message never shows a password.
    """
    try:
        where = store_location(url)
    except ValueError as exc:
        raise MigrateError(f"--to: {exc}") from None
    if not isinstance(where, str):
        raise MigrateError(
            "--to must name a PostgreSQL database (postgresql://USER@HOST/DB?schema=NAME), not an SQLite file"
        )
    if psycopg is None:
        raise MigrateError("migrating to PostgreSQL needs psycopg: install vigil[postgres]")
    try:
        return parse_target(url)
    except StoreError as exc:
        raise MigrateError(f"--to: {exc}") from None


class PostgresTarget:
    """The schema ``url`` names, opened for the migrate of the source ``identity``.

    Refuses (``TargetNotEmpty``, nothing written) a schema holding vigil rows, unless they
    are an unfinished migrate from this same source (then it resumes) or ``force`` is given
    (then every vigil table is emptied first: :attr:`emptied`). Otherwise the schema is
    created or brought to the newest version by the PostgreSQL store's migrations, and the
    marker is written.
    """

    def __init__(self, url: str, identity: dict[str, Any], *, force: bool, now: float) -> None:
        self._target = check_url(url)
        self.schema: str = self._target.schema
        self.where: str = self._target.where
        self._identity = identity
        self._now = now
        self._conn = self._connect()
        try:
            self._lock()
            self.resumed, self.emptied, self.positions = self._open(force)
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        """End the connection (and with it the advisory lock)."""
        self._conn.close()

    # -- opening --------------------------------------------------------------------------
    def _connect(self) -> Any:
        params = self._target.url_params
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            kwargs["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        if "application_name" not in params:
            kwargs["application_name"] = "vigil store migrate"
        try:
            return psycopg.connect(self._target.conninfo, **kwargs)
        except psycopg.Error as exc:
            raise MigrateError(
                f"cannot connect to PostgreSQL at {self.where}: {self._target.scrub(str(exc))}"
            ) from None

    def _lock(self) -> None:
        try:
            got = self._sql(
                "SELECT pg_catalog.pg_try_advisory_lock(%s::int4, pg_catalog.hashtext(%s))",
                (_LOCK_CLASS, self.schema),
            ).fetchone()
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        if not got or not got[0]:
            raise MigrateError(
                f"another `vigil store migrate` is writing into schema '{self.schema}' at {self.where}; "
                "wait for it to finish"
            )

    def _open(self, force: bool) -> tuple[bool, bool, dict[str, int]]:
        """Decide, migrate the schema and write the marker, all in one transaction."""
        try:
            with self._conn.transaction():
                version = applied_version(self._conn, self.schema)
                counts = self._holdings() if version else {}
                marker = self._marker() if version else None
                positions = _positions(marker, self._identity)
                held = any(counts.values()) or marker is not None
                if held and not force and positions is None:
                    raise TargetNotEmpty(self._refusal(counts, marker))
                open_schema(self._conn, self.schema, self.where, now=self._now)
                if positions is not None and not force:
                    return True, False, positions
                if held:
                    names = ", ".join(f'{{s}}."{t.name}"' for t in TABLES)
                    self._sql(f"TRUNCATE {names} RESTART IDENTITY")
                self._sql(
                    "INSERT INTO {s}.state_meta (key, value, updated_at) VALUES (%s, %s, %s)",
                    (MARKER_KEY, self._marker_value({}), self._now),
                )
                return False, held, {}
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    def _holdings(self) -> dict[str, int]:
        """Rows per vigil table that exists in the schema (the marker not counted)."""
        counts = {}
        for table in TABLES:
            found = self._sql("SELECT pg_catalog.to_regclass(%s)", (f'"{self.schema}".{table.name}',)).fetchone()
            if found is None or found[0] is None:
                continue
            where = " WHERE key <> %s" if table.name == "state_meta" else ""
            params = (MARKER_KEY,) if where else ()
            counts[table.name] = int(self._sql(f"SELECT count(*) FROM {{s}}.{table.name}{where}", params).fetchone()[0])
        return counts

    def _marker(self) -> dict[str, Any] | None:
        """The decoded marker (``{}`` when damaged), or ``None`` when there is none."""
        found = self._sql("SELECT pg_catalog.to_regclass(%s)", (f'"{self.schema}".state_meta',)).fetchone()
        if found is None or found[0] is None:
            return None
        row = self._sql("SELECT value FROM {s}.state_meta WHERE key = %s", (MARKER_KEY,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(unescape(row[0]))
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def _refusal(self, counts: dict[str, int], marker: dict[str, Any] | None) -> str:
        place = f"PostgreSQL schema '{self.schema}' at {self.where}"
        advice = "use --force to empty it first, or choose another schema (?schema=NAME)"
        if marker and marker.get("source") == self._identity:
            return f"{place} holds an unfinished migrate from this store, but its progress record is damaged - {advice}"
        if marker is not None:
            source = marker.get("source")
            path = source.get("path") if isinstance(source, dict) else None
            return (
                f"{place} holds an unfinished migrate from another store ({path or 'unknown'}); "
                f"nothing was written - {advice}"
            )
        total = sum(counts.values())
        return (
            f"{place} already holds a vigil store ({counts.get('sessions', 0)} sessions, {total} rows "
            f"in all); nothing was written - {advice}"
        )

    def _marker_value(self, positions: dict[str, int]) -> str:
        return json.dumps({"source": self._identity, "positions": positions, "started_at": self._now},
                          sort_keys=True, separators=(",", ":"))

    # -- copying --------------------------------------------------------------------------
    def write_batch(self, table: Table, rows: Sequence[Sequence[Any]], last_rowid: int) -> None:
        """Copy ``rows`` (values in ``table``'s column order) and record ``last_rowid`` as
        copied, in one transaction."""
        columns = ", ".join(table.column_names)
        positions = {**self.positions, table.name: last_rowid}
        try:
            with self._conn.transaction():
                with self._conn.cursor().copy(in_schema(f"COPY {{s}}.{table.name} ({columns}) FROM STDIN",
                                                              self.schema)) as copy:
                    for values in rows:
                        copy.write_row([escape(v) if type(v) is str else v for v in values])
                updated = self._sql(
                    "UPDATE {s}.state_meta SET value = %s, updated_at = %s WHERE key = %s",
                    (self._marker_value(positions), self._now, MARKER_KEY),
                ).rowcount
                if updated != 1:
                    raise MigrateError(
                        f"the progress record {MARKER_KEY} vanished from schema '{self.schema}' at {self.where} "
                        "during the copy (did something else write there?); re-run with --force to start over"
                    )
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        self.positions = positions

    def fix_parents(self, links: Iterable[tuple[str, str]]) -> None:
        """Give sessions copied before their parent their ``parent_id`` back."""
        pairs = list(links)
        if not pairs:
            return
        try:
            with self._conn.transaction():
                self._sql(
                    "UPDATE {s}.sessions s SET parent_id = l.parent FROM unnest(%s::text[], %s::text[])"
                    " AS l(id, parent) WHERE s.id = l.id",
                    ([escape(a) for a, _ in pairs], [escape(b) for _, b in pairs]),
                )
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    def set_high_water(self, table: Table, high: int) -> None:
        """Make ``table``'s next generated id follow ``high`` (the source's AUTOINCREMENT mark):
        an id the source gave out once, even to a deleted row, is never given out again."""
        if table.identity is None or high <= 0:
            return
        self._sql(
            "SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence(%s, %s), %s)",
            (f'"{self.schema}".{table.name}', table.identity, high),
        )

    def finish(self) -> None:
        """The copy is verified: the marker goes, and the planner learns the new tables."""
        try:
            with self._conn.transaction():
                self._sql("DELETE FROM {s}.state_meta WHERE key = %s", (MARKER_KEY,))
            for table in TABLES:
                self._sql(f"ANALYZE {{s}}.{table.name}")
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    # -- reading back ---------------------------------------------------------------------
    def digest(self, table: Table) -> Digest:
        """Count and content hash of ``table`` as the PostgreSQL store reads it."""
        digest = Digest()
        if table.name == "messages":
            sql = f"SELECT session_id, {MESSAGE_SELECT}, NULL FROM {{s}}.messages"
            params: tuple[Any, ...] = ()
        else:
            where = " WHERE key <> %s" if table.name == "state_meta" else ""
            params = (MARKER_KEY,) if where else ()
            sql = f"SELECT {', '.join(table.column_names)} FROM {{s}}.{table.name}{where}"
        names = table.column_names
        try:
            with self._conn.transaction():
                cursor = self._conn.cursor(name=f"vigil_verify_{table.name}")
                cursor.itersize = _READ_ROWS
                cursor.execute(in_schema(sql, self.schema), params)
                for raw in cursor:
                    row = [unescape(v) if type(v) is str else v for v in raw]
                    if table.name == "messages":
                        digest.add(canonical_message(messages_from_rows(row[0], [tuple(row[1:])])[0]))
                    else:
                        digest.add(canonical_row(table, dict(zip(names, row))))
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        return digest

    # -- plumbing -------------------------------------------------------------------------
    def _sql(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(in_schema(statement, self.schema), params)

    def _translate(self, exc: Exception) -> MigrateError:
        return MigrateError(f"PostgreSQL at {self.where}: {self._target.scrub(str(exc))}")


def _positions(marker: dict[str, Any] | None, identity: dict[str, Any]) -> dict[str, int] | None:
    """How far each table got, when ``marker`` is an unfinished migrate from ``identity``."""
    if not marker or marker.get("source") != identity:
        return None
    positions = marker.get("positions")
    if not isinstance(positions, dict) or not all(type(v) is int for v in positions.values()):
        return None
    return positions
