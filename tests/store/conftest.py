"""Fixtures for the session store tests.

``store`` runs a test against every backend in ``BACKENDS``; a backend joins the contract
suite by adding its name there and a branch in ``store_factory``.

PostgreSQL tests use the server at ``$VIGIL_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``), each in a fresh schema dropped afterwards, so
parallel and repeated runs never meet. When no server answers they are skipped, saying why.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

from vigil.clock import FakeClock
from vigil.store import SessionStore
from vigil.store.sqlite import SQLiteStore

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
POSTGRES_URL_ENV = "VIGIL_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"

StoreFactory = Callable[[], SessionStore]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The test server's URL, checked once per run; skips when there is no server to use."""
    url = os.environ.get(POSTGRES_URL_ENV, DEFAULT_POSTGRES_URL)
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"PostgreSQL tests need psycopg and psycopg_pool (install vigil[dev]): {exc}")
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        pytest.skip(f"no PostgreSQL server answers at ${POSTGRES_URL_ENV} or the default ({reason})")
    return url


def with_schema(url: str, schema: str) -> str:
    """``url`` with ``?schema=`` added."""
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def terminate_listeners(url: str, listen: str) -> list[bool]:
    """Cut the store's listening connections whose last statement matches ``listen`` (a LIKE
    pattern such as ``LISTEN "schema.%``), as a lost connection would; one result each."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'vigil listener' AND query LIKE %s",
            [listen],
        ).fetchall()
    return [ok for (ok,) in rows]


@pytest.fixture
def pg_schema(postgres_server: str) -> Iterator[str]:
    """A schema name no other test uses; dropped (if created) after the test."""
    schema = f"vigil_test_{uuid.uuid4().hex[:12]}"
    yield schema
    drop_schema(postgres_server, schema)


@pytest.fixture
def pg_url(postgres_server: str, pg_schema: str) -> str:
    """The test server's URL with this test's own ``?schema=``."""
    return with_schema(postgres_server, pg_schema)


@pytest.fixture(scope="session")
def pg_shared_url(postgres_server: str) -> Iterator[str]:
    """A migrated schema the contract tests share (emptied before each), dropped at the end.

    Creating and dropping a schema costs about 0.1 s, emptying one a few milliseconds.
    """
    from vigil.store.postgres import PostgresStore

    schema = f"vigil_test_{uuid.uuid4().hex[:12]}"
    url = with_schema(postgres_server, schema)
    PostgresStore(url).close()
    yield url
    drop_schema(postgres_server, schema)


def empty_schema(server_url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        for table in (
            "gateway_outbox",
            "gateway_inbox",
            "gateway_routes",
            "messages",
            "sessions",
            "system_prompts",
            "state_meta",
        ):
            conn.execute(f'DELETE FROM "{schema}".{table}')


@pytest.fixture
def pg_clean_url(postgres_server: str, pg_shared_url: str) -> str:
    """The shared schema's URL, emptied for this test (for tests that do not migrate)."""
    empty_schema(postgres_server, pg_shared_url.rpartition("schema=")[2])
    return pg_shared_url


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[StoreFactory]:
    """Opens further stores on the same database (another process would do the same)."""
    opened: list[SessionStore] = []
    if request.param == "sqlite":

        def open_one() -> SessionStore:
            return SQLiteStore(tmp_path / "state.db", clock=clock)

    elif request.param == "postgres":
        url = request.getfixturevalue("pg_clean_url")  # skips first when there is no server
        from vigil.store.postgres import PostgresStore


        def open_one() -> SessionStore:
            return PostgresStore(url, clock=clock)

    else:
        raise AssertionError(f"unknown store backend {request.param}")

    def make() -> SessionStore:
        store = open_one()
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> SessionStore:
    return store_factory()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where SQLite-specific tests keep their database."""
    return tmp_path / "state.db"
