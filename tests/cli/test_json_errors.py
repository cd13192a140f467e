"""With `--json`, every error is one JSON object on stdout, with the exit code of the prose error."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from tests.cli.helpers import run_cli, run_vigil
from vigil.cli.main import ERROR_KINDS, cli

KINDS = set(ERROR_KINDS)


def _json_error(output: str) -> dict[str, str]:
    parsed = json.loads(output)
    assert set(parsed) == {"error"} and set(parsed["error"]) == {"kind", "message"}
    assert parsed["error"]["kind"] in KINDS
    return parsed["error"]


def _commands_with_json(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    ctx = click.Context(group)
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += _commands_with_json(command, (*path, name))
        elif command is not None and any("--json" in getattr(p, "opts", ()) for p in command.params):
            found.append((*path, name))
    return found


def test_a_missing_session_is_a_json_error_with_exit_code_1(vigil_home: Path) -> None:
    prose = run_cli("sessions", "show", "nope")
    assert prose.exit_code == 1 and "Error: no session matches 'nope'" in prose.output

    result = run_cli("sessions", "show", "nope", "--json")
    assert result.exit_code == 1
    error = _json_error(result.stdout)
    assert error == {"kind": "not_found", "message": "no session matches 'nope' (see `vigil sessions list`)"}


def test_a_broken_config_is_a_json_config_error(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True)
    (vigil_home / "config.yaml").write_text("model:\n  context_window: 5\n", encoding="utf-8")
    result = run_cli("config", "show", "--json")
    assert result.exit_code == 1
    error = _json_error(result.stdout)
    assert error["kind"] == "config" and "context_window" in error["message"]


def test_an_unknown_cron_job_is_a_json_error(vigil_home: Path) -> None:
    result = run_cli("cron", "show", "nosuch", "--json")
    assert result.exit_code == 1
    assert "nosuch" in _json_error(result.stdout)["message"]


@pytest.mark.parametrize("command", _commands_with_json(cli), ids=" ".join)
def test_every_json_command_reports_a_usage_error_as_json(vigil_home: Path, command: tuple[str, ...]) -> None:
    result = run_cli(*command, "--json", "--no-such-option")
    assert result.exit_code == 2, (command, result.output)
    error = _json_error(result.stdout)
    assert error["kind"] == "usage" and "--no-such-option" in error["message"]


def test_the_real_command_keeps_stdout_pure_json_and_stderr_empty(vigil_home: Path) -> None:
    ran = run_vigil("sessions", "list", "--json", "--limit", "many", home=vigil_home)
    assert ran.returncode == 2
    assert ran.stderr == ""
    error = _json_error(ran.stdout)
    assert error["kind"] == "usage" and "many" in error["message"]


def test_without_json_errors_stay_prose_on_stderr(vigil_home: Path) -> None:
    ran = run_vigil("sessions", "list", "--limit", "many", home=vigil_home)
    assert ran.returncode == 2
    assert ran.stdout == "" and "Error:" in ran.stderr


def test_a_json_word_after_double_dash_is_not_a_flag(vigil_home: Path) -> None:
    result = run_cli("sessions", "show", "--bogus", "--", "--json")
    assert result.exit_code == 2
    assert not result.stdout.lstrip().startswith("{")


def test_an_undecodable_argument_is_a_json_refusal(vigil_home: Path) -> None:
    result = run_cli("sessions", "list", "--json", "--source", "cl\udcffi")
    assert result.exit_code == 2  # like a usage error, as without --json
    assert _json_error(result.stdout)["kind"] == "refused"
