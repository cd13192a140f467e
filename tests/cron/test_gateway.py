"""`vigil gateway run` with no platform configured: a pure scheduler until SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from tests.cli.helpers import run_cli
from tests.cron.conftest import START, AddJob, MakeRunner
from vigil.clock import FakeClock
from vigil.config import Settings
from vigil.gateway.run import GatewayConfig, serve
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer

GATEWAY = "from vigil.cli.main import main; main()"


def test_gateway_process_runs_due_jobs_until_sigterm(fake_model: FakeModelServer, vigil_home: Path) -> None:
    soon = datetime.fromtimestamp(time.time() + 2, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    assert run_cli("cron", "add", "soon", "-s", soon, "--prompt", "wake up").exit_code == 0
    fake_model.queue("Good morning.")
    env = {**os.environ, "VIGIL_HOME": str(vigil_home), "OPENAI_BASE_URL": fake_model.base_url,
           "OPENAI_API_KEY": fake_model.api_key}
    process = subprocess.Popen([sys.executable, "-c", GATEWAY, "gateway", "run"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert "serving the cron scheduler (1 job(s) armed" in banner and "no messaging platform" in banner
        fake_model.wait_for_requests(1, timeout=15)
        deadline = time.monotonic() + 10
        while json.loads(run_cli("cron", "runs", "--json").output)[0]["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "stopped (1 cron run(s) started)" in out
    runs = json.loads(run_cli("cron", "runs", "--json").output)
    assert [(r["job"], r["status"], r["answer"]) for r in runs] == [("soon", "ok", "Good morning.")]


async def test_serve_on_a_fake_clock(
    fake_model: FakeModelServer, store: SQLiteStore, profile: Profile, clock: FakeClock, add_job: AddJob,
    make_runner: MakeRunner,
) -> None:
    add_job("tick", "every 1m")
    runner = await make_runner()  # for its client only
    stop = asyncio.Event()
    lines: list[str] = []
    task = asyncio.create_task(serve(store=store, profile=profile, settings=Settings(), client=runner.client,
                                     stop=stop, announce=lines.append, clock=clock,
                                     config=GatewayConfig(poll_interval=0, stop_grace=5)))
    while not lines:
        await asyncio.sleep(0.01)
    assert "1 job(s) armed, next at 2026-03-02T08:01:00Z (in 1m)" in lines[0]
    await clock.set(START + 60)
    await fake_model.wait_for_requests_async(1)
    stop.set()
    scheduler = await task
    assert scheduler.stats.claims == 1 and "stopped" in lines[-1]


def test_gateway_starts_without_a_model_and_a_due_run_fails_with_the_hint(vigil_home: Path) -> None:
    """The README's first command: `vigil gateway run` on embedded defaults, nothing configured."""
    soon = datetime.fromtimestamp(time.time() + 1, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    assert run_cli("cron", "add", "early", "-s", soon, "--prompt", "hello").exit_code == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["VIGIL_HOME"] = str(vigil_home)
    process = subprocess.Popen([sys.executable, "-c", GATEWAY, "gateway", "run"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert "serving the cron scheduler" in process.stdout.readline()
        deadline = time.monotonic() + 20
        while True:
            runs = json.loads(run_cli("cron", "runs", "--json").output)
            if runs and runs[0]["status"] not in ("running",):
                break
            assert time.monotonic() < deadline, runs
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "no model is configured yet" in err
    assert runs[0]["status"] == "failed" and "No model is configured" in json.dumps(runs[0])
