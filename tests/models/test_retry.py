"""The shared retry loop and the HTTP-status translation."""

from __future__ import annotations

import email.utils
import time

import pytest

from vigil.models.base import ModelAuthError, ModelBadRequest, ModelError, ModelRateLimited, ModelUnreachable
from vigil.models.retry import (
    Endpoint,
    Retryable,
    RetryPolicy,
    call_with_retries,
    parse_retry_after,
    provider_message,
    status_failure,
)

ENDPOINT = Endpoint(url="http://127.0.0.1:9/v1", key_source="the environment variable OPENAI_API_KEY")


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=lambda: 0.0)
    assert [policy.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 2.5, 2.5]
    high = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=lambda: 0.999)
    assert 0.99 < high.delay(0) < 1.0


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(max_retry_after=10.0)
    assert policy.delay(0, retry_after=3.0) == 3.0
    assert policy.delay(0, retry_after=999.0) == 10.0


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (parse_retry_after({"retry-after": date}) or 0) <= 31


async def test_retries_until_success_and_sleeps_between() -> None:
    sleeps = Sleeps()
    outcomes: list[object] = [
        Retryable(ModelRateLimited("slow down"), 1.25),
        Retryable(ModelError("500")),
        "done",
    ]

    async def attempt() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    policy = RetryPolicy(max_retries=3, base_delay=0.1, sleep=sleeps, jitter=lambda: 1.0)
    assert await call_with_retries(attempt, policy) == "done"
    assert sleeps.calls == [1.25, pytest.approx(0.2)]


async def test_gives_up_with_the_last_error_and_the_attempt_count() -> None:
    sleeps = Sleeps()
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise Retryable(ModelUnreachable("cannot reach http://x"))

    with pytest.raises(ModelUnreachable, match=r"cannot reach http://x \(gave up after 3 attempts\)"):
        await call_with_retries(attempt, RetryPolicy(max_retries=2, sleep=sleeps))
    assert calls == 3 and len(sleeps.calls) == 2


async def test_non_retryable_errors_pass_straight_through() -> None:
    sleeps = Sleeps()

    async def attempt() -> None:
        raise ModelBadRequest("no such model")

    with pytest.raises(ModelBadRequest):
        await call_with_retries(attempt, RetryPolicy(max_retries=5, sleep=sleeps))
    assert sleeps.calls == []


def test_status_translation() -> None:
    auth = status_failure(401, "invalid key", {}, ENDPOINT)
    assert isinstance(auth, ModelAuthError)
    assert "http://127.0.0.1:9/v1" in str(auth) and "OPENAI_API_KEY" in str(auth)
    assert isinstance(status_failure(403, "no", {}, ENDPOINT), ModelAuthError)
    for status in (400, 404, 422):
        bad = status_failure(status, "model 'x' not found", {}, ENDPOINT)
        assert isinstance(bad, ModelBadRequest) and "model 'x' not found" in str(bad)
    limited = status_failure(429, "slow", {"retry-after": "4"}, ENDPOINT)
    assert isinstance(limited, Retryable) and isinstance(limited.error, ModelRateLimited)
    assert limited.retry_after == 4.0
    for status in (500, 502, 503, 529):
        assert isinstance(status_failure(status, "boom", {}, ENDPOINT), Retryable)
    assert type(status_failure(418, "teapot", {}, ENDPOINT)) is ModelError


def test_provider_message_shapes() -> None:
    assert provider_message({"message": "inner"}, "fb") == "inner"
    anthropic_shape = {"type": "error", "error": {"type": "x", "message": "anthropic"}}
    assert provider_message(anthropic_shape, "fb") == "anthropic"
    assert provider_message("plain text", "fb") == "plain text"
    assert provider_message(None, "fb") == "fb"
