"""The gateway's Prometheus metrics, and the /healthz and /metrics routes over a real store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.testclient import TestClient

from vigil.gateway.health import store_check
from vigil.gateway.metrics import GatewayMetrics, http_routes
from vigil.store import open_store
from vigil.usage import Usage

SECRET = "s3cret-token"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition by (name, sorted labels)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_the_exposition_counts_what_the_gateway_did() -> None:
    metrics = GatewayMetrics()
    metrics.turns.labels(kind="user", outcome="answered").inc(3)
    metrics.turns.labels(kind="heartbeat", outcome="interrupted").inc()
    metrics.queue_depth.set(4)
    metrics.heartbeat_fires.inc(2)
    metrics.heartbeat_refunds.inc()
    metrics.cron_runs.labels(outcome="ok").inc()
    metrics.outbox_retries.labels(adapter="web").inc(5)
    metrics.outbox_failures.labels(adapter="web").inc()
    metrics.outbox_sent.labels(adapter="web").inc(7)
    metrics.inbound_messages.labels(adapter="web", duplicate="false").inc(8)
    metrics.inbound_messages.labels(adapter="web", duplicate="true").inc()
    metrics.live_conversations.set(2)
    metrics.add_usage(Usage(input_tokens=100, cache_read_tokens=900, cache_write_tokens=50, output_tokens=40))
    metrics.add_usage(Usage(input_tokens=10, cache_read_tokens=1000, output_tokens=5))

    got = samples(metrics.exposition().decode())
    assert got[("vigil_gateway_turns_total", (("kind", "user"), ("outcome", "answered")))] == 3
    assert got[("vigil_gateway_turns_total", (("kind", "heartbeat"), ("outcome", "interrupted")))] == 1
    assert got[("vigil_gateway_turns_total", (("kind", "cron"), ("outcome", "failed")))] == 0  # shown before it happens
    assert got[("vigil_gateway_queue_depth", ())] == 4
    assert got[("vigil_gateway_heartbeat_fires_total", ())] == 2
    assert got[("vigil_gateway_heartbeat_refunds_total", ())] == 1
    assert got[("vigil_gateway_cron_runs_total", (("outcome", "ok"),))] == 1
    assert got[("vigil_gateway_outbox_retries_total", (("adapter", "web"),))] == 5
    assert got[("vigil_gateway_outbox_failures_total", (("adapter", "web"),))] == 1
    assert got[("vigil_gateway_outbox_sent_total", (("adapter", "web"),))] == 7
    assert got[("vigil_gateway_inbound_messages_total", (("adapter", "web"), ("duplicate", "false")))] == 8
    assert got[("vigil_gateway_inbound_messages_total", (("adapter", "web"), ("duplicate", "true")))] == 1
    assert got[("vigil_gateway_live_conversations", ())] == 2
    tokens = {kind: got[("vigil_gateway_prompt_tokens_total", (("kind", kind),))] for kind in
              ("uncached", "cache_read", "cache_write")}
    assert tokens == {"uncached": 110, "cache_read": 1900, "cache_write": 50}  # output tokens are not prompt tokens


def test_each_gateway_counts_from_zero_on_its_own_registry() -> None:
    first, second = GatewayMetrics(), GatewayMetrics()
    first.heartbeat_fires.inc()
    assert samples(second.exposition().decode())[("vigil_gateway_heartbeat_fires_total", ())] == 0
    assert samples(first.exposition().decode())[("vigil_gateway_heartbeat_fires_total", ())] == 1


def _authorized(request: Request) -> bool:
    return request.headers.get("authorization") == f"Bearer {SECRET}"


@pytest.fixture
def store(vigil_home: Path):
    store = open_store(vigil_home / "state.db")
    yield store
    store.close()


def _client(metrics: GatewayMetrics, check) -> TestClient:
    return TestClient(Starlette(routes=http_routes(metrics, check, authorized=_authorized)))


def test_healthz_is_ok_while_the_store_answers_and_503_once_it_does_not(vigil_home: Path) -> None:
    store = open_store(vigil_home / "state.db")
    with _client(GatewayMetrics(), store_check(store)) as client:
        ok = client.get("/healthz")
        assert (ok.status_code, ok.text) == (200, "ok\n")
        store.close()
        down = client.get("/healthz")
        assert down.status_code == 503
        assert down.text == f"store unavailable: the session store {vigil_home / 'state.db'} is closed\n"


def test_healthz_reports_a_check_that_says_no(store) -> None:
    async def says_no() -> bool:
        return False

    with _client(GatewayMetrics(), says_no) as client:
        down = client.get("/healthz")
    assert down.status_code == 503 and "store check failed" in down.text


def test_healthz_does_not_wait_forever_for_a_hung_store() -> None:
    async def hangs() -> bool:
        await asyncio.sleep(3600)
        return True

    routes = http_routes(GatewayMetrics(), hangs, authorized=_authorized, health_timeout=0.05)
    with TestClient(Starlette(routes=routes)) as client:
        down = client.get("/healthz")
    assert down.status_code == 503 and "no answer within 0.05s" in down.text


def test_metrics_need_authorization_and_then_speak_prometheus(store) -> None:
    metrics = GatewayMetrics()
    metrics.turns.labels(kind="cron", outcome="failed").inc()
    with _client(metrics, store_check(store)) as client:
        for headers in ({}, {"authorization": "Bearer wrong"}):
            refused = client.get("/metrics", headers=headers)
            assert refused.status_code == 401
            assert "vigil_gateway" not in refused.text
        page = client.get("/metrics", headers={"authorization": f"Bearer {SECRET}"})
        assert client.get("/healthz").status_code == 200  # /healthz needs no login
        assert client.post("/metrics", headers={"authorization": f"Bearer {SECRET}"}).status_code == 405
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/plain; version=")
    assert samples(page.text)[("vigil_gateway_turns_total", (("kind", "cron"), ("outcome", "failed")))] == 1
