"""How loaded settings behave inside vigil once config.yaml has been read: changing one checks it
as the file would be checked, copies are independent, and whether a value was written in the
file (not defaulted) is known (the local engine's context window follows ``model.local.context``
only when ``model.context_window`` is not written)."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from vigil.config.settings import ModelSettings, Settings, load_settings
from vigil.config.schema import SettingsInvalid


def test_an_assignment_is_checked_like_the_file(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "missing.yaml")
    settings.tools.terminal.timeout = 5
    assert settings.tools.terminal.timeout == 5.0 and type(settings.tools.terminal.timeout) is float
    for bad in ("5", True, -1.0, float("inf")):
        with pytest.raises(SettingsInvalid):
            settings.tools.terminal.timeout = bad
    assert settings.tools.terminal.timeout == 5.0
    with pytest.raises(AttributeError):
        settings.tools.terminal.timeuot = 3  # type: ignore[attr-defined]


def test_a_copy_with_changes_leaves_the_original_alone() -> None:
    settings = Settings()
    changed = settings.copy_with(update={"tools": settings.tools.copy_with(update={"enabled": ["terminal"]})})
    assert changed.tools.enabled == ["terminal"] and settings.tools.enabled is None
    assert changed != settings and Settings() == settings
    assert pickle.loads(pickle.dumps(changed)) == changed
    duplicate = copy.deepcopy(changed)
    assert duplicate == changed and duplicate.tools is not changed.tools
    assert duplicate.fields_given == changed.fields_given == {"tools"}


def test_the_local_context_window_follows_the_engine_unless_written(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  provider: local\n  local:\n    context: 4096\n")
    assert load_settings(config).model.effective_context_window() == 4096
    config.write_text("model:\n  provider: local\n  context_window: 128000\n  local:\n    context: 4096\n")
    assert load_settings(config).model.effective_context_window() == 128000
    assert ModelSettings(provider="local").effective_context_window() == 8192


def test_every_problem_is_listed_in_the_order_of_the_settings() -> None:
    with pytest.raises(SettingsInvalid) as caught:
        Settings.from_data({"zzz": 1, "model": {"bogus": 1, "timeout": "x", "name": 5}, "agent": 3})
    assert [(p.loc, p.type) for p in caught.value.problems] == [
        (("model", "name"), "string_type"),
        (("model", "timeout"), "float_type"),
        (("model", "bogus"), "extra_forbidden"),
        (("agent",), "model_type"),
        (("zzz",), "extra_forbidden"),
    ]


def test_a_list_too_long_is_one_problem_whatever_its_items() -> None:
    with pytest.raises(SettingsInvalid) as caught:
        Settings.from_data({"tools": {"enabled": [3] * 101}})
    assert [(p.loc, p.type) for p in caught.value.problems] == [(("tools", "enabled"), "too_long")]
    assert caught.value.problems[0].msg == "List should have at most 100 items after validation, not 101"
