"""Retry with back-off, and the provider-neutral translation of HTTP failures into ``ModelError``.

Both clients switch their SDK's own retries off and run every call through ``call_with_retries``,
so the retry behaviour is the same for every provider and a test can drive it with a fake sleep.
:class:`RetryPolicy` applies vigil's one back-off formula (:mod:`vigil.backoff`) with the
provider's ``Retry-After``: the gateway's patient turns and its outbox use it too. An error ``call_with_retries`` gives up on after retryable failures is marked so
(:func:`is_transient`, :func:`retry_after_of`): a caller with more patience may wait and ask again.
"""

from __future__ import annotations

import asyncio
import json
import email.utils
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, TypeVar

from vigil.backoff import Backoff
from vigil.masking import mask_secrets
from vigil.models.base import (
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelMalformedResponse,
    ModelRateLimited,
    ModelUnreachable,
)

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Besides every 5xx: request timeout, conflict (a lock on the provider's side) and rate limits."""

BAD_REQUEST_STATUSES = frozenset({400, 404, 413, 422})

SNIPPET_LENGTH = 160
"""How much of a malformed answer an error message quotes."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failed call is retried.

    Attempt ``n`` (0-based) that fails retryably waits ``min(max_delay, base_delay * 2**n)``
    scaled by a random factor in ``[0.5, 1.0)``, unless the provider sent ``Retry-After``, which
    is honoured up to ``max_retry_after`` seconds.
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    sleep: Sleep = asyncio.sleep
    jitter: Callable[[], float] = field(default=random.random)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the failed attempt number ``attempt`` (0-based)."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_after))
        return Backoff(self.base_delay, self.max_delay, self.jitter).delay(attempt)


class Retryable(Exception):
    """Raised by one attempt when trying again may help; ``error`` is what to raise when giving up."""

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


async def call_with_retries(attempt: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """Run ``attempt`` until it returns, raises a non-``Retryable`` error, or retries run out.

    Giving up raises the last ``Retryable.error`` with the number of attempts appended, marked
    transient (:func:`is_transient`) with the provider's last ``Retry-After`` (:func:`retry_after_of`).
    """
    for number in range(policy.max_retries + 1):
        try:
            return await attempt()
        except Retryable as failure:
            if number >= policy.max_retries:
                error = failure.error
                if number:
                    error.args = (f"{error.args[0]} (gave up after {number + 1} attempts)", *error.args[1:])
                setattr(error, _TRANSIENT, True)
                setattr(error, _RETRY_AFTER, failure.retry_after)
                raise error from failure.__cause__
            await policy.sleep(policy.delay(number, failure.retry_after))
    raise AssertionError("unreachable")  # pragma: no cover


_TRANSIENT = "vigil_transient"
_RETRY_AFTER = "vigil_retry_after"
_STATUS = "vigil_status"
_DETAIL = "vigil_detail"


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure that asking again later may cure (a refused or timed-out
    connection, 5xx, 429, an answer that broke off), as ``call_with_retries`` gave up on it."""
    return bool(getattr(exc, _TRANSIENT, False))


def retry_after_of(exc: BaseException) -> float | None:
    """The seconds the provider asked to wait before the next try, if it said."""
    value = getattr(exc, _RETRY_AFTER, None)
    return value if isinstance(value, (int, float)) else None


def http_status_of(exc: BaseException) -> tuple[int | None, str | None]:
    """The HTTP status of an error the endpoint answered with, and the provider's own message
    (``(None, None)`` for any other error)."""
    status, detail = getattr(exc, _STATUS, None), getattr(exc, _DETAIL, None)
    return (status if isinstance(status, int) else None), (detail if isinstance(detail, str) else None)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What an error message may say about where a call went (never the key itself)."""

    url: str
    key_source: str
    """Where the API key came from, e.g. ``environment variable OPENAI_API_KEY``."""


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def provider_message(body: object, fallback: str) -> str:
    """The human-readable message inside an error body (OpenAI and Anthropic shapes alike)."""
    node: Any = body
    if isinstance(node, Mapping) and isinstance(node.get("error"), Mapping):
        node = node["error"]
    if isinstance(node, Mapping) and isinstance(node.get("message"), str) and node["message"]:
        return node["message"]
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return fallback


def status_failure(
    status: int,
    message: str,
    headers: Mapping[str, str] | None,
    endpoint: Endpoint,
) -> Exception:
    """The ``ModelError`` (or ``Retryable``) for an HTTP error status from ``endpoint``."""
    message = mask_secrets(message)  # a server may echo the URL it was called with
    failure = _status_failure(status, message, headers, endpoint)
    error = failure.error if isinstance(failure, Retryable) else failure
    setattr(error, _STATUS, status)
    setattr(error, _DETAIL, message)
    return failure


def _status_failure(status: int, message: str, headers: Mapping[str, str] | None, endpoint: Endpoint) -> Exception:
    where = endpoint.url
    if status in (401, 403):
        verb = "rejected the API key" if status == 401 else "refused access with this API key"
        return ModelAuthError(
            f"the model endpoint {where} {verb} (HTTP {status}: {message}); "
            f"the key comes from {endpoint.key_source} — check it, or point model.api_key_env "
            "at the variable holding the right key"
        )
    if status in BAD_REQUEST_STATUSES:
        return ModelBadRequest(f"the model endpoint {where} refused the request (HTTP {status}): {message}")
    if status == 429:
        return Retryable(
            ModelRateLimited(f"the model endpoint {where} is rate limiting us (HTTP 429): {message}"),
            parse_retry_after(headers),
        )
    if status >= 500 or status in RETRYABLE_STATUSES:
        return Retryable(
            ModelError(f"the model endpoint {where} failed (HTTP {status}): {message}"),
            parse_retry_after(headers),
        )
    return ModelError(f"the model endpoint {where} answered HTTP {status}: {message}")


def malformed_response(endpoint: Endpoint, api: str, detail: str) -> Retryable:
    """A ``Retryable`` wrapping ``ModelMalformedResponse``: the endpoint answered with something
    that is not an ``api`` response (``api``: "OpenAI-compatible", "Anthropic Messages API").

    Retried like a 5xx: a proxy or a server in trouble may answer properly next time; a wrong
    ``model.base_url`` fails every attempt, and the message then says what came back.
    """
    return Retryable(
        ModelMalformedResponse(
            f"the endpoint {endpoint.url} answered with something that is not an {api} response: "
            f"{mask_secrets(detail)} (check model.base_url)"
        )
    )


def snippet(value: object, limit: int = SNIPPET_LENGTH) -> str:
    """``value`` (text or bytes) on one line, quoted and cut to about ``limit`` characters."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    text = " ".join(str(value).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return repr(text)


def dumped(value: Any) -> str:
    """A parsed answer (an SDK object or plain data), quoted for an error message."""
    try:
        text = value.model_dump_json() if hasattr(value, "model_dump_json") else json.dumps(value)
    except Exception:  # a half-built SDK object; its repr still says something
        text = repr(value)
    return snippet(text)


def connection_failure(
    exc: BaseException, endpoint: Endpoint, *, timed_out: bool, timeout: float
) -> Retryable:
    """A ``Retryable`` wrapping ``ModelUnreachable`` for a refused, unresolvable or timed-out connection."""
    if timed_out:
        reason = f"no answer within {timeout:g}s"
    else:
        reason = mask_secrets(describe_cause(exc))  # an SDK may quote the URL it called
    return Retryable(ModelUnreachable(f"cannot reach the model endpoint {endpoint.url}: {reason}"))


def describe_cause(exc: BaseException) -> str:
    """The most specific message in an exception chain (the SDKs wrap the socket error)."""
    detail = ""
    node: BaseException | None = exc
    while node is not None:
        text = str(node).strip()
        if text:
            detail = text
        node = node.__cause__ or node.__context__
    return detail or type(exc).__name__
