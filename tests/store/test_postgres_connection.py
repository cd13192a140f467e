"""Reaching the PostgreSQL server: clear one-line errors that never show the password."""

from __future__ import annotations

import sys
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

from vigil.store import StoreError, open_store

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from vigil.store.postgres import PostgresStore  # noqa: E402

PASSWORD = "hunter2-s3cret"


def with_database(server: str, dbname: str) -> str:
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path="/" + dbname))


def assert_clear(message: str, *expected: str) -> None:
    assert "\n" not in message
    assert PASSWORD not in message and "hunter" not in message, message
    for part in expected:
        assert part in message, message


def test_no_server_is_a_quick_clear_error() -> None:
    started = time.monotonic()
    with pytest.raises(StoreError) as refused:
        PostgresStore(f"postgresql://bob:{PASSWORD}@127.0.0.1:1/notes?connect_timeout=2")
    assert time.monotonic() - started < 5
    assert_clear(str(refused.value), "cannot connect to PostgreSQL at bob@127.0.0.1:1/notes", "refused")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://bob:hunter%zz2-s3cret@127.0.0.1:1/notes",  # libpq quotes the bad token
        f"postgresql://bob:{PASSWORD}@127.0.0.1:notaport/notes",
        f"postgresql://bob@127.0.0.1:1/notes?password={PASSWORD}&bogus=1",
        f"postgresql://bob:{PASSWORD}@[::1/notes",
        f"postgres://bob:{PASSWORD}@127.0.0.1:1/notes?sslmode=nonsense",
    ],
)
def test_a_bad_url_is_a_clear_error_without_the_password(url: str) -> None:
    with pytest.raises(StoreError) as refused:
        open_store(url)
    assert_clear(str(refused.value), "PostgreSQL")


def test_an_unknown_database_or_user_is_named(postgres_server: str) -> None:
    with pytest.raises(StoreError) as refused:
        PostgresStore(with_database(postgres_server, "vigil_no_such_db"))
    assert_clear(str(refused.value), "/vigil_no_such_db", 'database "vigil_no_such_db" does not exist')
    parts = urlsplit(postgres_server)
    netloc = f"vigil_no_such_role:{PASSWORD}@{parts.hostname}:{parts.port or 5432}"
    stranger = urlunsplit(parts._replace(netloc=netloc))
    with pytest.raises(StoreError) as refused:
        PostgresStore(stranger)
    assert_clear(str(refused.value), "vigil_no_such_role@")


def test_open_store_picks_postgres_for_a_url(pg_url: str) -> None:
    store = open_store(pg_url)
    assert isinstance(store, PostgresStore)
    assert store.create_session(source="cli").source == "cli"
    store.close()


def test_open_store_without_psycopg_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n.startswith("vigil.store.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # makes `import psycopg` fail
    with pytest.raises(StoreError, match=r"install vigil\[postgres\]"):
        open_store("postgresql://bob@127.0.0.1:1/notes")


def test_a_closed_store_says_so(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.list_sessions()


def test_a_connection_killed_on_the_server_is_replaced(postgres_server: str, pg_url: str) -> None:
    """A server restart or an idle-connection reaper must not cost a failed turn."""
    app = f"vigil_test_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(f"{pg_url}&application_name={app}")
    session = store.create_session(source="cli")
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    assert store.get_session(session.id) == session
    store.close()


def test_a_damaged_row_is_named_not_a_traceback(postgres_server: str, pg_url: str, pg_schema: str) -> None:
    store = PostgresStore(pg_url)
    healthy = store.create_session(source="cli", model_config={"epoch": 1})
    broken = store.create_session(source="cli", model_config={"epoch": 1})
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(
            f"UPDATE \"{pg_schema}\".sessions SET model_config = '{{not json' WHERE id = %s", (broken.id,)
        )
    with pytest.raises(StoreError) as refused:
        store.get_session(broken.id)
    assert broken.id in str(refused.value) and "model_config" in str(refused.value)
    listed = {s.id: s for s in store.list_sessions()}
    assert listed[broken.id].model_config == {} and listed[healthy.id].model_config == {"epoch": 1}
    store.close()
