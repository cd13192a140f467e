"""`vigil cron` as a person and a script use it, including a restart across real processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli, run_vigil
from tests.schedule.cron.conftest import START
from vigil.testing.fake_model import FakeModelServer

NOW_ENV = "VIGIL_CRON_NOW"


@pytest.fixture(autouse=True)
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NOW_ENV, str(START))


def model_env(server: FakeModelServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}


def jobs() -> list[dict]:
    return json.loads(run_cli("cron", "list", "--json").output)


def test_add_list_show_edit_pause_resume_remove() -> None:
    added = run_cli("cron", "add", "standup", "-s", "0 9 * * 1-5", "--prompt", "Plan the day", "--tz", "Europe/Berlin")
    assert added.exit_code == 0 and "next run 2026-03-03 09:00 CET" in added.output
    data = json.loads(run_cli("cron", "add", "pulse", "-s", "every 2h", "--prompt", "Check", "--repeat", "3",
                              "--catch-up", "skip", "--grace", "10m", "--json").output)
    assert (data["repeat"], data["catch_up"], data["grace"], data["state"]) == (3, "skip", 600.0, "active")
    assert data["next_due_iso"] == "2026-03-02T10:00:00Z"
    assert [j["name"] for j in jobs()] == ["pulse", "standup"]
    listed = run_cli("cron", "list").output
    assert "standup" in listed and "cron 0 9 * * 1-5" in listed

    shown = run_cli("cron", "show", "standup").output
    assert "zone Europe/Berlin" in shown and "Plan the day" in shown and "catch-up   run" in shown

    edited = json.loads(run_cli("cron", "edit", "standup", "--schedule", "30 8 * * *", "--deliver", "telegram:@my_channel",
                                "--json").output)
    assert edited["schedule"]["text"] == "30 8 * * *" and edited["deliver"] == "telegram:@my_channel"
    assert edited["schedule"]["tz"] == "Europe/Berlin" and edited["prompt"] == "Plan the day"

    assert "Paused standup" in run_cli("cron", "pause", "standup").output
    assert "already paused" in run_cli("cron", "pause", "standup").output
    assert [j["state"] for j in jobs() if j["name"] == "standup"] == ["paused"]
    assert "Resumed standup" in run_cli("cron", "resume", "standup").output

    status = json.loads(run_cli("cron", "status", "--json").output)
    assert status["jobs"] == 2 and status["by_state"] == {"active": 2} and status["emergency_stop"] is None

    assert "Removed cron job pulse" in run_cli("cron", "remove", "pulse", "--yes").output
    gone = run_cli("cron", "show", "pulse")
    assert gone.exit_code == 1 and "no cron job named 'pulse'" in gone.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-s", "every 10s"], "too short"),
        (["-s", "0 25 * * *"], "invalid cron expression"),
        (["-s", "whenever"], "invalid schedule 'whenever'"),
        (["-s", "2020-01-01T09:00"], "in the past"),
        (["-s", "every 1h", "--tz", "Europe/Atlantis"], "unknown time zone 'Europe/Atlantis'"),
        (["-s", "every 1h", "--deliver", "email:me"], "invalid delivery target 'email:me'"),
        (["-s", "every 1h", "--deliver", "slack:C1:notatimestamp"], "Slack thread"),
        (["-s", "every 1h", "--skill", "nope"], "no skill named 'nope'"),
        (["-s", "every 1h", "--workdir", "/does/not/exist"], "does not exist"),
        (["-s", "every 1h", "--grace", "soon"], "invalid grace"),
        (["-s", "30m", "--repeat", "2"], "--repeat applies to recurring"),
    ],
)
def test_invalid_input_is_reported_and_nothing_is_stored(args: list[str], message: str) -> None:
    result = run_cli("cron", "add", "job", "--prompt", "x", *args)
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output
    assert jobs() == []


def test_invalid_edits_change_nothing() -> None:
    run_cli("cron", "add", "j", "-s", "every 1h", "--prompt", "keep me")
    before = jobs()
    for args in (["--schedule", "every 5s"], ["--tz", "Nowhere/City"], ["--deliver", "slack:"], ["--prompt", "  "]):
        result = run_cli("cron", "edit", "j", *args)
        assert result.exit_code == 1 and "Error" in result.output
    assert jobs() == before
    assert run_cli("cron", "edit", "j").exit_code == 2  # nothing to change
    assert "invalid job name" in run_cli("cron", "add", "no/slash", "-s", "every 1h", "--prompt", "x").output
    assert "exists already" in run_cli("cron", "add", "j", "-s", "every 1h", "--prompt", "x").output


def test_run_now_does_not_disturb_the_schedule(
    fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in model_env(fake_model).items():
        monkeypatch.setenv(name, value)
    run_cli("cron", "add", "j", "-s", "every 1h", "--prompt", "say hi", "--repeat", "2")
    fake_model.queue("hi there")
    result = run_cli("cron", "run", "j")
    assert result.exit_code == 0 and "hi there" in result.output
    job = jobs()[0]
    assert (job["next_due"], job["runs"], job["last_status"]) == (START + 3600, 0, "ok")
    runs = json.loads(run_cli("cron", "runs", "j", "--json").output)
    assert [(r["kind"], r["status"]) for r in runs] == [("manual", "ok")]


def test_run_without_a_model_records_the_failed_run_with_the_hint(vigil_home: Path) -> None:
    run_cli("cron", "add", "j", "-s", "every 1h", "--prompt", "say hi")
    result = run_vigil("cron", "run", "j", home=vigil_home, env={NOW_ENV: str(START + 60)})
    assert result.returncode == 1 and "No model is configured" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    runs = json.loads(run_cli("cron", "runs", "j", "--json").output)
    assert [(r["kind"], r["status"]) for r in runs] == [("manual", "failed")]
    assert "No model is configured" in runs[0]["error"] and "vigil config set model" in runs[0]["error"]
    table = run_cli("cron", "runs").output
    assert "failed" in table and "ModelNotConfigu" in table
    job = jobs()[0]
    assert (job["last_status"], job["failures"], job["next_due"]) == ("failed", 0, START + 3600)  # no back-off


def test_platform_targets_warn_at_add_and_show_needs_gateway_in_the_tables(
    fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = run_cli("cron", "add", "ping", "-s", "every 1h", "--prompt", "p", "--deliver", "slack:C0123ABC")
    assert added.exit_code == 0 and "Added cron job ping" in added.output
    assert "slack is not configured" in added.stderr and "kept locally in cron/output/ping/" in added.stderr
    quiet = run_cli("cron", "add", "home", "-s", "every 1h", "--prompt", "p")
    assert quiet.exit_code == 0 and "not configured" not in quiet.stderr
    edited = run_cli("cron", "edit", "home", "--deliver", "telegram:@my_channel")
    assert edited.exit_code == 0 and "telegram is not configured" in edited.stderr
    scripted = run_cli("cron", "add", "bot", "-s", "every 1h", "--prompt", "p", "--deliver", "slack:C9", "--json")
    assert "slack is not configured" in json.loads(scripted.stdout)["warnings"][0] and scripted.stderr == ""
    web = run_cli("cron", "add", "page", "-s", "every 1h", "--prompt", "p", "--deliver", "web")
    assert web.exit_code == 0 and "not configured" not in web.stderr  # the gateway serves the web chat

    for name, value in model_env(fake_model).items():
        monkeypatch.setenv(name, value)
    fake_model.queue("pong")
    ran = run_cli("cron", "run", "ping")
    assert ran.exit_code == 0 and "pong" in ran.stdout
    assert "ok, needs-gateway" in ran.stderr and "needs the gateway's slack adapter" in ran.stderr
    runs = run_cli("cron", "runs").output
    assert "ok, needs-gateway" in runs and "slack" in runs
    listed = [line for line in run_cli("cron", "list").output.splitlines() if line.split()[:1] == ["ping"]]
    assert listed and "ok, needs-gateway" in listed[0]


def test_tick_needs_a_model_only_when_something_is_due(vigil_home: Path) -> None:
    run_cli("cron", "add", "j", "-s", "every 1h", "--prompt", "p")
    idle = run_vigil("cron", "tick", home=vigil_home, env={NOW_ENV: str(START + 60)})
    assert idle.returncode == 0 and "Nothing due." in idle.stdout
    due = run_vigil("cron", "tick", home=vigil_home, env={NOW_ENV: str(START + 3600)})
    assert due.returncode == 1 and "No model is configured" in due.stderr
    assert jobs()[0]["running"] is None and jobs()[0]["next_due"] == START + 3600  # not claimed


def test_restart_across_processes_catches_up_once_or_skips(
    fake_model: FakeModelServer, vigil_home: Path
) -> None:
    run_cli("cron", "add", "catchup", "-s", "every 1h", "--prompt", "report")
    run_cli("cron", "add", "skipper", "-s", "every 1h", "--prompt", "report", "--catch-up", "skip")
    env = {**model_env(fake_model), NOW_ENV: str(START + 3600 + 30)}
    first = run_vigil("cron", "tick", "--json", home=vigil_home, env=env)
    assert first.returncode == 0, first.stderr
    assert sorted((r["job"], r["status"]) for r in json.loads(first.stdout)["runs"]) == [
        ("catchup", "ok"), ("skipper", "ok")
    ]
    # The machine is off for five occurrences; the last one is missed by more than its grace.
    env[NOW_ENV] = str(START + 6 * 3600 + 40 * 60)
    second = run_vigil("cron", "tick", "--json", home=vigil_home, env=env)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert [(r["job"], r["status"], r["coalesced"]) for r in report["runs"]] == [("catchup", "ok", 4)]
    assert [(r["job"], r["status"], r["coalesced"]) for r in report["skipped"]] == [("skipper", "skipped-missed", 4)]
    third = run_vigil("cron", "tick", "--json", home=vigil_home, env=env)
    assert json.loads(third.stdout) == {"stopped": False, "runs": [], "skipped": []}

    shown = run_vigil("cron", "runs", home=vigil_home, env={NOW_ENV: env[NOW_ENV], "COLUMNS": "200"})
    lines = [line for line in shown.stdout.splitlines() if line.strip()]
    assert any("catchup" in line and "ok (+4 coalesced)" in line for line in lines)
    assert any("skipper" in line and "skipped-missed (+4 coalesced)" in line for line in lines)
    assert len(fake_model.requests) == 3
