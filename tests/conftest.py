"""Shared fixtures: every test runs hermetically in its own VIGIL_HOME with no real API keys."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["vigil.testing.pytest_plugin"]

_LEAKY_ENV = (
    "VIGIL_HOME",
    "VIGIL_PROFILE",
    "VIGIL_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def vigil_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, private $VIGIL_HOME for each test; provider variables from the host are hidden."""
    for name in _LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "vigil-home"
    monkeypatch.setenv("VIGIL_HOME", str(home))
    return home
