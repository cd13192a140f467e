"""The PostgreSQL store, looked at without changing it: the server answers, its version, the
schema version, a connection pool that gets a connection and its round-trip time, free
connection slots, and damaged prompts.

Opening the store the ordinary way would migrate the schema, so these checks connect
themselves, in read-only transactions, with short connect and statement timeouts.
"""

from __future__ import annotations

import importlib
import shlex
import statistics
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

from vigil.doctor.prompts import check_damaged_prompts, not_checked
from vigil.doctor.result import CheckResult, ok, problem, warning
from vigil.store.records import MetaEntry

if TYPE_CHECKING:
    import psycopg

    from vigil.store.postgres.conn import Target

AREA = "store"
CONNECT_SECONDS = 3
"""libpq's connect timeout (its minimum is 2 s), whatever the URL sets."""
STATEMENT_MS = 5000
POOL_SECONDS = 5.0
ROUND_TRIPS = 5
SLOW_MS = 250.0
INSTALL = "pip install 'vigil[postgres]'"


def check_postgres(url: str) -> list[CheckResult]:
    """Every PostgreSQL check, in order; later ones are skipped when the server cannot be reached."""
    try:
        for module in ("psycopg", "psycopg_pool"):
            importlib.import_module(module)
        from vigil.store.postgres.conn import parse_target
    except ImportError as exc:
        return [
            problem(
                AREA, "PostgreSQL server", f"the PostgreSQL store needs psycopg and psycopg_pool ({exc})", INSTALL
            )
        ]
    from vigil.store.errors import StoreError

    try:
        target = parse_target(url)
    except StoreError as exc:
        return [
            problem(
                AREA,
                "PostgreSQL server",
                str(exc),
                "correct store.url: vigil config set store.url postgresql://USER@HOST/DB",
            )
        ]
    shown = shlex.quote(_without_secrets(url))
    try:
        conn = _connect(target)
    except Exception as exc:  # psycopg's errors, whatever the server or the network did
        return [
            problem(
                AREA,
                "PostgreSQL server",
                f"cannot connect to PostgreSQL at {target.where}: {target.scrub(str(exc))}",
                f"start the server or correct store.url; check with: pg_isready -d {shown}",
            )
        ]
    try:
        results = [_server(conn, target)]
        try:
            results += _schema(conn, target, shown)
        except Exception as exc:  # a permission, a statement timeout, the server going away
            results.append(
                problem(
                    AREA,
                    "schema",
                    f"schema '{target.schema}' cannot be read: {target.scrub(str(exc))}",
                    f"check that the user in store.url may read it: psql {shown} -c '\\dn+ {target.schema}'",
                )
            )
    finally:
        conn.close()
    results.append(_pool(target))
    return results


def read_meta(url: str, key: str) -> MetaEntry | None:
    """The ``state_meta`` entry under ``key``, or ``None`` (also for a schema not created yet)."""
    from vigil.store.postgres.conn import parse_target
    from vigil.store.postgres.text import unescape
    from vigil.store.rows import meta_value

    target = parse_target(url)
    with _connection(target) as conn:
        found = conn.execute("SELECT pg_catalog.to_regclass(%s)", (f'"{target.schema}".state_meta',)).fetchone()
        if found is None or found[0] is None:
            return None
        row = conn.execute(
            f'SELECT value, updated_at FROM "{target.schema}".state_meta WHERE key = %s', (key,)
        ).fetchone()
    if row is None:
        return None
    return MetaEntry(key, meta_value(unescape(row[0]), key), row[1])


def list_meta(url: str, prefix: str) -> list[MetaEntry]:
    """The ``state_meta`` entries whose key starts with ``prefix`` (none for a schema not
    created yet)."""
    from vigil.store.postgres.conn import parse_target
    from vigil.store.postgres.text import unescape
    from vigil.store.rows import meta_value

    target = parse_target(url)
    with _connection(target) as conn:
        found = conn.execute("SELECT pg_catalog.to_regclass(%s)", (f'"{target.schema}".state_meta',)).fetchone()
        if found is None or found[0] is None:
            return []
        rows = conn.execute(
            f'SELECT key, value, updated_at FROM "{target.schema}".state_meta'
            " WHERE left(key, length(%s)) = %s ORDER BY key",
            (prefix, prefix),
        ).fetchall()
    return [MetaEntry(key, meta_value(unescape(value), key), updated) for key, value, updated in rows]


def _kwargs() -> dict[str, Any]:
    return {"connect_timeout": CONNECT_SECONDS, "application_name": "vigil doctor", "autocommit": False}


def _connect(target: Target) -> psycopg.Connection[Any]:
    """A connection whose every transaction is read-only and whose statements are cut short."""
    import psycopg

    conn = psycopg.Connection.connect(target.conninfo, **_kwargs())
    try:
        conn.read_only = True
        conn.execute(f"SET statement_timeout = {STATEMENT_MS}")
        conn.commit()
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def _connection(target: Target) -> Iterator[psycopg.Connection[Any]]:
    conn = _connect(target)
    try:
        yield conn
    finally:
        conn.close()


def _without_secrets(url: str) -> str:
    """``url`` without its password and query, for a command to copy (libpq tools take URLs)."""
    parts = urlsplit(url)
    userinfo, at, hostspec = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit((parts.scheme, f"{user}@{hostspec}" if at and user else hostspec, parts.path, "", ""))


def _server(conn: psycopg.Connection[Any], target: Target) -> CheckResult:
    number = conn.info.server_version
    major, minor = (number // 10000, number % 10000) if number >= 100000 else (number // 100, number % 100)
    return ok(AREA, "PostgreSQL server", f"{target.where} answers (PostgreSQL {major}.{minor})")


def _schema(conn: psycopg.Connection[Any], target: Target, shown: str) -> list[CheckResult]:
    from vigil.doctor.schema import check_version
    from vigil.store.postgres.migrations import MIGRATIONS, applied_version
    from vigil.store.postgres.text import unescape

    schema = target.schema
    version = applied_version(conn, schema)
    if version == 0 and _holds_relations(conn, schema):
        return [
            problem(
                AREA,
                "schema",
                f"PostgreSQL schema '{schema}' at {target.where} holds tables of some other program",
                "choose another schema: add ?schema=NAME to store.url",
            )
        ]
    results = [
        check_version(
            version, MIGRATIONS, f"schema '{schema}'", backup=f"pg_dump -n {schema} {shown} > vigil-backup.sql"
        )
    ]
    if version == MIGRATIONS[-1].version:
        results.append(
            check_damaged_prompts(lambda sql, params: _rows(conn, sql, params), f'"{schema}".', unescape)
        )
    else:
        results.append(not_checked(version, MIGRATIONS[-1].version))
    return results


def _rows(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql, tuple(params) or None).fetchall())


def _holds_relations(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s)",
        (schema,),
    ).fetchone()
    return bool(row and row[0])


def _pool(target: Target) -> CheckResult:
    """A pool like the store's gets a connection in time; the round trip and free slots."""
    from psycopg_pool import ConnectionPool

    from vigil.store.postgres.conn import POOL_MAX_SIZE

    pool: ConnectionPool[Any] = ConnectionPool(
        target.conninfo,
        kwargs=_kwargs(),
        min_size=1,
        max_size=1,
        open=False,
        timeout=POOL_SECONDS,
        name="vigil doctor",
    )
    try:
        try:
            pool.open(wait=True, timeout=POOL_SECONDS)
            with pool.connection(timeout=POOL_SECONDS) as conn:
                conn.read_only = True
                timings = []
                for _ in range(ROUND_TRIPS):
                    start = time.perf_counter()
                    conn.execute("SELECT 1").fetchone()
                    timings.append((time.perf_counter() - start) * 1000)
                used, limit, reserved = conn.execute(
                    "SELECT (SELECT count(*) FROM pg_catalog.pg_stat_activity),"
                    " current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int"
                ).fetchone() or (0, 0, 0)
                conn.rollback()
        except Exception as exc:  # a pool timeout, or the server going away meanwhile
            return problem(
                AREA,
                "connection pool",
                f"no pooled connection within {POOL_SECONDS:g} s: {target.scrub(str(exc))}",
                "check the server's load and max_connections",
            )
    finally:
        pool.close()
    latency = statistics.median(timings)
    free = int(limit) - int(reserved) - int(used)
    detail = (
        f"a pooled connection answers in {latency:.2f} ms (median of {ROUND_TRIPS}); "
        f"{used} of {limit} server connections in use"
    )
    if free < POOL_MAX_SIZE:
        return warning(
            AREA,
            "connection pool",
            detail + f": fewer than the {POOL_MAX_SIZE} a gateway's pool may open are free",
            "raise max_connections on the server, or stop idle clients",
        )
    if latency > SLOW_MS:
        return warning(
            AREA,
            "connection pool",
            detail + ": slow; every store call pays it",
            "run the gateway close to the database",
        )
    return ok(AREA, "connection pool", detail)
