"""Pytest fixtures for the fake model server.

Register with ``pytest_plugins = ["vigil.testing.pytest_plugin"]`` in the root conftest.

* ``fake_model`` — a ``FakeModelServer`` that is fresh for each test: one server per session
  (starting one per test would cost every test a server start and stop), reset before the
  test and restarted if an earlier test stopped it.
* ``fake_model_env`` — the same server, with ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
  ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` pointing at it for the test's duration.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from vigil.testing.fake_model import FakeModelServer


@pytest.fixture(scope="session")
def fake_model_session() -> Iterator[FakeModelServer]:
    """The session's shared server. Tests should use ``fake_model`` instead."""
    server = FakeModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_model(fake_model_session: FakeModelServer) -> Iterator[FakeModelServer]:
    """A running fake model with an empty script, log and cache."""
    server = fake_model_session
    if not server.running:
        server.start()
    server.reset()
    yield server
    server.reset()


@pytest.fixture
def fake_model_env(fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    """``fake_model`` with the providers' standard environment variables pointing at it."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_model.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", fake_model.api_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_model.anthropic_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", fake_model.api_key)
    return fake_model
