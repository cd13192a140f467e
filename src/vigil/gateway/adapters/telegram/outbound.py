"""Text going to Telegram: split at the platform's limit, and its errors as the outbox's.

Answers go out as plain text (no ``parse_mode``): a model's Markdown is shown as typed
instead of being refused by the API (``can't parse entities``) or rendering a ``<script>``.
Telegram counts a message's length in UTF-16 code units, as this module does.
"""

from __future__ import annotations

import datetime as dt
import warnings

from vigil.gateway.adapters.base import DeliveryError

MAX_MESSAGE = 4096
MAX_CAPTION = 1024
_BREAKS = ("\n\n", "\n", ". ", " ")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _fit(text: str, limit: int) -> int:
    """The longest prefix length (in characters) of ``text`` within ``limit`` UTF-16 units."""
    if utf16_len(text) <= limit:
        return len(text)
    units = 0
    for index, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return index
    return len(text)


def split_text(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """``text`` in pieces of at most ``limit`` UTF-16 units, cut at a paragraph, line, sentence
    or word break where there is one in the second half of a piece. Joined back (each cut
    break kept at the end of its piece) they are ``text``; empty text gives no piece."""
    pieces: list[str] = []
    rest = text
    while rest:
        size = _fit(rest, limit)
        if size == len(rest):
            pieces.append(rest)
            break
        cut = size
        for mark in _BREAKS:
            at = rest.rfind(mark, 0, size - len(mark) + 1)
            if at >= size // 2:
                cut = at + len(mark)
                break
        pieces.append(rest[:cut])
        rest = rest[cut:]
    return pieces


def preview(text: str, limit: int = MAX_MESSAGE) -> str:
    """A streamed answer cut to fit one message (its end replaced by an ellipsis)."""
    if utf16_len(text) <= limit:
        return text
    return text[: _fit(text, limit - 1)] + "…"


def seconds(value: int | float | dt.timedelta) -> float:
    """A ``retry_after`` as python-telegram-bot gives it (int, or timedelta in newer modes)."""
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def delivery_error(exc: Exception, what: str = "send") -> DeliveryError:
    """The outbox's view of a python-telegram-bot error: 429 → retry after ``retry_after``;
    network errors and 5xx → retry later; a refused request (400, 403, a revoked token) →
    failed at once."""
    from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter, TimedOut

    if isinstance(exc, RetryAfter):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            delay = seconds(exc.retry_after)
        return DeliveryError(f"Telegram rate limit on {what}: retry after {delay:g} s", retry_after=delay)
    if isinstance(exc, (BadRequest, Forbidden)):
        return DeliveryError(f"Telegram refused the {what}: {exc}", retryable=False)
    if isinstance(exc, InvalidToken):
        return DeliveryError(f"Telegram refused the bot token on {what}", retryable=False)
    if isinstance(exc, TimedOut):
        return DeliveryError(f"Telegram did not answer the {what} in time")
    if isinstance(exc, NetworkError):
        return DeliveryError(f"Telegram {what} failed: {exc}")
    return DeliveryError(f"Telegram {what} failed: {type(exc).__name__}: {exc}")
