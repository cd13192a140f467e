"""`vigil heartbeat set` with --quiet, --for, --until and --loud, what status and list show of
them, and `vigil usage --heartbeats`, on the profile's real state.db."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli, state_digest
from vigil.profiles import get_profile
from vigil.schedule.heartbeat.options import HeartbeatOptions
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.schedule.heartbeat.text import heartbeat_message
from vigil.store import NewMessage, open_store
from vigil.usage import Usage


@pytest.fixture
def session_id(vigil_home: Path) -> str:
    vigil_home.mkdir(parents=True, exist_ok=True)
    (vigil_home / "config.yaml").write_text("timezone: Europe/Berlin\nheartbeat:\n  daily_token_budget: 50000\n")
    profile = get_profile(None)
    profile.home.mkdir(parents=True, exist_ok=True)
    store = open_store(profile.state_db)
    try:
        return store.create_session(source="cli", title="watching CI").id
    finally:
        store.close()


def _listed(session_id: str) -> dict:
    [mine] = [h for h in json.loads(run_cli("heartbeat", "list", "--json").output) if h["session"] == session_id]
    return mine


def test_set_with_options_and_what_status_and_list_show(session_id: str) -> None:
    done = run_cli("heartbeat", "set", "-s", session_id, "--quiet", "22:00-07:00", "--for", "3d", "15m", "check CI")
    assert done.exit_code == 0, done.output
    assert done.output.startswith("♥ Heartbeat set (every 15m): check CI\n")
    assert "quiet:     22:00-07:00 (Europe/Berlin): no fire then" in done.output
    assert re.search(r"ends:      at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CE[S]?T \(in 3d\), then it is cleared", done.output)
    assert "HEARTBEAT_OK (nothing changed) is stored but not pushed to you" in done.output
    mine = _listed(session_id)
    assert mine["quiet"] == "22:00-07:00" and mine["zone"] == "Europe/Berlin" and mine["loud"] is False
    assert abs(mine["ends_at"] - (time.time() + 3 * 86_400)) < 60 and mine["ended"] is False
    assert mine["fire_at"] >= mine["next_fire"]
    status = run_cli("heartbeat", "status", "-s", session_id).output
    assert "quiet:     22:00-07:00" in status and "ends:      at " in status
    assert "last 24 h: 0 heartbeat turns, 0 tokens of the daily budget of 50,000" in status
    table = run_cli("heartbeat", "list").output
    assert "ends" in table.splitlines()[0]

    loud = run_cli("heartbeat", "set", "-s", session_id, "--loud", "--until", "2099-01-01", "15m", "x")
    assert loud.exit_code == 1 and "too far ahead" in loud.output  # at most a year
    loud = run_cli("heartbeat", "set", "-s", session_id, "--json", "--loud", "15m", "check CI")
    shown = json.loads(loud.output)
    assert shown["loud"] is True and shown["quiet"] is None and shown["ends_at"] is None
    assert "every answer is delivered (--loud)" in run_cli("heartbeat", "status", "-s", session_id).output
    run_cli("heartbeat", "clear", "-s", session_id)
    assert json.loads(run_cli("heartbeat", "status", "-s", session_id, "--json").output) is None


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        (["--quiet", "22:00"], "--quiet '22:00' is not a quiet window: write HH:MM-HH:MM"),
        (["--quiet", "23:00-23:00"], "cannot be empty"),
        (["--quiet", "24:00-06:00"], "impossible time 24:00"),
        (["--for", "3x"], "--for: '3x' is not a duration"),
        (["--for", "10m"], "before its first fire (every 15m)"),
        (["--until", "2001-01-01"], "lies in the past"),
        (["--until", "next friday"], "is not a date"),
        (["--for", "1d", "--until", "2099-01-01"], "ive --for or --until, not both"),
    ],
)
def test_a_refused_option_names_its_rule_and_changes_nothing(
    session_id: str, vigil_home: Path, options: list[str], rule: str
) -> None:
    run_cli("heartbeat", "set", "-s", session_id, "10m", "keep me")
    before = state_digest(vigil_home)
    bad = run_cli("heartbeat", "set", "-s", session_id, *options, "15m", "replace me")
    assert bad.exit_code == 1
    said = " ".join(bad.output.split())
    assert rule in said and "Traceback" not in said
    assert "Usage: vigil heartbeat set --session" in said
    assert state_digest(vigil_home) == before
    assert _listed(session_id)["prompt"] == "keep me"


def test_usage_heartbeats_counts_heartbeat_turns_and_their_tokens(session_id: str) -> None:
    store = open_store(get_profile(None).state_db)
    try:
        repo = HeartbeatRepo(store)
        heartbeat, _ = repo.set(session_id, "check CI", 900, options=HeartbeatOptions())
        now = time.time()
        store.append_message(session_id, NewMessage("user", "a question"), created_at=now - 100)
        store.append_message(session_id, NewMessage("assistant", "long", usage=Usage(9_000, 0, 0, 90)), created_at=now - 99)
        for when, usage in ((now - 3 * 86_400, Usage(100, 1_000, 0, 5)), (now - 60, Usage(200, 2_000, 50, 7))):
            store.append_message(session_id, NewMessage("user", heartbeat_message(heartbeat)), created_at=when)
            store.append_message(session_id, NewMessage("assistant", "HEARTBEAT_OK", usage=usage), created_at=when + 1)
    finally:
        store.close()
    shown = json.loads(run_cli("usage", "--heartbeats", "--json").output)
    assert shown["daily_token_budget"] == 50_000
    [row] = shown["conversations"]
    assert row["conversation"] == session_id and row["heartbeat"] == "every 15m"
    assert row["day"] == {"turns": 1, "uncached_tokens": 250, "cached_tokens": 2_000, "output_tokens": 7, "tokens": 2_257}
    assert row["week"]["turns"] == 2 and row["week"]["cached_tokens"] == 3_000
    table = run_cli("usage", "--heartbeats").output
    assert session_id in table and "2,000" in table and "50,000 tokens per heartbeat in 24 hours" in table
    status = run_cli("heartbeat", "status", "-s", session_id).output
    assert "last 24 h: 1 heartbeat turn, 2,257 tokens of the daily budget of 50,000" in status
    shown = json.loads(run_cli("heartbeat", "status", "-s", session_id, "--json").output)
    assert shown["last_24h"]["turns"] == 1 and shown["last_24h"]["tokens"] == 2_257
    assert shown["daily_token_budget"] == 50_000 and shown["interval_seconds"] == 900 and shown["loud"] is False
