"""Schema migrations of the PostgreSQL store: its own schema, forward-only, recorded, race-safe."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from vigil.clock import FakeClock
from vigil.store import SchemaTooNew, StoreError, StoreUnreadable
from vigil.store.gateway.gateway_tables import RouteKey

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from vigil.store.postgres import PostgresStore  # noqa: E402
from vigil.store.postgres.migrations import (  # noqa: E402
    LATEST_VERSION,
    MIGRATIONS,
    applied_version,
    migrate,
)


def query(server: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(server, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def ledger(server: str, schema: str) -> list[tuple[Any, ...]]:
    return query(server, f'SELECT version, applied_at FROM "{schema}".schema_migrations ORDER BY version')


def tables(server: str, schema: str) -> list[str]:
    rows = query(server, "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", schema)
    return [r[0] for r in rows]


def test_migrations_are_numbered_from_one() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, LATEST_VERSION + 1))


def test_a_missing_schema_is_created_at_the_latest_version(
    postgres_server: str, pg_url: str, pg_schema: str, clock: FakeClock
) -> None:
    assert tables(postgres_server, pg_schema) == []
    store = PostgresStore(pg_url, clock=clock)
    assert store.schema == pg_schema and store.schema_version() == LATEST_VERSION
    store.close()
    assert ledger(postgres_server, pg_schema) == [(v, clock.now()) for v in range(1, LATEST_VERSION + 1)]
    assert {"sessions", "messages", "system_prompts", "state_meta", "schema_migrations"} <= set(
        tables(postgres_server, pg_schema)
    )
    # Nothing leaked into the default schema.
    assert not set(tables(postgres_server, "public")) & {"sessions", "messages", "schema_migrations"}


def test_reopening_applies_nothing_twice(
    postgres_server: str, pg_url: str, pg_schema: str, clock: FakeClock
) -> None:
    PostgresStore(pg_url, clock=clock).close()
    first = ledger(postgres_server, pg_schema)
    clock.set_sync(clock.now() + 60)
    store = PostgresStore(pg_url, clock=clock)
    session = store.create_session(source="cli")
    store.close()
    assert ledger(postgres_server, pg_schema) == first
    reopened = PostgresStore(pg_url, clock=clock)
    assert reopened.get_session(session.id) == session
    reopened.close()


def test_migrate_to_a_target_and_never_back(postgres_server: str, pg_schema: str) -> None:
    with psycopg.connect(postgres_server) as conn:
        assert applied_version(conn, pg_schema) == 0
        assert migrate(conn, pg_schema, target=0) == 0
        assert tables(postgres_server, pg_schema) == []
        assert migrate(conn, pg_schema) == LATEST_VERSION
        assert migrate(conn, pg_schema) == LATEST_VERSION
        assert migrate(conn, pg_schema, target=0) == LATEST_VERSION  # forward only: nothing undone
        with pytest.raises(ValueError):
            migrate(conn, pg_schema, target=LATEST_VERSION + 1)
    assert [v for v, _ in ledger(postgres_server, pg_schema)] == list(range(1, LATEST_VERSION + 1))


def test_a_newer_schema_is_refused_and_left_alone(postgres_server: str, pg_url: str, pg_schema: str) -> None:
    store = PostgresStore(pg_url)
    store.create_session(source="cli")
    store.close()
    query(postgres_server, f'INSERT INTO "{pg_schema}".schema_migrations VALUES (%s, 0)', LATEST_VERSION + 5)
    before = ledger(postgres_server, pg_schema)
    with pytest.raises(SchemaTooNew) as refused:
        PostgresStore(pg_url)
    message = str(refused.value)
    assert f"schema {LATEST_VERSION + 5}" in message and f"knows up to {LATEST_VERSION}" in message
    assert "upgrade vigil" in message and pg_schema in message and "127.0.0.1:5432/test" in message
    assert ledger(postgres_server, pg_schema) == before
    assert query(postgres_server, f'SELECT COUNT(*) FROM "{pg_schema}".sessions') == [(1,)]


def test_another_programs_schema_is_refused_and_left_alone(
    postgres_server: str, pg_url: str, pg_schema: str
) -> None:
    query(postgres_server, f'CREATE SCHEMA "{pg_schema}"')
    query(postgres_server, f'CREATE TABLE "{pg_schema}".recipes (name text)')
    with pytest.raises(StoreUnreadable, match="other program"):
        PostgresStore(pg_url)
    assert tables(postgres_server, pg_schema) == ["recipes"]


def test_processes_opening_a_new_schema_together(postgres_server: str, pg_url: str, pg_schema: str) -> None:
    """Each opener has its own connections, as separate processes would; the advisory lock
    makes all but one wait and then find the schema migrated."""
    openers = 6
    barrier = threading.Barrier(openers)
    results: list[str] = []

    def open_and_create() -> None:
        barrier.wait()
        try:
            store = PostgresStore(pg_url)
            try:
                store.create_session(source="race")
            finally:
                store.close()
            results.append("ok")
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            results.append(repr(exc))

    threads = [threading.Thread(target=open_and_create) for _ in range(openers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ok"] * openers
    assert [v for v, _ in ledger(postgres_server, pg_schema)] == list(range(1, LATEST_VERSION + 1))
    assert query(postgres_server, f'SELECT COUNT(*) FROM "{pg_schema}".sessions') == [(openers,)]


def test_the_schema_can_be_named_by_argument(postgres_server: str, pg_schema: str) -> None:
    store = PostgresStore(postgres_server, schema=pg_schema)
    assert store.schema == pg_schema
    store.close()
    assert "sessions" in tables(postgres_server, pg_schema)
    with pytest.raises(StoreError, match="two schemas"):
        PostgresStore(f"{postgres_server}?schema={pg_schema}", schema="vigil_other")


@pytest.mark.parametrize("bad", ["Vigil", "vigil-test", "1vigil", 'x"; DROP SCHEMA public; --', "a" * 64])
def test_a_bad_schema_name_is_refused_before_connecting(bad: str) -> None:
    with pytest.raises(StoreError, match="schema name"):
        PostgresStore("postgresql://nobody:secret@127.0.0.1:1/none", schema=bad)


def test_schemas_in_one_database_are_separate(postgres_server: str, pg_schema: str) -> None:
    other = pg_schema + "_b"
    try:
        one = PostgresStore(postgres_server, schema=pg_schema)
        two = PostgresStore(postgres_server, schema=other)
        mine = one.create_session(source="cli", session_id="aaaa")
        two.create_session(source="cli", session_id="aaaa")  # the same id is free over there
        one.set_meta("k", 1)
        assert two.get_meta("k") is None and [s.id for s in two.list_sessions()] == ["aaaa"]
        assert one.get_session("aaaa") == mine
        one.close()
        two.close()
    finally:
        query(postgres_server, f'DROP SCHEMA IF EXISTS "{other}" CASCADE')


def test_a_first_version_schema_gains_the_gateway_tables(
    postgres_server: str, pg_url: str, pg_schema: str, clock: FakeClock
) -> None:
    with psycopg.connect(postgres_server) as conn:
        assert migrate(conn, pg_schema, target=1, now=100.0) == 1
    query(
        postgres_server,
        f'INSERT INTO "{pg_schema}".sessions (id, source, title, started_at, updated_at) VALUES (%s, %s, %s, 1, 2)',
        "aaaaaaaaaaaa", "cli", "old talk",
    )
    query(
        postgres_server,
        f'INSERT INTO "{pg_schema}".messages (session_id, seq, role, content, created_at) VALUES (%s, 1, %s, %s, 1)',
        "aaaaaaaaaaaa", "user", "remember the lighthouse keeper",
    )
    store = PostgresStore(pg_url, clock=clock)
    assert store.schema_version() == LATEST_VERSION >= 2
    assert ledger(postgres_server, pg_schema) == [(1, 100.0)] + [(v, clock.now()) for v in range(2, LATEST_VERSION + 1)]
    assert {"gateway_routes", "gateway_inbox", "gateway_outbox"} <= set(tables(postgres_server, pg_schema))
    old = store.get_session("aaaaaaaaaaaa")
    assert old.title == "old talk" and [m.content for m in store.get_messages(old.id)] == ["remember the lighthouse keeper"]
    route = RouteKey("telegram", "42")
    store.gateway.route_set(route, old.id, now=clock.now())
    entry, new = store.gateway.inbox_accept(route, "m1", "hello again", received_at=clock.now())
    assert new and store.gateway.routes_of(old.id) == [route]
    store.delete_session(old.id)
    assert store.gateway.route_get(route) is None and store.gateway.inbox_get(entry.id) == entry
    store.close()
