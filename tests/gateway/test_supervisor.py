"""Adapter supervision: a platform that fails to start, or whose receiving loop dies, is retried
with back-off while the gateway and the other platforms serve; `vigil gateway status` shows
each adapter's state, since when, and its last error; a missing secret is reported, not fatal.

The gateway runs in-process (`serve`, no HTTP) with test platforms; the model is the fake
server over HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest

from tests.cli.helpers import run_cli
from tests.gateway.conftest import RecordingAdapter, eventually
from tests.gateway.adapters.harness import Gateways, settings_for
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import AdapterHealth, GatewayPort, Inbound
from vigil.gateway.lock import acquire
from vigil.gateway.run import GatewayConfig, GatewayRun, _snapshot
from vigil.gateway.status import STATUS_KEY, adapter_entry
from vigil.gateway.supervisor import delay, missing_secrets
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.fake_model import FakeModelServer


@dataclass
class Flaky(RecordingAdapter):
    """A platform whose start() fails ``start_failures`` times; ``die()`` ends its receiving loop."""

    start_failures: int = 0
    starts: int = 0
    alive: bool = False
    errors: list[str] = field(default_factory=list)

    async def start(self, gateway: GatewayPort) -> None:
        self.starts += 1
        if self.start_failures > 0:
            self.start_failures -= 1
            raise ConnectionError("502 Bad Gateway from the platform")
        self.gateway = gateway
        self.alive = True

    async def stop(self) -> None:
        self.alive = False
        self.stopped = True

    def die(self, reason: str) -> None:
        self.alive = False
        self.errors.append(reason)

    def health(self) -> AdapterHealth:
        if self.alive:
            return AdapterHealth(True, "polling")
        return AdapterHealth(False, "not receiving", "stopped", None, self.errors[-1] if self.errors else None)


Start = Callable[..., Awaitable[tuple[GatewayRun, list[str]]]]


@pytest.fixture
async def start_gateway(
    fake_model: FakeModelServer, vigil_home: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Start]:
    profile = Profile("default", vigil_home).ensure()
    store = SQLiteStore(profile.state_db)
    gateways = Gateways()
    lock = acquire(profile)  # as `vigil gateway run` holds it: status believes the record

    async def start(adapters: dict[str, Any], settings: Settings | None = None) -> tuple[GatewayRun, list[str]]:
        settings = settings_for(fake_model, base=settings)
        settings = settings.copy_with(update={  # the senders these tests use are allowed
            "slack": settings.slack.copy_with(update={"allow": ["U1"]}),
            "telegram": settings.telegram.copy_with(update={"allow": ["7"]}),
        })
        serving = await gateways.serve(profile, settings, store=store, config=GatewayConfig(
            poll_interval=0, stop_grace=2, serve_http=False, adapters=adapters, adapter_backoff=(0.02, 0.08),
            adapter_watch=0.02))
        return serving.run, serving.lines

    yield start
    await gateways.close()
    lock.release()
    store.close()


def _status() -> dict[str, Any]:
    result = run_cli("gateway", "status", "--json")
    return {a["name"]: a for a in json.loads(result.output)["adapters"]}


async def _status_written(run: GatewayRun) -> None:
    """The status record as the gateway rewrites it every few seconds, written now."""
    record = dict(run.gateway.store.get_meta(STATUS_KEY).value)  # type: ignore[union-attr]
    record.update(_snapshot(run, run.cron), updated_at=time.time())
    record["adapters"] = [adapter_entry(a) for a in record["adapters"]]
    await asyncio.to_thread(run.gateway.store.set_meta, STATUS_KEY, record)


def test_back_off_doubles_from_one_second_to_a_minute() -> None:
    assert [delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


async def test_an_adapter_failing_to_start_is_retried_while_the_others_serve(
    start_gateway: Start, fake_model: FakeModelServer
) -> None:
    flaky, steady = Flaky("telegram", start_failures=3), RecordingAdapter("slack")
    run, lines = await start_gateway({"telegram": flaky, "slack": steady})
    assert steady.gateway is not None  # the healthy platform serves at once
    fake_model.queue("hello back")
    await run.gateway.receive(Inbound(RouteKey("slack", "C1"), "m1", "hello", sender="U1"))
    await eventually(lambda: steady.texts() == ["hello back"], what="the slack answer")

    supervised = run.gateway.adapters["telegram"]
    health = supervised.health()
    if flaky.starts < 4:  # still retrying: the status says so, with the error and since when
        assert health.state == "retrying" and "502 Bad Gateway" in (health.last_error or "")
        assert health.since is not None
    await eventually(lambda: flaky.alive, what="telegram connected after its failures")
    assert flaky.starts == 4 and supervised.health().state == "connected"
    said = [line for line in lines if "telegram failed" in line]
    assert len(said) == 1 and "retrying in 0.02 s" in said[0]  # said once, not at every try
    assert any("telegram connected again after 3 failed tries" in line for line in lines)


async def test_a_receiving_loop_that_dies_is_restarted_and_status_shows_it(
    start_gateway: Start, fake_model: FakeModelServer
) -> None:
    flaky = Flaky("telegram")
    run, lines = await start_gateway({"telegram": flaky})
    await _status_written(run)
    assert _status()["telegram"]["state"] == "connected"
    flaky.start_failures = 1_000  # it will not come back for now
    flaky.die("getUpdates: 401 Unauthorized")
    await eventually(lambda: run.gateway.adapters["telegram"].health().state == "retrying", what="retrying")
    await eventually(lambda: flaky.starts >= 3, what="restart tries")
    await _status_written(run)
    shown = _status()["telegram"]
    assert shown["state"] == "retrying" and shown["ok"] is False and shown["since"]
    assert "502 Bad Gateway" in shown["last_error"]
    table = run_cli("gateway", "status").output
    assert "telegram retrying since " in table and "last error: 502 Bad Gateway" in table
    assert any("getUpdates: 401 Unauthorized" in line for line in lines)

    fake_model.queue("answered while you were away")
    await run.gateway.receive(Inbound(RouteKey("telegram", "42"), "u1", "are you there?", sender="7"))
    await eventually(lambda: run.gateway.store.gateway.outbox_counts()["pending"] == 1 and any(
        e.attempts for e in run.gateway.store.gateway.outbox_list(statuses=("pending",))), what="a try that failed")
    flaky.start_failures = 0
    await eventually(lambda: flaky.alive, what="back")
    await _status_written(run)
    assert _status()["telegram"]["state"] == "connected"
    await eventually(lambda: flaky.texts() == ["answered while you were away"], what="the reply once it is back")


async def test_an_enabled_platform_without_its_secret_is_reported_and_the_gateway_starts(
    start_gateway: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-not-a-real-token")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "not-a-real-secret")
    plain = Settings()
    settings = plain.copy_with(update={
        "telegram": plain.telegram.copy_with(update={"enabled": True}),
        "slack": plain.slack.copy_with(update={"enabled": True}),
    })
    assert missing_secrets("telegram", settings) == ["TELEGRAM_BOT_TOKEN"] and missing_secrets("slack", settings) == []
    slack = RecordingAdapter("slack")
    run, lines = await start_gateway({"slack": slack}, settings)  # no telegram adapter could be built
    assert slack.gateway is not None
    said = [line for line in lines if "TELEGRAM_BOT_TOKEN" in line]
    assert len(said) == 1 and "telegram is enabled but TELEGRAM_BOT_TOKEN is not set" in said[0]
    assert "xoxb" not in "\n".join(lines)
    await _status_written(run)
    shown = _status()
    assert shown["telegram"]["state"] == "misconfigured" and "TELEGRAM_BOT_TOKEN" in shown["telegram"]["last_error"]
    assert shown["slack"]["state"] == "connected"
    assert "telegram misconfigured — last error: telegram is enabled but TELEGRAM_BOT_TOKEN" in run_cli(
        "gateway", "status").output
