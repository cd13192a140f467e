"""Profiles, config.yaml validation, and `vigil config` as a user meets them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from click.testing import CliRunner

from tests.cli.helpers import run_cli, run_vigil
from vigil.cli.main import cli


def test_version_and_help_describe_every_command(vigil_home: Path) -> None:
    result = run_cli("--version")
    assert result.exit_code == 0 and "vigil" in result.output
    top = run_cli("--help")
    assert top.exit_code == 0
    for name in ("chat", "config", "profile", "sessions"):
        assert name in top.output
    for group in ("config", "profile", "sessions"):
        sub = run_cli(group, "--help")
        assert sub.exit_code == 0
        for line in sub.output.split("Commands:")[1].strip().splitlines():
            command, _, description = line.strip().partition(" ")
            assert description.strip(), f"`vigil {group} {command}` has no help text"
            assert run_cli(group, command, "--help").exit_code == 0


def test_profiles_create_list_show_delete(vigil_home: Path) -> None:
    assert run_cli("profile", "create", "work").exit_code == 0
    listed = json.loads(run_cli("profile", "list", "--json").output)
    assert [p["name"] for p in listed] == ["default", "work"]
    assert Path(listed[1]["home"]) == vigil_home / "profiles" / "work"
    shown = json.loads(run_cli("profile", "show", "work", "--json").output)
    assert shown["exists"] is True

    again = run_cli("profile", "create", "work")
    assert again.exit_code == 1 and "already exists" in again.output
    bad = run_cli("profile", "create", "Bad Name")
    assert bad.exit_code == 1 and "invalid profile name" in bad.output

    assert run_cli("profile", "delete", "work", "--yes").exit_code == 0
    assert not (vigil_home / "profiles" / "work").exists()
    assert run_cli("profile", "delete", "default", "--yes").exit_code == 1


def test_profile_option_works_before_and_after_the_subcommand(vigil_home: Path) -> None:
    run_cli("profile", "create", "work")
    assert run_cli("-p", "work", "config", "set", "model.name", "m-before").exit_code == 0
    assert run_cli("config", "set", "model.name", "m-after", "-p", "work").exit_code == 0
    work_config = yaml.safe_load((vigil_home / "profiles/work/config.yaml").read_text())
    assert work_config == {"model": {"name": "m-after"}}
    assert not (vigil_home / "config.yaml").exists()
    assert run_cli("config", "get", "model.name", "-p", "work").output.strip() == "m-after"

    missing = run_cli("config", "show", "-p", "nosuch")
    assert missing.exit_code == 1 and "profile 'nosuch' does not exist" in missing.output


def test_config_set_get_show_path(vigil_home: Path) -> None:
    assert run_cli("config", "path").output.strip() == str(vigil_home / "config.yaml")
    assert run_cli("config", "set", "model.temperature", "0.3").exit_code == 0
    assert run_cli("config", "set", "model.api_key", "sk-secret-value").exit_code == 0
    assert run_cli("config", "get", "model.temperature").output.strip() == "0.3"
    shown = json.loads(run_cli("config", "show", "--json").output)
    assert shown["model"]["temperature"] == 0.3
    assert shown["model"]["api_key"] == "***"
    assert "sk-secret-value" not in run_cli("config", "show").output
    assert (vigil_home / "config.yaml").stat().st_mode & 0o777 == 0o600


def test_invalid_set_changes_nothing(vigil_home: Path) -> None:
    run_cli("config", "set", "model.name", "keep-me")
    before = (vigil_home / "config.yaml").read_bytes()
    for key, value, reason in (
        ("model.temperature", "7", "less than or equal to 2"),
        ("model.nmae", "x", "unknown setting 'model.nmae'"),
        ("model.provider", "gemini", "model.provider"),
        ("timezone", "Mars/Olympus", "unknown time zone"),
    ):
        result = run_cli("config", "set", key, value)
        assert result.exit_code == 1 and reason in result.output, result.output
        assert (vigil_home / "config.yaml").read_bytes() == before


def test_malformed_config_names_file_and_line_and_writes_nothing(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True)
    config = vigil_home / "config.yaml"
    config.write_text("model:\n  name: ok\n  temperature: [1\nagent: {}\n")
    before = config.read_bytes()
    for args in (("config", "show"), ("config", "set", "model.name", "x"), ("sessions", "list")):
        result = run_cli(*args)
        assert result.exit_code == 1
        assert f"{config}:" in result.output and "invalid YAML" in result.output
        assert result.output.count("Error") == 1
    assert config.read_bytes() == before
    assert not (vigil_home / "state.db").exists()

    config.write_text("model:\n  name: ok\nagent:\n  max_iterations: lots\n")
    result = run_cli("config", "show")
    assert result.exit_code == 1
    assert f"{config}:4: agent.max_iterations" in result.output


def test_entry_point_runs_as_a_separate_process(vigil_home: Path) -> None:
    result = run_vigil("--version", home=vigil_home)
    assert result.returncode == 0 and "vigil" in result.stdout
    broken = vigil_home / "config.yaml"
    vigil_home.mkdir(parents=True, exist_ok=True)
    broken.write_text("model: [unclosed\n")
    result = run_vigil("config", "show", home=vigil_home)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"{broken}:" in result.stderr


def test_config_set_keeps_comments_and_layout(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True)
    config = vigil_home / "config.yaml"
    config.write_text("# my notes about models\nmodel:\n  name: gpt-4o  # primary\n\n# agent stuff\nagent:\n  max_iterations: 10\n")
    assert run_cli("config", "set", "model.temperature", "0.5").exit_code == 0
    assert run_cli("config", "set", "prompt.max_file_chars", "5000").exit_code == 0
    text = config.read_text()
    assert "# my notes about models" in text and "name: gpt-4o  # primary" in text and "# agent stuff" in text
    assert yaml.safe_load(text)["model"] == {"name": "gpt-4o", "temperature": 0.5}


def test_explicit_profile_beats_the_environment(vigil_home: Path, monkeypatch) -> None:
    run_cli("profile", "create", "work")
    run_cli("profile", "create", "other")
    monkeypatch.setenv("VIGIL_PROFILE", "other")
    assert run_cli("-p", "work", "config", "path").output.strip().endswith("profiles/work/config.yaml")
    assert run_cli("config", "path").output.strip().endswith("profiles/other/config.yaml")
    assert run_cli("sessions", "-p", "work", "list").exit_code == 0


def test_secrets_and_markup_in_values(vigil_home: Path) -> None:
    run_cli("config", "set", "model.api_key", "sk-very-secret")
    section = run_cli("config", "get", "model")
    assert section.exit_code == 0 and "sk-very-secret" not in section.output
    odd = run_cli("config", "set", "model.name", '"x[/]"')
    assert odd.exit_code == 0 and "x[/]" in odd.output


def test_terminal_settings_live_in_their_own_section_and_old_keys_still_load(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    config = vigil_home / "config.yaml"
    config.write_text("tools:\n  terminal_timeout: 7\n  terminal_output_cap: 300\n", encoding="utf-8")
    assert run_cli("config", "get", "tools.terminal.timeout").output.strip() == "7.0"
    assert run_cli("config", "get", "tools.terminal.output_cap").output.strip() == "300"
    assert run_cli("config", "get", "tools.terminal.sandbox").output.strip() == "always"
    assert run_cli("config", "set", "tools.terminal.sandbox", "unattended").exit_code == 0
    refused = run_cli("config", "set", "tools.terminal.sandbox", "sometimes")
    assert refused.exit_code == 1 and "tools.terminal.sandbox" in refused.output
    assert run_cli("config", "get", "tools.terminal.sandbox").output.strip() == "unattended"


def _listings(path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    import click

    from vigil.cli.main import cli

    group = cli
    ctx = click.Context(cli)
    for name in path:
        group = group.get_command(ctx, name)
    found = [path]
    for name in group.list_commands(ctx):
        if isinstance(group.get_command(ctx, name), click.Group):
            found += _listings((*path, name))
    return found


def test_command_listings_show_whole_sentences(vigil_home: Path) -> None:
    """click cuts a summary longer than the room a listing leaves with "..."; every summary
    fits an 80-column terminal, and the top-level ones a 60-column one too."""
    for path in _listings():
        for width in (80, 60) if path == () else (80,):
            result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=width)
            assert result.exit_code == 0
            listing = result.output.split("Commands:")[1]
            rows = [line.strip() for line in listing.splitlines() if line.startswith("  ") and line.strip()]
            assert rows, path
            for row in rows:
                name, _, summary = row.partition(" ")
                assert summary.strip().endswith(".") and not summary.endswith("..."), (path, width, row)
