"""The bot token kept out of logs, and python-telegram-bot's tracebacks for a proxy's error pages."""

from __future__ import annotations

import logging


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
