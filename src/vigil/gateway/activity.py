"""What the gateway says as it works: one line per event, on stdout and in ``logs/gateway.log``.

Every cron run gets a line when it starts and one when it ends (status and duration). The
same lines, time-stamped with their zone, go to the profile's ``logs/gateway.log``, rotated by
size and private to the user (run lines name jobs and quote errors).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Awaitable, Callable

from vigil.clock import Clock
from vigil.schedule.cron.format import run_status
from vigil.schedule.cron.repo import Claim
from vigil.schedule.cron.runs import MANUAL, RunRecord
from vigil.schedule.cron.schedule import format_instant

LOG_NAME = "gateway.log"
MAX_BYTES = 5 * 1024 * 1024
"""Rotate ``gateway.log`` past this size ..."""
BACKUPS = 3
"""... keeping this many older files (``gateway.log.1`` .. ``.3``)."""

Execute = Callable[[Claim], Awaitable[RunRecord | None]]


class _PrivateRotatingFileHandler(RotatingFileHandler):
    """A RotatingFileHandler whose files (the first and every one after a rotation) are 0600,
    and which says in one line on stderr that it cannot write (a full disk), not a traceback
    per line: once, and again only after a line was written in between."""

    failing = False
    _failed = False

    def _open(self):  # type: ignore[no-untyped-def]
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)  # a file left by an older version may be wider
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)  # calls handleError itself when writing fails
        if not self._failed:
            self.failing = False

    def handleError(self, record: logging.LogRecord) -> None:
        self._failed = True
        if self.failing:
            return
        self.failing = True
        reason = sys.exc_info()[1]
        print(f"vigil gateway: cannot write {self.baseFilename} ({reason}); lines may be missing from it "
              "until it can be written again", file=sys.stderr, flush=True)


class GatewayActivity:
    """Announces gateway events to ``announce`` (stdout) and to the rotated log file."""

    def __init__(
        self,
        announce: Callable[[str], None],
        log_path: Path,
        *,
        clock: Clock,
        zone: str,
        max_bytes: int = MAX_BYTES,
        backups: int = BACKUPS,
    ) -> None:
        self.announce = announce
        self.clock = clock
        self.zone = zone
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._handler = _PrivateRotatingFileHandler(
            log_path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def say(self, text: str) -> None:
        """One line, time-stamped with its zone, to stdout and to the log file."""
        line = f"{format_instant(self.clock.now(), self.zone, seconds=True)} {text}"
        self.announce(line)
        # Straight to the handler, not through a logger: these lines are the gateway's report,
        # not diagnostics, and must not depend on how the root logger is configured.
        self._handler.handle(logging.makeLogRecord({"msg": line, "levelno": logging.INFO, "levelname": "INFO"}))

    def record(self, text: str) -> None:
        """``text`` (several lines, such as a traceback) in the log file only."""
        self._handler.handle(logging.makeLogRecord({"msg": text, "levelno": logging.ERROR, "levelname": "ERROR"}))

    def failure(self, summary: str, details: str) -> None:
        """An error: ``summary`` said as one line, ``details`` (a traceback) in the log file only."""
        self.say(summary)
        if details:
            self.record(details)

    def close(self) -> None:
        self._handler.close()

    def cron_runs(self, execute: Execute) -> Execute:
        """``execute`` with a line when each run starts and one when it ends."""

        async def logged(claim: Claim) -> RunRecord | None:
            job = claim.job
            if claim.running.kind == MANUAL:
                what = "run by hand"
            else:
                what = f"scheduled for {format_instant(claim.running.occurrence, job.schedule.tz)}"
            self.say(f"cron run started: {job.name} ({what})")
            started = time.monotonic()
            try:
                record = await execute(claim)
            except BaseException:
                self.say(f"cron run ended: {job.name} — stopped after {_took(started)}")
                raise
            if record is None:
                self.say(f"cron run given back: {job.name} (not started; it stays due)")
                return record
            line = f"cron run ended: {job.name} — {run_status(record)} in {_took(started)}"
            if record.session_id:
                line += f", session {record.session_id}"
            if record.error:
                line += f": {record.error.splitlines()[0]}"
            self.say(line)
            return record

        return logged


def _took(started: float) -> str:
    return f"{time.monotonic() - started:.1f}s"
