"""The gateway's counters for Prometheus, and its ``/healthz`` and ``/metrics`` routes.

Every metric is named ``vigil_gateway_*`` and lives on the gateway's own registry (not the
process-wide default one), so each gateway (and each test) counts from zero. Label sets that
are known in advance are created at zero, so a scrape shows them before the first event.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from vigil.gateway.health import StoreCheck
from vigil.masking import mask_secrets
from vigil.usage import Usage

PREFIX = "vigil_gateway"
TURN_KINDS = ("user", "heartbeat", "cron")
TURN_OUTCOMES = ("answered", "failed", "interrupted")
TOKEN_KINDS = ("uncached", "cache_read", "cache_write")
GIVE_UP_REASONS = ("permanent", "retry_window")
SET_ASIDE_REASONS = ("deaths", "error")
HEALTH_TIMEOUT = 5.0
"""Seconds ``/healthz`` waits for the store before it answers 503."""


class GatewayMetrics:
    """The gateway's metrics. Record events through the attributes (prometheus_client objects):

    ``turns.labels(kind=, outcome=).inc()``, ``queue_depth.set(n)``, ``heartbeat_fires.inc()``,
    ``heartbeat_refunds.inc()``, ``cron_runs.labels(outcome=).inc()``,
    ``outbox_retries|outbox_failures|outbox_sent.labels(adapter=).inc()``,
    ``inbound_messages.labels(adapter=, duplicate="true"|"false").inc()``,
    ``live_conversations.set(n)``, ``inbox_given_up.labels(reason=permanent|retry_window).inc()``,
    ``inbox_set_aside.labels(reason=deaths|error).inc()``, ``waiting_messages.set(n)``, and
    :meth:`add_usage` for prompt tokens.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter(f"{PREFIX}_turns", "Turns run, by kind and outcome.", ["kind", "outcome"], registry=r)
        self.queue_depth = Gauge(f"{PREFIX}_queue_depth", "Messages waiting for a conversation's turn.", registry=r)
        self.heartbeat_fires = Counter(f"{PREFIX}_heartbeat_fires", "Heartbeat slots fired.", registry=r)
        self.heartbeat_refunds = Counter(
            f"{PREFIX}_heartbeat_refunds", "Heartbeat slots given back before the agent ran.", registry=r
        )
        self.cron_runs = Counter(f"{PREFIX}_cron_runs", "Cron runs, by outcome.", ["outcome"], registry=r)
        self.outbox_retries = Counter(
            f"{PREFIX}_outbox_retries", "Reply deliveries tried again after a failure.", ["adapter"], registry=r
        )
        self.outbox_failures = Counter(
            f"{PREFIX}_outbox_failures", "Replies given up on after the last attempt.", ["adapter"], registry=r
        )
        self.outbox_sent = Counter(f"{PREFIX}_outbox_sent", "Replies delivered.", ["adapter"], registry=r)
        self.inbound_messages = Counter(
            f"{PREFIX}_inbound_messages",
            "Messages received; duplicate=true for a redelivery answered before.",
            ["adapter", "duplicate"],
            registry=r,
        )
        self.denied_messages = Counter(
            f"{PREFIX}_denied_messages",
            "Messages from senders not allowed on the platform (answered with a pairing code or not at all).",
            ["adapter"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            f"{PREFIX}_prompt_tokens", "Prompt tokens sent to the model, by how they were billed.", ["kind"], registry=r
        )
        self.live_conversations = Gauge(
            f"{PREFIX}_live_conversations", "Conversations open in the gateway.", registry=r
        )
        self.inbox_given_up = Counter(
            f"{PREFIX}_inbox_given_up",
            "Messages failed: a permanent error (permanent) or a retry window that ran out (retry_window).",
            ["reason"], registry=r,
        )
        self.inbox_set_aside = Counter(
            f"{PREFIX}_inbox_set_aside",
            "Messages set aside as poison: the process died under them again and again (deaths), or "
            "their turns failed with the same error again and again (error).",
            ["reason"], registry=r,
        )
        self.waiting_messages = Gauge(
            f"{PREFIX}_waiting_messages", "Messages waiting for the model (or the store) to be tried again.", registry=r
        )
        for reason in GIVE_UP_REASONS:
            self.inbox_given_up.labels(reason=reason)
        for reason in SET_ASIDE_REASONS:
            self.inbox_set_aside.labels(reason=reason)
        for kind in TURN_KINDS:
            for outcome in TURN_OUTCOMES:
                self.turns.labels(kind=kind, outcome=outcome)
        for kind in TOKEN_KINDS:
            self.prompt_tokens.labels(kind=kind)

    def add_usage(self, usage: Usage) -> None:
        """Count a model call's prompt tokens: ``input_tokens`` (uncached), ``cache_read_tokens``
        and ``cache_write_tokens``. Output tokens are not prompt tokens and are not counted."""
        for kind, tokens in (
            ("uncached", usage.input_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
        ):
            if tokens > 0:
                self.prompt_tokens.labels(kind=kind).inc(tokens)

    def exposition(self) -> bytes:
        """Every metric in the Prometheus text format."""
        return generate_latest(self.registry)


def http_routes(
    metrics: GatewayMetrics,
    store_ok: StoreCheck,
    *,
    authorized: Callable[[Request], bool],
    health_timeout: float = HEALTH_TIMEOUT,
) -> list[Route]:
    """``GET /healthz`` and ``GET /metrics``.

    ``/healthz`` needs no login: 200 ``ok`` when ``store_ok()`` returns true, else 503 with the
    reason (its error, ``False``, or no answer within ``health_timeout`` seconds). ``/metrics`` is
    the Prometheus text exposition, 401 unless ``authorized(request)``.
    """

    async def healthz(request: Request) -> Response:
        try:
            ok = await asyncio.wait_for(store_ok(), health_timeout)
        except asyncio.TimeoutError:
            return PlainTextResponse(f"store unavailable: no answer within {health_timeout:g}s\n", status_code=503)
        except Exception as exc:  # any failure of the check is the reason to report
            reason = " ".join(mask_secrets(str(exc) or type(exc).__name__).split())
            return PlainTextResponse(f"store unavailable: {reason}\n", status_code=503)
        if not ok:
            return PlainTextResponse("store unavailable: the store check failed\n", status_code=503)
        return PlainTextResponse("ok\n")

    async def metrics_page(request: Request) -> Response:
        if not authorized(request):
            return PlainTextResponse("unauthorized: log in or send the gateway token\n", status_code=401)
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
    ]
