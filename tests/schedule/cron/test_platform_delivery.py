"""Cron answers to Slack, Telegram and web targets go through the gateway's outbox: the run is
recorded queued, then delivered, or failed once the outbox gave up, in `vigil cron runs` tables.

The gateway runs in-process (`serve`, no HTTP) with recording platforms named slack and
telegram; the model is the fake server over HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable

import pytest

from tests.cli.helpers import run_cli
from tests.gateway.adapters.harness import Gateways, settings_for
from tests.gateway.conftest import RecordingAdapter, eventually
from vigil.clock import SystemClock
from vigil.config.settings import Settings
from vigil.gateway.run import GatewayConfig, GatewayRun
from vigil.profiles import Profile
from vigil.schedule.cron.jobs import JobSpec, new_job
from vigil.schedule.cron.repo import CronRepo
from vigil.schedule.cron.runs import RunRecord
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.fake_model import FakeModelServer


@dataclass
class Running:
    run: GatewayRun
    slack: RecordingAdapter
    telegram: RecordingAdapter
    web: RecordingAdapter
    repo: CronRepo
    lines: list[str]

    def add(self, name: str, deliver: str) -> None:
        add_job(self.repo, name, deliver, "every 1h")

    async def run_job(self, name: str) -> RunRecord:
        claim = await asyncio.to_thread(self.repo.claim_manual, name)
        record = await self.run.cron.execute(claim)
        assert record is not None
        return record

    def record(self, record: RunRecord) -> dict:
        stored = self.repo.runs.get(record.job, record.stamp)
        assert stored is not None
        return stored.delivery or {}


StartGateway = Callable[..., Awaitable[Running]]


def add_job(repo: CronRepo, name: str, deliver: str, schedule: str, *, now: float | None = None) -> None:
    job = new_job(name, JobSpec(schedule=schedule, prompt="report", deliver=deliver),
                  now=repo.clock.now() if now is None else now, default_tz="UTC", skills_dir=None)  # type: ignore[arg-type]
    repo.add(job)


@pytest.fixture
async def gateway(fake_model: FakeModelServer, store: SQLiteStore, profile: Profile) -> AsyncIterator[StartGateway]:
    gateways = Gateways()

    async def start(*, attempts: int = 8, web: bool = False, before: Callable[[CronRepo], None] | None = None) -> Running:
        if before is not None:
            before(CronRepo(store, SystemClock()))
        settings = settings_for(fake_model, base=Settings(timezone="UTC"), gateway={"outbox_attempts": attempts})
        slack, telegram, page = RecordingAdapter("slack"), RecordingAdapter("telegram"), RecordingAdapter("web")
        adapters = {"slack": slack, "telegram": telegram, **({"web": page} if web else {})}
        serving = await gateways.serve(profile, settings, store=store, config=GatewayConfig(
            poll_interval=0, stop_grace=2, serve_http=False, adapters=adapters))
        return Running(serving.run, slack, telegram, page, CronRepo(store, SystemClock()), serving.lines)

    yield start
    await gateways.close()


async def test_a_cron_job_delivers_to_a_telegram_topic_and_to_a_slack_thread(
    gateway: StartGateway, fake_model: FakeModelServer
) -> None:
    running = await gateway()
    running.add("tg", "telegram:-1001234:42")
    running.add("sl", "slack:C0123ABC:1712345678.123456")
    fake_model.queue("Deploy is green.")
    fake_model.queue("Standup in 5.")
    tg = await running.run_job("tg")
    sl = await running.run_job("sl")
    assert tg.delivery and tg.delivery["status"] in ("queued", "delivered")

    await eventually(lambda: running.telegram.sent and running.slack.sent, what="both deliveries")
    [to_telegram], [to_slack] = running.telegram.sent, running.slack.sent
    assert (to_telegram.route, to_telegram.kind, to_telegram.text) == (
        RouteKey("telegram", "-1001234", "42"), "cron", "Deploy is green.")
    assert (to_slack.route, to_slack.text) == (RouteKey("slack", "C0123ABC", "1712345678.123456"), "Standup in 5.")
    assert to_slack.meta["cron_job"] == "sl" and to_slack.session_id == sl.session_id

    await eventually(lambda: running.record(tg).get("status") == "delivered" and running.record(sl).get("status") == "delivered",
                     what="runs recorded delivered")
    assert "delivered to telegram:-1001234:42" in running.record(tg)["detail"]
    table = run_cli("cron", "runs").output
    assert table.count("ok, delivered") == 2
    runs = json.loads(run_cli("cron", "runs", "--json").output)
    assert {r["job"]: r["delivery"]["status"] for r in runs} == {"tg": "delivered", "sl": "delivered"}
    assert any("delivered cron" in line for line in running.lines)


async def test_a_scheduled_run_due_at_start_delivers_to_telegram(
    gateway: StartGateway, fake_model: FakeModelServer
) -> None:
    now = time.time()
    due = datetime.fromtimestamp(now - 30, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    fake_model.queue("Morning report.")
    running = await gateway(before=lambda repo: add_job(repo, "morning", "telegram:4242", due, now=now - 60))
    await eventually(lambda: running.telegram.texts() == ["Morning report."], what="the scheduled delivery")
    assert running.telegram.sent[0].route == RouteKey("telegram", "4242")
    [record] = running.repo.runs.list("morning")
    await eventually(lambda: running.record(record).get("status") == "delivered", what="recorded delivered")


async def test_a_platform_down_during_delivery_gets_it_once_it_is_back(
    gateway: StartGateway, fake_model: FakeModelServer
) -> None:
    running = await gateway(attempts=100)
    running.add("sl", "slack:C0123ABC:1712345678.123456")
    running.slack.failures = 10**6  # down
    fake_model.queue("The nightly build passed.")
    record = await running.run_job("sl")
    await eventually(lambda: "retrying: the platform is down" in running.record(record).get("detail", ""),
                     what="the retries shown in the run")
    assert running.record(record)["status"] == "queued"
    table = run_cli("cron", "runs").output
    assert "ok, queued" in table and "retrying" in table
    running.slack.failures = 0  # back
    await eventually(lambda: running.record(record).get("status") == "delivered", what="delivered after the outage")
    assert running.slack.texts() == ["The nightly build passed."]  # landed once
    assert "delivered to slack:C0123ABC:1712345678.123456" in running.record(record)["detail"]
    assert sum("failed, retrying" in line for line in running.lines) >= 1


async def test_a_delivery_the_outbox_gives_up_on_shows_failed_in_the_tables(
    gateway: StartGateway, fake_model: FakeModelServer
) -> None:
    running = await gateway(attempts=2)
    running.add("tg", "telegram:@my_channel")
    running.telegram.failures = 10
    fake_model.queue("Nobody will read this.")
    record = await running.run_job("tg")
    await eventually(lambda: running.record(record).get("status") == "failed", what="delivery failed")
    assert running.telegram.sent == []
    detail = running.record(record)["detail"]
    assert "failed after 2 tries" in detail and "the platform is down" in detail
    table = run_cli("cron", "runs").output
    assert "ok, delivery failed" in table and "delivery to" in table
    listed = [line for line in run_cli("cron", "list").output.splitlines() if line.split()[:1] == ["tg"]]
    assert listed and "ok, delivery failed" in listed[0]
    shown = run_cli("cron", "show", "tg").output
    assert "delivery   failed: delivery to telegram:@my_channel failed after 2 tries" in shown
    assert json.loads(run_cli("cron", "show", "tg", "--json").output)["last_delivery"]["status"] == "failed"
    # the answer is still kept locally
    assert record.delivery and record.delivery["path"] and open(record.delivery["path"]).read().count("Nobody")


async def test_web_delivery_goes_to_the_runs_own_conversation(
    gateway: StartGateway, fake_model: FakeModelServer
) -> None:
    running = await gateway(web=True)
    running.add("w", "web")
    fake_model.queue("Your weekly summary.")
    record = await running.run_job("w")
    web = running.web
    await eventually(lambda: web.sent, what="the web delivery")
    assert web.sent[0].route == RouteKey("web", record.session_id or "") and web.sent[0].kind == "cron"
    await eventually(lambda: running.record(record).get("status") == "delivered", what="recorded delivered")
    assert "delivered to the web chat" in running.record(record)["detail"]


def test_an_outcome_reached_while_no_gateway_recorded_it_is_recorded_at_the_next_start(
    store: SQLiteStore, profile: Profile
) -> None:
    from vigil.gateway.cron_delivery import CronOutcomes
    from vigil.store.gateway.gateway_tables import NewOutbound

    entry = store.gateway.outbox_add(NewOutbound(RouteKey("telegram", "42"), "hi", kind="cron",
                                                 meta={"cron_job": "j", "cron_run": "20260302T080000Z"}), now=1.0)
    other = store.gateway.outbox_add(NewOutbound(RouteKey("telegram", "42"), "x", kind="cron",
                                                 meta={"cron_job": "k", "cron_run": "20260302T080000Z"}), now=1.0)
    runs = CronRepo(store, SystemClock()).runs
    for job, outbox_id in (("j", entry.id), ("k", other.id)):
        runs.put(RunRecord(job, "20260302T080000Z", "scheduled", "ok", 1.0, 1.0,
                           delivery={"status": "queued", "detail": "queued", "path": None, "outbox_id": outbox_id}))
    store.gateway.outbox_sent(entry.id, now=2.0)
    store.gateway.outbox_fail(other.id, error="chat not found", now=2.0)
    assert CronOutcomes(store).reconcile() == 2
    assert runs.get("j", "20260302T080000Z").delivery["status"] == "delivered"  # type: ignore[union-attr]
    failed = runs.get("k", "20260302T080000Z").delivery  # type: ignore[union-attr]
    assert failed["status"] == "failed" and "after 1 try" in failed["detail"] and "chat not found" in failed["detail"]
    assert CronOutcomes(store).reconcile() == 0  # once


async def test_vigil_cron_run_beside_a_running_gateway_hands_the_answer_to_its_outbox(
    gateway: StartGateway, fake_model: FakeModelServer, profile: Profile, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vigil.gateway import outbox
    from vigil.gateway.lock import acquire

    monkeypatch.setattr(outbox, "IDLE_RECHECK", 0.2)  # the sender looks at the outbox often, not every 30 s
    monkeypatch.setenv("OPENAI_BASE_URL", fake_model.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", fake_model.api_key)
    lock = acquire(profile)  # held as `vigil gateway run` holds it: `cron run` sees a running gateway
    try:
        running = await gateway()
        running.add("sl", "slack:C0123ABC")
        fake_model.queue("By hand.")
        ran = await asyncio.to_thread(run_cli, "cron", "run", "sl")
        assert ran.exit_code == 0 and "By hand." in ran.stdout
        assert "needs-gateway" not in ran.stderr
        await eventually(lambda: running.slack.texts() == ["By hand."], what="the gateway sent it")
        [record] = running.repo.runs.list("sl")
        await eventually(lambda: running.record(record).get("status") == "delivered", what="recorded delivered")
    finally:
        lock.release()
