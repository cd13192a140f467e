"""Bad command-line input is refused with one clear line, before anything is written.

Covers text that is not valid UTF-8, numbers (bounds, ASCII digits only, huge values), empty
session references, a too-long working directory, and user text echoed back verbatim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.cli.helpers import is_clear_error, run_cli, state_digest
from vigil.cli.main import cli
from vigil.store import NewMessage, SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

SESSION = "abc123000001"


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    """``vigil ARGS`` in-process, with exceptions caught so a traceback counts as a failure."""
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.fixture
def profile(vigil_home: Path) -> Path:
    """A profile with one titled session holding one message, a cron job and a heartbeat."""
    vigil_home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(vigil_home / "state.db")
    try:
        store.create_session(source="cli", title="Release plan", session_id=SESSION)
        store.append_message(SESSION, NewMessage("user", "plan the release"))
    finally:
        store.close()
    assert run_cli("cron", "add", "daily", "--schedule", "every 1d", "--prompt", "report").exit_code == 0
    assert run_cli("heartbeat", "set", "-s", SESSION, "15m", "check CI").exit_code == 0
    return vigil_home


def _vigil_bytes(args: list[bytes], home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real entry point with raw argv bytes, as a shell passes them."""
    full_env = {**os.environ, "VIGIL_HOME": str(home), **(env or {})}
    return subprocess.run(
        [sys.executable.encode(), b"-m", b"vigil.cli.main", *args],
        env=full_env, capture_output=True, text=True, timeout=60,
    )


# -- invalid UTF-8 ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "named"),
    [
        ([b"chat", b"-q", b"new \xff"], "-q/--query"),
        ([b"sessions", b"rename", SESSION.encode(), b"title \xff"], "argument TITLE"),
        ([b"cron", b"add", b"other", b"--schedule", b"every 1h", b"--prompt", b"do \xfe it"], "--prompt"),
        ([b"cron", b"edit", b"daily", b"--prompt", b"\xc3("], "--prompt"),
        ([b"heartbeat", b"set", b"-s", SESSION.encode(), b"10m", b"watch \xff"], "argument INTERVAL PROMPT"),
        ([b"sessions", b"search", b"caf\xe9"], "argument QUERY"),
        ([b"config", b"set", b"model.name", b"m\xff"], "argument VALUE"),
    ],
)
def test_invalid_utf8_arguments_are_refused_before_any_write(
    profile: Path, fake_model: FakeModelServer, argv: list[bytes], named: str
) -> None:
    before = state_digest(profile)
    env = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": fake_model.api_key}
    result = _vigil_bytes(argv, profile, env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {named}") and "not valid UTF-8" in line
    assert state_digest(profile) == before
    assert fake_model.requests == []


def test_invalid_utf8_profile_from_the_environment_is_refused(profile: Path) -> None:
    result = _vigil_bytes([b"sessions", b"list"], profile, {"VIGIL_PROFILE": os.fsdecode(b"work\xff")})
    assert result.returncode == 2
    assert result.stderr.startswith("Error: $VIGIL_PROFILE (used as -p/--profile) is not valid UTF-8")


@pytest.mark.parametrize("variable", ["VIGIL_HOME", "VIGIL_MODEL", "OPENAI_API_KEY"])
def test_vigil_environment_variables_must_be_utf8(profile: Path, tmp_path: Path, variable: str) -> None:
    before = state_digest(profile)
    value = os.fsdecode(bytes(tmp_path) + b"/home\xff") if variable == "VIGIL_HOME" else os.fsdecode(b"x\xff")
    result = _vigil_bytes([b"sessions", b"list"], profile, {variable: value})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"Error: ${variable} is not valid UTF-8 text")
    assert state_digest(profile) == before
    assert [p.name for p in tmp_path.iterdir()] == ["vigil-home"]  # no home was created


def test_the_rule_reaches_options_of_every_command(profile: Path) -> None:
    before = state_digest(profile)
    for args in (
        ["sessions", "list", "--source", "cl\udcffi"],
        ["sessions", "export", SESSION, "-o", str(profile / "out\udcff.jsonl")],
        ["cron", "add", "x", "-s", "every 1h", "--prompt", "p", "--skill", "a\udce9"],
        ["usage", "--session", "ab\udcff"],
        ["sessions", "rename", SESSION, "--", "\udcff"],
    ):
        result = invoke(*args)
        assert is_clear_error(result) and "not valid UTF-8" in result.output, (args, result.output)
    assert state_digest(profile) == before


# -- numbers ---------------------------------------------------------------------------------
HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["sessions", "search", "-n", "99999999999999999999999", "plan"], "at most 10000"),
        (["sessions", "search", "-n", "0", "plan"], "1<=x<=10000"),
        (["sessions", "list", "-n", "١٥"], "digits 0-9"),
        (["sessions", "list", "-n", "１５"], "digits 0-9"),
        (["sessions", "list", "-n", "1_000"], "digits 0-9"),
        (["sessions", "list", "-n", HUGE], "at most 100000"),
        (["usage", "-n", "-3"], "0<=x<=100000"),
        (["cron", "runs", "-n", "-1"], "0<=x<=100000"),
        (["cron", "runs", "-n", HUGE], "at most 100000"),
        (["cron", "add", "x", "-s", "every 1h", "--prompt", "p", "--repeat", "99999999999999999999"], "at most 1000000"),
        (["cron", "add", "x", "-s", "every 1h", "--prompt", "p", "--repeat", "٣"], "digits 0-9"),
        (["cron", "add", "x", "-s", f"every {HUGE}m", "--prompt", "p"], "the maximum interval is 365 days"),
        (["cron", "add", "x", "-s", "every 1h", "--prompt", "p", "--grace", f"{HUGE}s"], "the maximum interval is 365 days"),
        (["cron", "add", "x", "-s", "every ١٥m", "--prompt", "p"], "digits 0-9"),
        (["cron", "add", "x", "-s", "１５m", "--prompt", "p"], "use 'every 2h'"),
        (["cron", "add", "x", "-s", "every 1h", "--prompt", "p", "--grace", "١٠m"], "digits 0-9"),
        (["cron", "add", "x", "-s", "٠ ٩ * * *", "--prompt", "p"], "invalid cron expression"),
        (["cron", "edit", "daily", "--grace", "１m"], "digits 0-9"),
        (["heartbeat", "set", "-s", SESSION, "١٥m", "watch"], "digits 0-9"),
        (["heartbeat", "set", "-s", SESSION, "１５m", "watch"], "digits 0-9"),
        (["heartbeat", "set", "-s", SESSION, f"{HUGE}m", "watch"], "the maximum interval is 365 days"),
    ],
)
def test_numbers_are_bounded_and_ascii_only(profile: Path, args: list[str], says: str) -> None:
    before = state_digest(profile)
    result = invoke(*args)
    assert is_clear_error(result), result.output
    assert says in result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert len(error) < 300  # a 5,000-digit value is not echoed whole
    assert state_digest(profile) == before


def test_cron_runs_minus_one_no_longer_hides_the_oldest_record(
    profile: Path, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_model.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", fake_model.api_key)
    for answer in ("first", "second"):
        fake_model.queue(answer)
        assert run_cli("cron", "run", "daily").exit_code == 0
    assert len(json.loads(run_cli("cron", "runs", "-n", "0", "--json").output)) == 2
    assert len(json.loads(run_cli("cron", "runs", "-n", "1", "--json").output)) == 1
    result = invoke("cron", "runs", "-n", "-1", "--json")
    assert is_clear_error(result) and "0<=x<=100000" in result.output


def test_a_working_directory_name_too_long_is_one_line(profile: Path) -> None:
    before = state_digest(profile)
    result = invoke("cron", "add", "x", "-s", "every 1h", "--prompt", "p", "--workdir", "/" + "a" * 300)
    assert is_clear_error(result), result.output
    assert "cannot be used: File name too long" in result.output
    result = invoke("cron", "edit", "daily", "--workdir", str(profile / ("b" * 300)))
    assert is_clear_error(result), result.output
    assert state_digest(profile) == before


# -- empty references ------------------------------------------------------------------------
@pytest.mark.parametrize("ref", ["", "  "])
def test_an_empty_resume_reference_is_refused(profile: Path, fake_model: FakeModelServer, ref: str) -> None:
    before = state_digest(profile)
    env = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": fake_model.api_key}
    result = invoke("chat", "-q", "hello", "--resume", ref, env=env)
    assert is_clear_error(result), result.output
    assert "the session reference is empty" in result.output
    assert fake_model.requests == []
    assert state_digest(profile) == before


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "show", ""],
        ["sessions", "search", "plan", "--session", ""],
        ["sessions", "rename", " ", "new title"],
        ["sessions", "delete", "", "--yes"],
        ["sessions", "export", ""],
        ["usage", "--session", ""],
        ["heartbeat", "status", "-s", ""],
        ["heartbeat", "set", "-s", "", "10m", "watch"],
    ],
)
def test_empty_session_references_are_refused_everywhere(profile: Path, args: list[str]) -> None:
    before = state_digest(profile)
    result = invoke(*args)
    assert is_clear_error(result), result.output
    assert "the session reference is empty" in result.output
    assert state_digest(profile) == before


@pytest.mark.parametrize(
    "args",
    [
        ["cron", "add", "x", "--schedule", "", "--prompt", "p"],
        ["cron", "add", "x", "--schedule", "every 1h", "--prompt", "p", "--tz", ""],
        ["cron", "add", "x", "--schedule", "every 1h", "--prompt", "p", "--grace", " "],
        ["cron", "add", "x", "--schedule", "every 1h", "--prompt", "p", "--workdir", ""],
        ["cron", "edit", "daily", "--schedule", ""],
        ["cron", "edit", "daily", "--tz", ""],
    ],
)
def test_empty_cron_values_are_refused_not_dropped(profile: Path, args: list[str]) -> None:
    before = state_digest(profile)
    result = invoke(*args)
    assert is_clear_error(result), result.output
    assert "the value is empty" in result.output
    assert state_digest(profile) == before


def test_an_empty_profile_name_is_not_the_default_profile(profile: Path) -> None:
    result = invoke("profile", "show", "")
    assert is_clear_error(result) and "invalid profile name ''" in result.output


# -- user text echoed back -------------------------------------------------------------------
@pytest.mark.parametrize("title", ["[bold]x[/bold]", "[/]", "a \\[b] c\\", "[link=file:///etc]x[/link]"])
def test_rename_echoes_exactly_the_stored_title(profile: Path, title: str) -> None:
    result = invoke("sessions", "rename", SESSION, title)
    assert result.exit_code == 0, result.output
    assert result.output == f"Renamed {SESSION} to '{title}'\n"
    shown = json.loads(run_cli("sessions", "show", SESSION, "--json").output)
    assert shown["title"] == title


def test_rename_refuses_control_characters(profile: Path) -> None:
    before = state_digest(profile)
    result = invoke("sessions", "rename", SESSION, "x\x1b[2Jy")
    assert is_clear_error(result) and "U+001B" in result.output
    assert state_digest(profile) == before


def test_a_model_error_with_brackets_is_shown_verbatim(vigil_home: Path, fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.error(400, "unknown model '[/bold]' (try [b]gpt[/b])"))
    env = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": fake_model.api_key}
    result = CliRunner().invoke(cli, ["chat", "-q", "hello"], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    assert "unknown model '[/bold]' (try [b]gpt[/b])" in result.output


def test_stored_text_with_markup_is_shown_verbatim(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(vigil_home / "state.db")
    try:
        store.create_session(source="web[/]", model="[/bold]m", title="[red]t", session_id="ab0000000001")
    finally:
        store.close()
    shown = invoke("sessions", "show", "ab0000000001")
    assert shown.exit_code == 0, shown.output
    assert "model [/bold]m" in shown.output and "source web[/]" in shown.output and "[red]t" in shown.output
    listed = invoke("sessions", "list")
    assert listed.exit_code == 0 and "web[/]" in listed.output


def test_control_characters_in_stored_text_never_reach_the_terminal(profile: Path) -> None:
    """A prompt or title can come from a chat user; printing its escape sequences raw would let
    them drive the operator's terminal."""
    evil = "look\x1b]0;owned\x07 \x1b[2Jhere"
    store = SQLiteStore(profile / "state.db")
    try:
        store.update_session(SESSION, title=evil)
        store.append_message(SESSION, NewMessage("user", evil))
    finally:
        store.close()
    assert run_cli("heartbeat", "set", "-s", SESSION, "15m", evil).exit_code == 0
    for args in (
        ["heartbeat", "list"], ["heartbeat", "status", "-s", SESSION], ["sessions", "list"],
        ["sessions", "show", SESSION], ["sessions", "show", SESSION, "--full"], ["usage"],
        ["sessions", "search", "look"],
    ):
        result = CliRunner().invoke(cli, args, color=True)
        assert result.exit_code == 0, (args, result.output)
        assert "\x1b]0;owned" not in result.output and "\x1b[2J" not in result.output, args
        assert "\\x1b" in result.output, (args, result.output)


def test_cron_output_shows_control_characters_visibly(profile: Path) -> None:
    assert run_cli("cron", "add", "evil", "-s", "every 1h", "--prompt", "a\x1b[2Jb").exit_code == 0
    for args in (["cron", "show", "evil"], ["cron", "edit", "evil", "--prompt", "c\x1b[2Jd"], ["cron", "status"]):
        result = CliRunner().invoke(cli, args, color=True)
        assert result.exit_code == 0 and "\x1b[2J" not in result.output, (args, result.output)
    assert "c\\x1b[2Jd" in CliRunner().invoke(cli, ["cron", "show", "evil"]).output
