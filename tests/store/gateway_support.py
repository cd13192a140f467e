"""What the gateway table tests share: routes to use, and raw SQL on a store's database for
the tests that damage a row or break a table on purpose."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Callable

import pytest

from vigil.store import SessionStore
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.store.sqlite import SQLiteStore

WEB = RouteKey("web", "browser-1")
TELEGRAM_GROUP = RouteKey("telegram", "-100200", thread="7", user="alice")
TELEGRAM_GROUP_BOB = RouteKey("telegram", "-100200", thread="7", user="bob")
SLACK = RouteKey("slack", "C01", thread="1700000000.000100")

RawSQL = Callable[[str], None]
"""Runs statements on the store's database outside the store; ``{s}.`` names its schema."""


def raw_sql_for(store: SessionStore, request: pytest.FixtureRequest) -> RawSQL:
    if isinstance(store, SQLiteStore):
        path = store.path

        def run_sqlite(statements: str) -> None:
            with closing(sqlite3.connect(path, isolation_level=None)) as conn:
                conn.executescript(statements.replace("{s}.", ""))

        return run_sqlite
    import psycopg

    server = request.getfixturevalue("postgres_server")
    schema = store.schema  # type: ignore[attr-defined]

    def run_postgres(statements: str) -> None:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(statements.replace("{s}", f'"{schema}"'))  # type: ignore[arg-type]

    return run_postgres


BREAK_OUTBOX = {
    "sqlite": "CREATE TRIGGER outbox_broken BEFORE INSERT ON gateway_outbox"
    " BEGIN SELECT RAISE(ABORT, 'the outbox is broken'); END",
    "postgres": "CREATE FUNCTION {s}.outbox_broken() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN RAISE EXCEPTION 'the outbox is broken'; END $$;"
    " CREATE TRIGGER outbox_broken BEFORE INSERT ON {s}.gateway_outbox"
    " FOR EACH ROW EXECUTE FUNCTION {s}.outbox_broken()",
}
REPAIR_OUTBOX = {
    "sqlite": "DROP TRIGGER outbox_broken",
    "postgres": "DROP TRIGGER outbox_broken ON {s}.gateway_outbox",
}


def backend_of(store: SessionStore) -> str:
    return "sqlite" if isinstance(store, SQLiteStore) else "postgres"
