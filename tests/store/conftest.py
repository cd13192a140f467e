"""Fixtures for the session store tests.

``store`` runs a test against every backend in ``BACKENDS``; a backend joins the contract
suite by adding its name there and a branch in ``_open``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from vigil.clock import FakeClock
from vigil.store import SessionStore
from vigil.store.sqlite import SQLiteStore

BACKENDS = [pytest.param("sqlite", id="sqlite")]

StoreFactory = Callable[[], SessionStore]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _open(backend: str, tmp_path: Path, clock: FakeClock) -> SessionStore:
    if backend == "sqlite":
        return SQLiteStore(tmp_path / "state.db", clock=clock)
    raise AssertionError(f"unknown store backend {backend}")


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[StoreFactory]:
    """Opens further stores on the same database (another process would do the same)."""
    opened: list[SessionStore] = []

    def make() -> SessionStore:
        store = _open(request.param, tmp_path, clock)
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
