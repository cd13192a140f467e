"""Reaching the PostgreSQL server: the URL, a small connection pool, short transactions, and
errors a person can act on (naming user, host, port and database, never the password).

A lost connection is a delay (see ``retry``). The one failure after which running a
transaction again is not safe as it is, a connection lost during ``COMMIT``, is settled here:
the transaction's id is read before committing and its fate asked of the server afterwards
(``txid_status``); a commit that happened counts as done.
"""

from __future__ import annotations

import logging
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg.rows import RowMaker, no_result, tuple_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from vigil.store.errors import StoreError, StoreUnavailable, StoreUnwritable
from vigil.store.postgres.migrations import in_schema
from vigil.store.postgres.retry import BACKOFF, Retry, is_transient
from vigil.store.postgres.text import ESCAPE, escape_params, unescape

DEFAULT_SCHEMA = "vigil"
CONNECT_TIMEOUT_SECONDS = 10
"""Used unless the URL sets ``connect_timeout`` itself."""
WAIT_SECONDS = 5.0
"""How long one try of an operation waits for a pooled connection (a free one, or a new one
while the server is away) before it counts as failed and is tried again (``retry.RETRY_SECONDS``).
The pool's own reconnecting gives up after as long, so that the next try starts a fresh
attempt at once instead of waiting out the pool's back-off, which grows without bound."""
POOL_MAX_SIZE = 8

log = logging.getLogger(__name__)
# The pool and the driver warn of every lost connection they come across; the store replaces
# and retries those itself, so only their errors are worth printing.
logging.getLogger("psycopg").setLevel(logging.ERROR)

Run = Callable[..., "psycopg.Cursor[Any]"]
"""``Database.run`` bound to a connection: ``run(statement, params)`` returns the cursor."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class Target:
    """Where the store lives. ``where`` is safe to show; ``conninfo`` may hold a password."""

    conninfo: str
    schema: str
    where: str
    secrets: tuple[str, ...]
    url_params: frozenset[str]
    """The libpq parameters the URL's query sets itself."""

    def scrub(self, text: str) -> str:
        """``text`` on one line, with every form of the password replaced by ``***``."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return " ".join(text.split())


def parse_target(url: str, schema: str | None = None) -> Target:
    """Read a ``postgresql://`` URL; ``?schema=NAME`` (or ``schema``) picks the PostgreSQL schema.

    Every other query parameter goes to libpq as it is. ``StoreError`` if the schema name is
    not a plain lowercase identifier or the URL and the argument name different schemas.
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # the message names no part of the URL
        raise StoreError(f"invalid PostgreSQL URL: {exc}") from exc
    userinfo, _, hostspec = parts.netloc.rpartition("@")
    user, _, raw_password = userinfo.partition(":")
    secrets = {raw_password, unquote(raw_password)}
    kept, url_schema, names = [], None, set()
    for item in parts.query.split("&") if parts.query else []:
        key, _, value = item.partition("=")
        name = unquote(key)
        if name == "schema":
            url_schema = unquote(value)
            continue
        if name == "password":
            secrets |= {value, unquote(value)}
        names.add(name)
        kept.append(item)
    where = _describe(unquote(user), hostspec, unquote(parts.path.lstrip("/")))
    if schema is not None and url_schema is not None and schema != url_schema:
        raise StoreError(f"two schemas given for {where}: '{url_schema}' in the URL and '{schema}'")
    chosen = schema or url_schema or DEFAULT_SCHEMA
    if not _SCHEMA_NAME.fullmatch(chosen):
        raise StoreError(
            f"invalid PostgreSQL schema name '{chosen}': use lowercase letters, digits and _ "
            "(at most 63, not starting with a digit)"
        )
    base = url.split("?", 1)[0].split("#", 1)[0]
    conninfo = base + ("?" + "&".join(kept) if kept else "")
    return Target(conninfo, chosen, where, tuple(s for s in secrets if s), frozenset(names))


def _describe(user: str, hostspec: str, dbname: str) -> str:
    host = hostspec or "localhost"
    if "," not in host and ":" not in host.rpartition("]")[2]:  # one host, no port given
        host += ":5432"
    return f"{user + '@' if user else ''}{host}/{dbname or '(default database)'}"


def _unescaped_dict_row(cursor: Any) -> RowMaker[dict[str, Any]]:
    """Rows as dicts by column name, every string unescaped (see ``text.py``)."""
    description = cursor.description
    if description is None:
        return no_result
    names = [column.name for column in description]

    def make_row(values: Any) -> dict[str, Any]:
        return {n: unescape(v) if type(v) is str and ESCAPE in v else v for n, v in zip(names, values)}

    return make_row


def _reset(conn: psycopg.Connection[Any]) -> None:
    # Reads switch their connection to read-only snapshots; writes must get it back plain.
    conn.isolation_level = None
    conn.read_only = None


class Database:
    """A pool of connections to one server, handing out one transaction at a time.

    ``setup`` runs first, on a connection of its own (the migrations), so that a server that
    cannot be reached or a schema that cannot be used fails the constructor with a clear
    ``StoreError`` instead of a pool retrying in the background.
    """

    def __init__(
        self,
        target: Target,
        setup: Callable[[psycopg.Connection[Any]], None],
        *,
        max_size: int = POOL_MAX_SIZE,
    ) -> None:
        self.target = target
        self._statements: dict[str, str] = {}
        self._kwargs: dict[str, Any] = {"autocommit": False, "row_factory": _unescaped_dict_row}
        defaults = {"connect_timeout": CONNECT_TIMEOUT_SECONDS, "application_name": "vigil"}
        self._kwargs.update((k, v) for k, v in defaults.items() if k not in target.url_params)
        self.retry = Retry()
        """Runs one operation (a whole transaction) again while it fails transiently."""
        with self.connect() as conn:
            try:
                setup(conn)
            except psycopg.Error as exc:
                raise self.translate(exc) from exc
        self._max_size = max_size
        # No ``check``: _checked_connection checks each connection it hands out, without
        # the pool's pause of a second and more after every dead one it finds.
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            target.conninfo,
            kwargs=self._kwargs,
            min_size=1,
            max_size=max_size,
            open=False,
            reset=_reset,
            name=f"vigil {target.where}",
            timeout=WAIT_SECONDS,
            reconnect_timeout=WAIT_SECONDS,
        )
        self._pool.open(wait=False)

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection outside the pool (the caller closes it)."""
        try:
            return psycopg.Connection.connect(self.target.conninfo, **self._kwargs)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {self.target.where}: {self.target.scrub(str(exc))}"
            ) from exc

    @contextmanager
    def write(self) -> Iterator[psycopg.Connection[Any]]:
        """One read-committed transaction: committed on success, rolled back on any error."""
        with self._transaction(read_only=False) as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[psycopg.Connection[Any]]:
        """A read-only transaction whose queries all see the same snapshot."""
        with self._transaction(read_only=True) as conn:
            yield conn

    @contextmanager
    def _transaction(self, *, read_only: bool) -> Iterator[psycopg.Connection[Any]]:
        with self._checkout() as conn:
            if read_only:  # sent with the BEGIN, costs no round trip
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = True
                yield conn
            else:
                yield conn
                self._commit(conn)

    def _commit(self, conn: psycopg.Connection[Any]) -> None:
        """Commit ``conn``'s transaction. When the connection is lost on the way, ask the
        server whether the commit happened: if it did, this returns as if nothing was lost."""
        row = conn.cursor(row_factory=tuple_row).execute("SELECT txid_current_if_assigned()").fetchone()
        xid = None if row is None else row[0]
        backend = conn.info.backend_pid  # unknown once the connection is lost
        try:
            conn.commit()
        except psycopg.Error as exc:
            if xid is None or not is_transient(exc):  # nothing was written, or a plain refusal
                raise
            if self._outcome(xid, backend) != "committed":
                raise
            log.info("the connection was lost while committing; the server says the commit happened")

    def _outcome(self, xid: int, backend_pid: int) -> str:
        """``committed`` or ``aborted``: what became of transaction ``xid``, asked on a new
        connection until the server knows (a backend being terminated is still "in
        progress" for a moment; one cut off from us by the network, until it is terminated).
        ``StoreError`` if that cannot be learnt within the retry time."""
        deadline = time.monotonic() + self.retry.seconds
        tries, asked = 0, time.monotonic()
        while True:
            try:
                with self.connect() as conn:
                    conn.autocommit = True
                    cursor = conn.cursor(row_factory=tuple_row)
                    status = cursor.execute("SELECT txid_status(%s)", (xid,)).fetchone()[0]  # type: ignore[index]
                    if status in ("committed", "aborted"):
                        return str(status)
                    if status == "in progress" and time.monotonic() - asked > 1.0:
                        # Its COMMIT never arrived: end it, so that its fate is decided.
                        cursor.execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s"
                            " AND backend_xid::text = (%s::bigint %% 4294967296)::text",
                            (backend_pid, xid),
                        )
            except (StoreError, psycopg.Error) as exc:
                failure = str(exc)
            else:
                failure = f"transaction {xid} is {status or 'unknown to the server'}"
            pause = BACKOFF.delay(tries)
            if time.monotonic() + pause > deadline:
                raise StoreError(
                    f"PostgreSQL at {self.target.where}: the connection was lost while committing and "
                    f"whether the change was saved cannot be learnt ({self.target.scrub(failure)})"
                )
            time.sleep(pause)
            tries += 1

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one read statement as plain tuples (strings not unescaped), run in
        autocommit: one statement sees one snapshot by itself, and leaving out ``BEGIN``
        and ``COMMIT`` saves two round trips on the hot path of loading a history."""
        with self._checkout() as conn:
            conn.autocommit = True
            try:
                cursor = conn.cursor(row_factory=tuple_row)
                return cursor.execute(self._sql(statement), escape_params(params)).fetchall()  # type: ignore[arg-type]
            finally:
                conn.autocommit = False

    @contextmanager
    def _checkout(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            conn = self._checked_connection()
            try:
                with conn:  # psycopg's own: commits what is left open, rolls back on an error
                    yield conn
            finally:
                self._pool.putconn(conn)  # a broken one is replaced by the pool
        except PoolClosed as exc:
            raise StoreError(f"the session store at {self.target.where} is closed") from exc
        except PoolTimeout as exc:
            raise StoreUnavailable(
                f"no connection to PostgreSQL at {self.target.where} (is the server up? are all "
                "connections busy?)"
            ) from exc
        except psycopg.Error as exc:
            raise self.translate(exc) from exc

    def _checked_connection(self) -> psycopg.Connection[Any]:
        """A pooled connection that has just answered an empty round trip, so that a restarted
        server costs nobody a failed try on a connection that died while it sat in the pool.
        Dead ones are handed back (the pool replaces them) and the next is taken at once."""
        for _ in range(self._max_size):
            conn = self._pool.getconn()
            try:
                ConnectionPool.check_connection(conn)
                return conn
            except psycopg.Error:
                self._pool.putconn(conn)
        return self._pool.getconn()  # one more: a dead one fails the try, which is retried

    def _sql(self, statement: str) -> str:
        sql = self._statements.get(statement)
        if sql is None:
            sql = self._statements.setdefault(statement, in_schema(statement, self.target.schema))
        return sql

    def run(
        self, conn: psycopg.Connection[Any], statement: str, params: Sequence[Any] = ()
    ) -> psycopg.Cursor[Any]:
        """Execute ``statement`` (``{s}`` naming the schema) with every string escaped."""
        return conn.execute(self._sql(statement), escape_params(params))  # type: ignore[arg-type]

    def translate(self, exc: psycopg.Error) -> StoreError:
        """A one-line ``StoreError`` for a PostgreSQL failure, without the password:
        ``StoreUnavailable`` when trying again may succeed (see :func:`is_transient`),
        ``StoreUnwritable`` when the server refuses writes (its disk is full, it is read-only)."""
        said = self.target.scrub(str(exc))
        if exc.sqlstate == "53100":  # disk_full
            return StoreUnwritable(f"disk full on the PostgreSQL server at {self.target.where} ({said})")
        if exc.sqlstate == "25006":  # read_only_sql_transaction: a standby, or read-only by default
            return StoreUnwritable(f"the PostgreSQL server at {self.target.where} accepts no writes ({said})")
        kind = StoreUnavailable if is_transient(exc) else StoreError
        return kind(f"PostgreSQL at {self.target.where}: {said}")

    def close(self) -> None:
        """Close every connection; further use raises ``StoreError``."""
        self._pool.close()

