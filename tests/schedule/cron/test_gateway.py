"""`vigil gateway run` with no platform configured: a pure scheduler until SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli
from tests.gateway.process import free_port
from tests.schedule.cron.conftest import START, AddJob, MakeRunner, settle
from vigil.clock import FakeClock
from vigil.config.settings import Settings
from vigil.gateway.activity import GatewayActivity
from vigil.gateway.run import GatewayConfig, serve
from vigil.models.lazy import LazyModelClient
from vigil.profiles import Profile
from vigil.schedule.cron.repo import CronRepo
from vigil.runtime.cron_runner import CronRunner
from vigil.schedule.cron.scheduler import CronScheduler
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer

GATEWAY = "from vigil.cli.main import main; main()"


def _add_job_already_due(name: str, prompt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Add a one-shot job whose time passed 30 s ago (added on a clock frozen a minute back, so
    `cron add` accepts it): the gateway finds it due at start-up, well inside its 2-minute grace,
    however slowly the machine runs — no race against the wall clock."""
    now = time.time()
    at = datetime.fromtimestamp(now - 30, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    monkeypatch.setenv("VIGIL_CRON_NOW", str(now - 60))
    assert run_cli("cron", "add", name, "-s", at, "--prompt", prompt).exit_code == 0
    monkeypatch.delenv("VIGIL_CRON_NOW")


def _gateway_until_a_run_ends(env: dict[str, str], *args: str) -> tuple[str, list[dict], str, str, int]:
    """Start `vigil gateway run`, wait until its first cron run has finished, stop it with
    SIGTERM; return the banner line, the run log, the rest of stdout, stderr and the exit code."""
    process = subprocess.Popen([sys.executable, "-c", GATEWAY, "gateway", "run", *args], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        deadline = time.monotonic() + 20
        while True:
            runs = json.loads(run_cli("cron", "runs", "--json").output)
            if runs and runs[0]["status"] != "running":
                break
            assert time.monotonic() < deadline, runs
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        # Not communicate(): it reads the raw pipe and would miss what readline() buffered.
        process.wait(15)
        out, err = process.stdout.read(), process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
    return banner, runs, out, err, process.returncode


def test_gateway_process_runs_due_jobs_until_sigterm(
    fake_model: FakeModelServer, vigil_home: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _add_job_already_due("soon", "wake up", monkeypatch)
    fake_model.queue("Good morning.")
    env = {**os.environ, "VIGIL_HOME": str(vigil_home), "OPENAI_BASE_URL": fake_model.base_url,
           "OPENAI_API_KEY": fake_model.api_key}
    banner, runs, out, err, code = _gateway_until_a_run_ends(env, "--web-port", str(free_port()))
    assert "the cron scheduler (1 job(s) armed" in banner and "no messaging platform" in banner
    assert code == 0, err
    assert "1 cron run(s) started)" in out
    runs = json.loads(run_cli("cron", "runs", "--json").output)
    assert [(r["job"], r["status"], r["answer"]) for r in runs] == [("soon", "ok", "Good morning.")]
    printed = (banner + out).splitlines()
    said = [line for line in printed if not line.startswith("    ")]  # the login link is printed, not logged
    assert any("/login?token=" in line for line in printed if line.startswith("    ")), "\n".join(printed)
    started = [line for line in said if "cron run started: soon (scheduled for " in line]
    ended = [line for line in said if "cron run ended: soon — ok in " in line]
    assert len(started) == 1 and len(ended) == 1 and said.index(started[0]) < said.index(ended[0]), said
    assert re.search(r"ok in \d+\.\ds, session \w+", ended[0]), ended
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z+\-0-9]+ ", line) for line in said), said
    log = vigil_home / "logs" / "gateway.log"
    assert log.read_text().splitlines() == said  # the same lines, in the profile's log
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


async def test_serve_on_a_fake_clock(
    fake_model: FakeModelServer, store: SQLiteStore, profile: Profile, clock: FakeClock, add_job: AddJob,
    make_runner: MakeRunner,
) -> None:
    add_job("tick", "every 1m")
    runner = await make_runner()  # for its client only
    stop = asyncio.Event()
    lines: list[str] = []
    task = asyncio.create_task(serve(store=store, profile=profile, settings=Settings(timezone="UTC"), client=runner.client,
                                     stop=stop, announce=lines.append, clock=clock,
                                     config=GatewayConfig(poll_interval=0, stop_grace=5, serve_http=False)))
    while not lines:
        await asyncio.sleep(0.01)
    assert lines[0].startswith("2026-03-02 08:00:00 UTC vigil gateway:")
    assert "1 job(s) armed, next at 2026-03-02 08:01 UTC (in 1m)" in lines[0]
    await clock.set(START + 60)
    await fake_model.wait_for_requests_async(1)
    while not any("cron run ended" in line for line in lines):
        await asyncio.sleep(0.01)
    stop.set()
    scheduler = (await task).cron
    assert scheduler.stats.claims == 1 and "stopped" in lines[-1]
    assert "2026-03-02 08:01:00 UTC cron run started: tick (scheduled for 2026-03-02 08:01 UTC)" in lines
    assert [line for line in lines if "cron run ended: tick — ok in " in line]
    assert (profile.logs_dir / "gateway.log").read_text().splitlines() == lines


def test_the_gateway_log_rotates_and_stays_private(tmp_path: Path) -> None:
    said: list[str] = []
    log = tmp_path / "logs" / "gateway.log"
    activity = GatewayActivity(said.append, log, clock=FakeClock(START), zone="Europe/Berlin", max_bytes=400, backups=2)
    try:
        for n in range(40):
            activity.say(f"line {n:02d} " + "x" * 40)
    finally:
        activity.close()
    files = sorted(p.name for p in log.parent.iterdir())
    assert files == ["gateway.log", "gateway.log.1", "gateway.log.2"]
    assert all(stat.S_IMODE((log.parent / name).stat().st_mode) == 0o600 for name in files)
    assert all(p.stat().st_size <= 400 for p in log.parent.iterdir())
    assert log.read_text().splitlines()[-1] == said[-1] == "2026-03-02 09:00:00 CET line 39 " + "x" * 40


def test_gateway_starts_without_a_model_and_a_due_run_fails_with_the_hint(
    vigil_home: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README's first command: `vigil gateway run` on embedded defaults, nothing configured."""
    _add_job_already_due("early", "hello", monkeypatch)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["VIGIL_HOME"] = str(vigil_home)
    # Embedded defaults but the port: 8787 may be taken by the user's own gateway.
    banner, runs, out, err, code = _gateway_until_a_run_ends(env, "--web-port", str(free_port()))
    assert "the cron scheduler" in banner and "web chat at http://127.0.0.1:" in banner
    assert code == 0, err
    assert "no model is configured yet" in err
    assert runs[0]["status"] == "failed" and "No model is configured" in json.dumps(runs[0])
    ended = [line for line in out.splitlines() if "cron run ended: early — failed in " in line]
    assert len(ended) == 1 and "ModelNotConfigured: No model is configured" in ended[0], out


async def test_without_a_model_a_job_backs_off_1_2_4_minutes_and_cron_explains_why(
    store: SQLiteStore, profile: Profile, clock: FakeClock, add_job: AddJob, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gateway's pieces on a fake clock with the client it uses before a model is set up:
    each attempt fails at once with the configuration hint; attempts back off (1, 2, 4, 8
    minutes) with one engine fire per attempt or back-off, and `vigil cron show/status` say why."""
    add_job("tick", "every 1m")
    repo = CronRepo(store, clock)
    runner = CronRunner(repo=repo, client=LazyModelClient(Settings().model, env={}), profile=profile,
                        settings=Settings(), clock=clock)
    scheduler = CronScheduler(repo, runner.execute, clock=clock, poll_interval=0)
    await scheduler.start()
    while (due := scheduler.engine.due_of("tick")) is not None and due <= START + 16 * 60:
        await clock.set(due + 0.25)  # wake-ups land a little after the due time
        await settle(scheduler)
        assert scheduler.engine.stats.fired <= 8, "the scheduler re-fired a due time in the past"
    await scheduler.stop()
    failed = [r for r in repo.runs.list("tick") if r.status == "failed"]
    assert sorted(round((r.when - START) / 60) for r in failed) == [1, 2, 4, 8, 16]
    assert all("No model is configured" in (r.error or "") for r in failed)
    assert (scheduler.engine.stats.fired, scheduler.stats.claims, scheduler.stats.skipped) == (8, 5, 3)

    monkeypatch.setenv("VIGIL_CRON_NOW", str(clock.now()))
    shown = run_cli("cron", "show", "tick").output
    assert "5 failure(s) in a row; backing off until 2026-03-02 08:32 UTC" in shown
    assert "No model is configured" in shown and "vigil config set model.provider" in shown
    status = run_cli("cron", "status").output
    assert "failing" in status and "No model is configured" in status and "vigil config set model" in status
