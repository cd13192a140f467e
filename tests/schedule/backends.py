"""The store backends the multi-process schedule tests run on: ``store_location`` is where
every process opens the shared store (an SQLite file, or a PostgreSQL URL with a schema of the
test's own, skipped with a reason when no server answers); ``shared_store`` is the test's
own store object there. The conftests import these fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.store.conftest import BACKENDS, pg_schema, pg_url, postgres_server
from vigil.store import SessionStore, open_store

__all__ = ["pg_schema", "pg_url", "postgres_server", "shared_store", "store_location"]


@pytest.fixture(params=BACKENDS)
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """What ``vigil.store.open_store`` opens in each process of the test."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "shared-state.db")


@pytest.fixture
def shared_store(store_location: str) -> Iterator[SessionStore]:
    """The test's own store object on ``store_location``."""
    store = open_store(store_location)
    yield store
    store.close()
