"""The migration that adds outbox claims, on both backends: replies queued before it are kept
as they were and can be claimed (nobody holds them) afterwards."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from vigil.clock import FakeClock
from vigil.store import SessionStore
from vigil.store.gateway.gateway_tables import PENDING, RouteKey
from vigil.store.sqlite import SQLiteStore
from vigil.store.sqlite import migrations as sqlite_migrations

ROUTE = RouteKey("telegram", "42")
OLD_ROWS = [("first", 10.0), ("second", 11.0)]


def version_of_claims(migrations: tuple) -> int:
    return next(m.version for m in migrations if m.name == "outbox claims")


def check_old_replies_are_claimable(store: SessionStore) -> None:
    tables = store.gateway
    before = tables.outbox_list()
    assert [(e.text, e.status, e.claimed_by, e.claim_until) for e in reversed(before)] == [
        ("first", PENDING, None, None), ("second", PENDING, None, None)
    ]
    claimed = tables.outbox_claim("worker-a", 20.0, limit=10, hold=5.0)
    assert [(e.text, e.claimed_by, e.claim_until) for e in claimed] == [("first", "worker-a", 25.0), ("second", "worker-a", 25.0)]
    assert tables.outbox_claim("worker-b", 20.0, limit=10, hold=5.0) == []


def test_a_sqlite_database_from_before_claims_gains_them(db_path: Path, clock: FakeClock) -> None:
    with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
        sqlite_migrations.migrate(conn, target=version_of_claims(sqlite_migrations.MIGRATIONS) - 1, now=1.0)
        conn.executemany(
            "INSERT INTO gateway_outbox (adapter, chat, kind, text, created_at, next_attempt_at)"
            " VALUES (?, ?, 'reply', ?, ?, ?)",
            [(ROUTE.adapter, ROUTE.chat, text, at, at) for text, at in OLD_ROWS],
        )
    store = SQLiteStore(db_path, clock=clock)
    try:
        assert store.schema_version() == sqlite_migrations.LATEST_VERSION
        check_old_replies_are_claimable(store)
    finally:
        store.close()


@pytest.mark.postgres
def test_a_postgres_schema_from_before_claims_gains_them(
    postgres_server: str, pg_url: str, pg_schema: str, clock: FakeClock
) -> None:
    psycopg = pytest.importorskip("psycopg")
    from vigil.store.postgres import PostgresStore
    from vigil.store.postgres import migrations as pg_migrations

    with psycopg.connect(postgres_server) as conn:
        pg_migrations.migrate(conn, pg_schema, target=version_of_claims(pg_migrations.MIGRATIONS) - 1, now=1.0)
        for text, at in OLD_ROWS:
            conn.execute(
                f'INSERT INTO "{pg_schema}".gateway_outbox (adapter, chat, kind, text, created_at, next_attempt_at)'
                " VALUES (%s, %s, 'reply', %s, %s, %s)",
                (ROUTE.adapter, ROUTE.chat, text, at, at),
            )
    store = PostgresStore(pg_url, clock=clock)
    try:
        assert store.schema_version() == pg_migrations.LATEST_VERSION
        check_old_replies_are_claimable(store)
    finally:
        store.close()
