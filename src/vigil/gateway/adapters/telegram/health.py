"""The Telegram adapter's state as ``vigil gateway status`` shows it, and secrets kept out of logs."""

from __future__ import annotations

import logging
import time

from vigil.gateway.adapters.base import AdapterHealth

CONNECTED = "connected"
RETRYING = "retrying"
MISCONFIGURED = "misconfigured"
STOPPED = "stopped"


class HealthState:
    """The current state, since when, and the last error (kept while retrying)."""

    def __init__(self) -> None:
        self.state = STOPPED
        self.since = time.time()
        self.detail = "not started"
        self.last_error: str | None = None

    def set(self, state: str, detail: str, error: str | None = None) -> None:
        if state != self.state:
            self.state, self.since = state, time.time()
        self.detail = detail
        if error is not None:
            self.last_error = error

    def view(self) -> AdapterHealth:
        return AdapterHealth(self.state == CONNECTED, self.detail, self.state, self.since, self.last_error)


class Redact(logging.Filter):
    """Replaces the bot token in log records (httpx logs request URLs, which carry it)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        message = record.getMessage()
        cleaned = self.scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "<token>")
        return text


class QuietProxyPages(logging.Filter):
    """python-telegram-bot logs a traceback for every non-JSON answer (the HTML page of a 502
    from Telegram's proxy); the adapter reports the failure itself, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Can not load invalid JSON data")


REDACT = Redact()
QUIET = QuietProxyPages()


def install_redaction(token: str) -> None:
    """Keep ``token`` out of the log lines of httpx and python-telegram-bot."""
    REDACT.secrets.add(token)
    for name in ("httpx", "httpcore", "telegram", "telegram.Bot", "telegram.request", "telegram.request.BaseRequest"):
        logger = logging.getLogger(name)
        if REDACT not in logger.filters:
            logger.addFilter(REDACT)
    quiet = logging.getLogger("telegram.request.BaseRequest")
    if QUIET not in quiet.filters:
        quiet.addFilter(QUIET)
