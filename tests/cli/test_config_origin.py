"""`vigil config show --origin`, `config unset`, and the values `config set` refuses, as a user meets them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.helpers import run_cli

CONFIG = """\
# my settings
model:
  # the model I like
  name: gpt-4o
agent:
  max_iterations: 12  # enough
"""


def _write_config(home: Path, text: str = CONFIG) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _origin_lines(output: str) -> dict[str, tuple[str, str]]:
    """``key -> (origin, value)`` from the lines of `config show --origin`."""
    found = {}
    for line in output.splitlines()[1:]:
        origin, _, rest = line.partition("  ")
        key, _, value = rest.strip().partition(" = ")
        found[key] = (origin.strip(), value)
    return found


def test_show_origin_names_the_file_line_the_environment_and_the_defaults(
    vigil_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write_config(vigil_home)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://me:hunter2@llm.local/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("VIGIL_MODEL", "from-the-env")  # the file names a model: the file wins

    result = run_cli("config", "show", "--origin")
    assert result.exit_code == 0, result.output
    assert "hunter2" not in result.output and "sk-very-secret" not in result.output
    lines = _origin_lines(result.output)
    assert lines["model.name"] == (f"{path}:4", "gpt-4o")
    assert lines["agent.max_iterations"] == (f"{path}:6", "12")
    assert lines["model.base_url"] == ("env:OPENAI_BASE_URL", "http://me:***@llm.local/v1")
    assert lines["model.api_key"] == ("env:OPENAI_API_KEY", "***")
    assert lines["model.timeout"] == ("default", "120.0")
    assert lines["tools.terminal.sandbox"] == ("default", "always")

    as_json = json.loads(run_cli("config", "show", "--origin", "--json").output)
    assert as_json["model.name"] == {"value": "gpt-4o", "origin": f"{path}:4"}
    assert as_json["model.api_key"] == {"value": "***", "origin": "env:OPENAI_API_KEY"}
    assert as_json["prompt.max_file_chars"] == {"value": 20000, "origin": "default"}

    plain = json.loads(run_cli("config", "show", "--json").output)
    assert plain["model"]["base_url"] == "http://me:***@llm.local/v1"  # the URL in force
    assert plain["model"]["name"] == "gpt-4o"


def test_show_origin_follows_the_providers_own_variables(vigil_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ant-secret")
    monkeypatch.setenv("VIGIL_MODEL", "claude-sonnet-4-5")
    result = run_cli("config", "show", "--origin")
    assert result.exit_code == 0, result.output
    lines = _origin_lines(result.output)
    assert lines["model.provider"] == ("env:ANTHROPIC_API_KEY", "anthropic")
    assert lines["model.api_key"] == ("env:ANTHROPIC_API_KEY", "***")
    assert lines["model.name"] == ("env:VIGIL_MODEL", "claude-sonnet-4-5")
    assert "ant-secret" not in result.output


def test_a_key_set_in_the_file_is_shown_masked_with_its_line(vigil_home: Path) -> None:
    path = _write_config(vigil_home, "model:\n  api_key: sk-in-the-file\n")
    result = run_cli("config", "show", "--origin")
    assert "sk-in-the-file" not in result.output
    assert _origin_lines(result.output)["model.api_key"] == (f"{path}:2", "***")


def test_unset_removes_the_key_and_keeps_comments_and_layout(vigil_home: Path) -> None:
    path = _write_config(vigil_home)
    result = run_cli("config", "unset", "model.name")
    assert result.exit_code == 0, result.output
    text = path.read_text(encoding="utf-8")
    assert "gpt-4o" not in text and "model:" not in text  # the emptied section goes too
    assert "# my settings" in text and "max_iterations: 12  # enough" in text
    assert _origin_lines(run_cli("config", "show", "--origin").output)["model.name"][0] == "default"


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("model.name", "model.name is not set in"),
        ("model.nmae", "unknown setting 'model.nmae'"),
        ("nosuch", "unknown setting 'nosuch'"),
        ("model..name", "invalid key"),
    ],
)
def test_unset_of_a_key_the_file_does_not_set_says_so_and_changes_nothing(
    vigil_home: Path, key: str, says: str
) -> None:
    path = _write_config(vigil_home, "# nothing but a comment\nagent:\n  max_iterations: 3\n")
    before = path.read_bytes()
    result = run_cli("config", "unset", key)
    assert result.exit_code == 1
    assert says in result.output and "Traceback" not in result.output
    assert path.read_bytes() == before


def test_unset_refuses_to_touch_a_broken_file(vigil_home: Path) -> None:
    path = _write_config(vigil_home, "model:\n  name: gpt-4o\n  context_window: 5\n")
    before = path.read_bytes()
    result = run_cli("config", "unset", "model.name")
    assert result.exit_code == 1 and "context_window" in result.output
    assert path.read_bytes() == before


@pytest.mark.parametrize("value", ["null", "~", "", "Null"])
def test_set_to_nothing_is_refused_with_a_hint_to_unset(vigil_home: Path, value: str) -> None:
    path = _write_config(vigil_home)
    before = path.read_bytes()
    result = run_cli("config", "set", "model.name", value)
    assert result.exit_code == 1
    assert "vigil config unset model.name" in result.output
    assert path.read_bytes() == before


def test_a_negative_number_reaches_the_validator(vigil_home: Path) -> None:
    path = _write_config(vigil_home)
    before = path.read_bytes()
    refused = run_cli("config", "set", "model.temperature", "-1")
    assert refused.exit_code == 1
    assert "model.temperature" in refused.output and "from 0 to 2" in refused.output
    assert "No such option" not in refused.output
    assert path.read_bytes() == before

    assert run_cli("config", "set", "model.temperature", "-0").exit_code == 0
    assert run_cli("config", "get", "model.temperature").output.strip() in ("0", "-0", "0.0", "-0.0")


_SETTABLE = {
    "model.name": "gpt-4o",
    "model.temperature": "0.5",
    "agent.max_iterations": "7",
    "tools.terminal.output_cap": "4096",
    "prompt.context_files": "false",
    "timezone": "Europe/Paris",
}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.sampled_from(sorted(_SETTABLE)), min_size=1, unique=True), data=st.data())
def test_set_then_unset_in_any_order_gives_back_the_defaults_and_the_comments(
    vigil_home: Path, keys: list[str], data: st.DataObject
) -> None:
    path = _write_config(vigil_home, "# kept\n")
    for key in keys:
        assert run_cli("config", "set", key, _SETTABLE[key]).exit_code == 0
        assert json.loads(run_cli("config", "show", "--origin", "--json").output)[key]["origin"].startswith(str(path))
    for key in data.draw(st.permutations(keys)):
        result = run_cli("config", "unset", key)
        assert result.exit_code == 0, result.output
    shown = json.loads(run_cli("config", "show", "--origin", "--json").output)
    assert {entry["origin"] for entry in shown.values()} == {"default"}
    assert path.read_text(encoding="utf-8").strip() == "# kept"
