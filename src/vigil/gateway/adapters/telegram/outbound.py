"""Text going to Telegram: split at its limit (:mod:`vigil.gateway.adapters.splitting`), and its
errors as the outbox's.

Answers go out as plain text (no ``parse_mode``): a model's Markdown is shown as typed
instead of being refused by the API (``can't parse entities``) or rendering a ``<script>``.
Telegram counts a message's length in UTF-16 code units, as this module does.
"""

from __future__ import annotations

import datetime as dt
import warnings

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.splitting import clip, utf16_units
from vigil.gateway.adapters.splitting import split_text as split
from vigil.platforms.telegram import TELEGRAM

MAX_MESSAGE = TELEGRAM.capabilities.max_message_chars or 4096
MAX_CAPTION = 1024
utf16_len = utf16_units


def split_text(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """``text`` in messages of at most ``limit`` UTF-16 units (:func:`~vigil.gateway.adapters.splitting.split_text`:
    cut at a paragraph, line, sentence or word break); joined back they are ``text``."""
    return split(text, limit, measure=utf16_units)


def preview(text: str, limit: int = MAX_MESSAGE) -> str:
    """A text cut to fit one message (its end replaced by an ellipsis)."""
    return clip(text, limit, measure=utf16_units)


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
