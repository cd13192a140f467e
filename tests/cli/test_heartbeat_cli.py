"""`vigil heartbeat ...`, `vigil pause`/`vigil resume`, and a heartbeat firing in the REPL."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pexpect
import pytest

from tests.cli.helpers import expect_in_terminal, run_cli
from vigil.profiles import get_profile
from vigil.schedule import estop
from vigil.schedule.intervals import TEST_MINIMUM_ENV
from vigil.store import open_store
from vigil.testing.fake_model import FakeModelServer


@pytest.fixture
def session_id(vigil_home: Path) -> str:
    profile = get_profile(None)
    profile.home.mkdir(parents=True, exist_ok=True)
    store = open_store(profile.state_db)
    try:
        return store.create_session(source="cli", title="watching CI").id
    finally:
        store.close()


def test_set_status_pause_resume_clear_from_the_shell(session_id: str) -> None:
    prefix = session_id[:6]
    done = run_cli("heartbeat", "set", "--session", prefix, "15m", "check", "the", "CI", "run")
    assert done.exit_code == 0
    assert done.output.startswith("♥ Heartbeat set (every 15m): check the CI run\n")
    assert f"vigil chat --resume {session_id}" in done.output  # it fires only while open

    status = run_cli("heartbeat", "status", "-s", prefix)
    assert "♥ Heartbeat (every 15m) — active" in status.output and "fired:     0 times" in status.output
    paused = run_cli("heartbeat", "pause", "-s", prefix)
    assert paused.output.startswith("♥ Heartbeat paused (every 15m)")
    assert f"vigil heartbeat resume --session {session_id}" in paused.output
    resumed = run_cli("heartbeat", "resume", "-s", prefix)
    assert resumed.output.startswith("♥ Heartbeat resumed (every 15m): next fire at ")

    listed = json.loads(run_cli("heartbeat", "list", "--json").output)
    assert [(h["session"], h["interval"], h["status"], h["count"]) for h in listed] == [(session_id, "15m", "active", 0)]
    assert listed[0]["next_fire"] is not None and listed[0]["route"] is None
    table = run_cli("heartbeat", "list").output
    assert session_id in table and "15m" in table and "active" in table

    cleared = run_cli("heartbeat", "clear", "-s", prefix)
    assert cleared.output == "♥ Heartbeat cleared (every 15m, fired 0 times).\n"
    assert json.loads(run_cli("heartbeat", "list", "--json").output) == []
    assert "No heartbeats" in run_cli("heartbeat", "list").output


def test_shell_times_carry_the_profiles_zone(session_id: str, vigil_home: Path) -> None:
    """`vigil heartbeat set/status/resume/list` name the zone of every time, like `cron list`."""
    (vigil_home / "config.yaml").write_text("timezone: Asia/Tokyo\n")
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d JST"
    done = run_cli("heartbeat", "set", "-s", session_id, "15m", "check the CI run").output
    assert re.search(rf"First fire at {stamp} \(in 15m\)", done), done
    due = json.loads(run_cli("heartbeat", "list", "--json").output)[0]["next_fire"]
    tokyo = datetime.fromtimestamp(due, ZoneInfo("Asia/Tokyo"))
    assert f"at {tokyo:%Y-%m-%d %H:%M:%S} JST (in 15m)" in done  # the zone's wall clock, not the machine's
    soon = r"\(in \d+m(\d+s)?\)"  # wall-clock seconds pass between the commands
    assert re.search(rf"next fire: at {stamp} {soon}", run_cli("heartbeat", "status", "-s", session_id).output)
    run_cli("heartbeat", "pause", "-s", session_id)
    assert re.search(rf"next fire at {stamp} {soon}", run_cli("heartbeat", "resume", "-s", session_id).output)
    table = run_cli("heartbeat", "list").output
    assert re.search(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d JST {soon}", table), table


def test_without_a_configured_zone_times_name_the_machines_zone(session_id: str) -> None:
    machine = datetime.now().astimezone().strftime("%Z")
    status = run_cli("heartbeat", "set", "-s", session_id, "15m", "check").output
    assert re.search(rf"First fire at \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d {re.escape(machine)} \(in 15m\)", status)


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        (["0m", "x"], "is zero"),
        (["59s", "x"], "minimum interval is 60 seconds"),
        (["10x", "x"], "is not an interval"),
        (["-5m", "x"], "is negative"),
        (["15m"], "Missing prompt"),
        (["15m", "   "], "Missing prompt"),
    ],
)
def test_invalid_set_names_the_rule_and_keeps_the_heartbeat(session_id: str, args: list[str], rule: str) -> None:
    run_cli("heartbeat", "set", "-s", session_id, "10m", "keep me")
    before = run_cli("heartbeat", "list", "--json").output
    bad = run_cli("heartbeat", "set", "-s", session_id, "--", *args)
    assert bad.exit_code == 1 and rule in bad.output
    assert run_cli("heartbeat", "list", "--json").output == before


@pytest.mark.parametrize(
    "args",
    [["-5m", "x"], ["-30s", "x"], ["-1h30m", "check", "the", "CI"], ["3000000d", "x"], ["59s", "x"], ["10x", "x"],
     ["15m"], []],
)
def test_set_errors_match_the_slash_command(session_id: str, args: list[str]) -> None:
    from vigil.runtime.heartbeat_commands import HeartbeatInputError, parse_command

    with pytest.raises(HeartbeatInputError) as info:
        parse_command(" ".join(["every", *args]))
    slash_rule = str(info.value)
    run_cli("heartbeat", "set", "-s", session_id, "10m", "keep me")
    before = run_cli("heartbeat", "list", "--json").output
    bad = run_cli("heartbeat", "set", "-s", session_id, *args)  # no "--": "-5m" is not an option
    assert bad.exit_code == 1, bad.output
    lines = " ".join(bad.output.split()).replace("Error: ", "")
    assert lines.startswith(slash_rule[:1].upper() + slash_rule[1:] + ".")
    assert f"Usage: vigil heartbeat set --session {session_id} [--quiet HH:MM-HH:MM]" in lines
    assert run_cli("heartbeat", "list", "--json").output == before


def test_options_may_follow_the_words(session_id: str) -> None:
    done = run_cli("heartbeat", "set", "15m", "check", "-x", "flag", "--session", session_id)
    assert done.exit_code == 0 and done.output.startswith("♥ Heartbeat set (every 15m): check -x flag")
    dangling = run_cli("heartbeat", "set", "-s", session_id, "15m", "check", "-s")
    assert dangling.exit_code == 2 and "requires an argument" in dangling.output


def test_a_damaged_record_is_listed_and_can_be_cleared(session_id: str) -> None:
    run_cli("heartbeat", "set", "-s", session_id, "10m", "watch")
    profile = get_profile(None)
    store = open_store(profile.state_db)
    try:
        store.set_meta(f"heartbeat:{session_id}", {"prompt": 3})
    finally:
        store.close()
    for action in ("status", "pause", "resume"):
        done = run_cli("heartbeat", action, "-s", session_id)
        assert done.exit_code == 1 and "cannot be read" in done.output
        assert len(done.output.strip().splitlines()) == 1 or "vigil heartbeat clear" in " ".join(done.output.split())
    listed = json.loads(run_cli("heartbeat", "list", "--json").output)
    assert [(h["session"], h["status"]) for h in listed] == [(session_id, "damaged")] and listed[0]["error"]
    table = run_cli("heartbeat", "list").output
    assert session_id in table and "damaged" in table
    cleared = run_cli("heartbeat", "clear", "-s", session_id)
    assert cleared.exit_code == 0 and "Heartbeat cleared (its record was damaged)" in cleared.output
    assert json.loads(run_cli("heartbeat", "list", "--json").output) == []


def test_an_absurd_stored_record_is_listed(session_id: str) -> None:
    run_cli("heartbeat", "set", "-s", session_id, "10m", "watch")
    profile = get_profile(None)
    store = open_store(profile.state_db)
    try:
        key = f"heartbeat:{session_id}"
        absurd = dict(store.get_meta(key).value)
        absurd.update(interval=3_000_000 * 86_400, next_due=absurd["next_due"] + 3_000_000 * 86_400)
        store.set_meta(key, absurd)
    finally:
        store.close()
    for args in (["list"], ["list", "--json"], ["status", "-s", session_id]):
        done = run_cli("heartbeat", *args)
        assert done.exit_code == 0 and "3000000d" in done.output
    assert "out of range" in run_cli("heartbeat", "list").output


def test_unknown_session_and_missing_heartbeat(session_id: str) -> None:
    unknown = run_cli("heartbeat", "status", "-s", "fffff")
    assert unknown.exit_code == 1 and "no session matches 'fffff'" in unknown.output
    nothing = run_cli("heartbeat", "pause", "-s", session_id)
    assert nothing.exit_code == 1 and "No heartbeat to pause in this conversation" in nothing.output
    assert run_cli("heartbeat", "status", "-s", session_id).output.startswith("No heartbeat in this conversation.")


def test_emergency_stop(session_id: str) -> None:
    engaged = run_cli("pause", "--reason", "maintenance")
    assert engaged.exit_code == 0 and "Emergency stop engaged" in engaged.output
    assert "already on" in run_cli("pause").output
    profile = get_profile(None)
    store = open_store(profile.state_db)
    try:
        assert estop.status(store).reason == "maintenance"
    finally:
        store.close()
    run_cli("heartbeat", "set", "-s", session_id, "10m", "watch")
    assert "emergency stop is on" in run_cli("heartbeat", "status", "-s", session_id).output
    assert "Emergency stop released" in run_cli("resume").output
    assert "was not on" in run_cli("resume").output


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_a_heartbeat_turn_appears_in_the_repl_unprompted(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.rule(contains="[Heartbeat — recurring instruction", reply="CI is still running; nothing new.")
    env = {
        **os.environ,
        "VIGIL_HOME": str(vigil_home),
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": fake_model.api_key,
        TEST_MINIMUM_ENV: "1",
        "TERM": "xterm",
    }
    child = pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat"], env=env, encoding="utf-8", timeout=20, dimensions=(30, 120)
    )
    try:
        expect_in_terminal(child, "you ›")
        child.sendline("hello")
        expect_in_terminal(child, "ok")
        expect_in_terminal(child, "you ›")
        child.sendline("/hb every 2s check the CI run")
        expect_in_terminal(child, r"♥ Heartbeat set \(every 2s\): check the CI run")
        expect_in_terminal(child, r"♥ next \d\d:\d\d")  # the bottom toolbar shows the next fire
        # nothing typed from here on: the heartbeat turn shows up by itself
        expect_in_terminal(child, r"\[Heartbeat — recurring instruction, fires every 2s\]")
        expect_in_terminal(child, "CI is still running; nothing new.")
        child.sendline("/hb clear")
        expect_in_terminal(child, r"♥ Heartbeat cleared \(every 2s, fired")
        child.sendline("/quit")
        expect_in_terminal(child, "vigil chat --resume ([0-9a-f]{12})")
        session_id = child.match.group(1)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    shown = json.loads(run_cli("sessions", "show", session_id, "--json").output)
    users = [m["content"] for m in shown["messages"] if m["role"] == "user"]
    assert users[0] == "hello" and users[1].startswith("[Heartbeat — recurring instruction, fires every 2s]")
