"""A store and a fake clock for schedule tests."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.schedule.backends import pg_schema, pg_url, postgres_server, shared_store, store_location
from vigil.clock import FakeClock
from vigil.store import SQLiteStore

__all__ = ["pg_schema", "pg_url", "postgres_server", "shared_store", "store_location"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(db_path, durable=False)
    yield store
    store.close()
