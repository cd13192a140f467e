"""`vigil gateway install`: a systemd user unit that runs this vigil, for this profile."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.helpers import is_clear_error, run_cli

VIGIL_SCRIPT = Path(sys.executable).parent / "vigil"


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


def parse_unit(text: str) -> configparser.ConfigParser:
    """The unit as an INI file (strict: a key given twice in a section is an error)."""
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def systemd_words(line: str) -> list[str]:
    """A command line or assignment list split as systemd.syntax(7) describes: words separated by
    whitespace, a word may be quoted with C-style escapes inside, ``%%`` is ``%`` and, in a command
    line, ``$$`` is ``$``. (Only what vigil's units may use.)"""
    words, i = [], 0
    escapes = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
    while i < len(line):
        if line[i].isspace():
            i += 1
            continue
        word = []
        if line[i] in "\"'":
            quote, i = line[i], i + 1
            while line[i] != quote:
                if line[i] == "\\":
                    if line[i + 1] == "x":
                        word.append(chr(int(line[i + 2 : i + 4], 16)))
                        i += 4
                        continue
                    word.append(escapes[line[i + 1]])
                    i += 2
                    continue
                word.append(line[i])
                i += 1
            i += 1
        else:
            while i < len(line) and not line[i].isspace():
                word.append(line[i])
                i += 1
        words.append("".join(word).replace("%%", "%").replace("$$", "$"))
    return words


def verify_with_systemd(path: Path) -> None:
    """``systemd-analyze verify`` finds nothing to say about the unit (skipped without it)."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    checked = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and checked.stderr == "" and checked.stdout == "", checked.stderr


def test_install_writes_a_unit_that_runs_this_vigil_for_this_profile(vigil_home: Path, config_home: Path) -> None:
    assert run_cli("config", "set", "gateway.stop_timeout", "50").exit_code == 0
    result = run_cli("gateway", "install")
    assert result.exit_code == 0, result.output
    path = config_home / "systemd" / "user" / "vigil-gateway.service"
    assert f"Wrote {path}\n" in result.output
    for line in ("systemctl --user daemon-reload", "systemctl --user enable --now vigil-gateway.service",
                 "loginctl enable-linger $USER"):
        assert f"\n  {line}\n" in result.output

    unit = parse_unit(path.read_text())
    service = unit["Service"]
    assert service["Restart"] == "on-failure"
    assert service["KillSignal"] == "SIGTERM"
    assert service["TimeoutStopSec"] == "65"  # stop_timeout + 15
    assert unit["Install"]["WantedBy"] == "default.target"
    assert f"VIGIL_HOME={vigil_home}" in systemd_words(service["Environment"])
    command = systemd_words(service["ExecStart"])
    assert command[-2:] == ["gateway", "run"] and "-p" not in command
    # In-process there is no `vigil` script running: the unit runs this Python with -m.
    assert command[:3] == [sys.executable, "-m", "vigil.cli.main"]
    ran = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "VIGIL_HOME": str(vigil_home)})
    assert ran.returncode == 0 and "Run in the foreground" in ran.stdout, ran.stderr
    verify_with_systemd(path)


def test_the_vigil_script_installs_itself_for_a_named_profile(vigil_home: Path, config_home: Path) -> None:
    assert run_cli("profile", "create", "work").exit_code == 0
    if not VIGIL_SCRIPT.exists():  # pragma: no cover - vigil installed without its script
        pytest.skip(f"no vigil script beside {sys.executable}")
    installed = subprocess.run([str(VIGIL_SCRIPT), "-p", "work", "gateway", "install"],
                               capture_output=True, text=True, timeout=60,
                               env={**os.environ, "VIGIL_HOME": str(vigil_home), "XDG_CONFIG_HOME": str(config_home)})
    assert installed.returncode == 0, installed.stderr
    path = config_home / "systemd" / "user" / "vigil-gateway-work.service"
    assert "systemctl --user enable --now vigil-gateway-work.service" in installed.stdout
    command = systemd_words(parse_unit(path.read_text())["Service"]["ExecStart"])
    assert command == [str(VIGIL_SCRIPT), "-p", "work", "gateway", "run"]
    assert not (config_home / "systemd" / "user" / "vigil-gateway.service").exists()
    verify_with_systemd(path)


def test_a_home_with_spaces_percent_and_dollar_signs_survives_systemd_quoting(
    tmp_path: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    odd_home = tmp_path / "my files %h $HOME \"q\""
    monkeypatch.setenv("VIGIL_HOME", str(odd_home))
    assert run_cli("gateway", "install").exit_code == 0
    path = config_home / "systemd" / "user" / "vigil-gateway.service"
    assert systemd_words(parse_unit(path.read_text())["Service"]["Environment"]) == [
        f"VIGIL_HOME={odd_home}", "PYTHONUNBUFFERED=1"
    ]
    verify_with_systemd(path)


def test_print_shows_the_unit_and_writes_nothing(vigil_home: Path, config_home: Path) -> None:
    result = run_cli("gateway", "install", "--print")
    assert result.exit_code == 0
    assert parse_unit(result.output)["Service"]["Restart"] == "on-failure"
    assert not config_home.exists()
    assert run_cli("gateway", "install").exit_code == 0
    written = (config_home / "systemd" / "user" / "vigil-gateway.service").read_text()
    assert written == result.output


def test_an_existing_different_unit_is_kept_unless_forced(vigil_home: Path, config_home: Path) -> None:
    path = config_home / "systemd" / "user" / "vigil-gateway.service"
    path.parent.mkdir(parents=True)
    path.write_text("[Service]\nExecStart=/usr/local/bin/my-own-gateway\n")
    refused = run_cli("gateway", "install")
    assert is_clear_error(refused)
    assert "--force" in refused.output and str(path) in refused.output
    assert path.read_text() == "[Service]\nExecStart=/usr/local/bin/my-own-gateway\n"

    forced = run_cli("gateway", "install", "--force")
    assert forced.exit_code == 0 and f"Replaced {path}" in forced.output
    assert "gateway run" in parse_unit(path.read_text())["Service"]["ExecStart"]
    again = run_cli("gateway", "install")
    assert again.exit_code == 0 and "unchanged" in again.output
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_without_xdg_config_home_the_unit_goes_under_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    for value in (None, "relative/config"):  # a relative XDG_CONFIG_HOME is ignored (XDG spec)
        if value is None:
            monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_CONFIG_HOME", value)
        result = run_cli("gateway", "install", "--force")
        assert result.exit_code == 0, result.output
        assert re.search(rf"{re.escape(str(tmp_path / 'user' / '.config' / 'systemd' / 'user'))}/vigil-gateway\.service", result.output)
    assert not Path("relative").exists()


def test_installing_for_a_profile_that_does_not_exist_is_refused(vigil_home: Path, config_home: Path) -> None:
    result = run_cli("-p", "nosuch", "gateway", "install")
    assert is_clear_error(result) and "nosuch" in result.output
    assert not config_home.exists()


# -- --env-file: the secrets a service cannot take from the shell ------------------------------

TOKEN = 'ab"c$d\\e `f` 12:xyz'


def _sourced(path: Path, name: str) -> str:
    """``name`` as a shell reads the file (double quotes with \\\\, \\" and \\$ escapes, as systemd's
    EnvironmentFile= reads them too)."""
    done = subprocess.run(["bash", "-c", f'set -a; . "$1"; printf %s "${name}"', "bash", str(path)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_env_file_holds_the_enabled_platforms_secrets_and_the_unit_reads_it(
    vigil_home: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli("config", "set", "telegram.enabled", "true").exit_code == 0
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    result = run_cli("gateway", "install", "--env-file")
    assert result.exit_code == 0, result.output
    env_file = vigil_home / "gateway.env"
    assert env_file.stat().st_mode & 0o777 == 0o600
    assert _sourced(env_file, "TELEGRAM_BOT_TOKEN") == TOKEN
    assert _sourced(env_file, "OPENAI_API_KEY") == "sk-test-secret"
    assert "SLACK_BOT_TOKEN" not in env_file.read_text()  # Slack is not enabled
    assert TOKEN not in result.output and "sk-test-secret" not in result.output  # names only
    assert "TELEGRAM_BOT_TOKEN" in result.output
    unit = parse_unit((config_home / "systemd" / "user" / "vigil-gateway.service").read_text())
    assert unit["Service"]["EnvironmentFile"] == str(env_file.absolute())


def test_env_file_keeps_a_value_added_by_hand_and_names_what_is_missing(
    vigil_home: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli("config", "set", "slack.enabled", "true").exit_code == 0
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"):
        monkeypatch.delenv(name, raising=False)
    vigil_home.mkdir(parents=True, exist_ok=True)
    (vigil_home / "gateway.env").write_text('SLACK_BOT_TOKEN="xoxb-by-hand"\nOTHER=kept\n')
    result = run_cli("gateway", "install", "--env-file")
    assert result.exit_code == 0, result.output
    env_file = vigil_home / "gateway.env"
    assert _sourced(env_file, "SLACK_BOT_TOKEN") == "xoxb-by-hand" and _sourced(env_file, "OTHER") == "kept"
    assert "Not set in this shell, so not in the file: SLACK_SIGNING_SECRET (slack's secret)" in result.output


def test_print_with_env_file_writes_nothing_and_a_multi_line_value_is_refused(
    vigil_home: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    printed = run_cli("gateway", "install", "--print", "--env-file")
    assert printed.exit_code == 0 and "EnvironmentFile=" in printed.output
    assert not (vigil_home / "gateway.env").exists() and not config_home.exists()
    monkeypatch.setenv("OPENAI_API_KEY", "line one\nline two")
    refused = run_cli("gateway", "install", "--env-file")
    assert refused.exit_code == 1 and is_clear_error(refused)
    assert "spans several lines" in refused.output and "line one" not in refused.output
    assert not (vigil_home / "gateway.env").exists() and not config_home.exists()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\0"), max_size=40),
       junk=st.binary(max_size=200))
def test_any_secret_round_trips_and_any_old_file_gets_a_clear_answer(
    value: str, junk: bytes, vigil_home: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    env_file = vigil_home / "gateway.env"
    env_file.write_bytes(junk)  # whatever an earlier hand edit left
    monkeypatch.setenv("OPENAI_API_KEY", value or "x")
    result = run_cli("gateway", "install", "--env-file", "--force")
    if result.exit_code == 0:
        assert _sourced(env_file, "OPENAI_API_KEY") == (value or "x")
    else:
        assert is_clear_error(result) and env_file.read_bytes() == junk
