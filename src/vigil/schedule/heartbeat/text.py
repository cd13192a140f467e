"""The text a heartbeat puts into its conversation.

It is an ordinary user-role message: the stored system prompt and the tool list stay exactly
as they are, so the provider's prompt-prefix cache keeps hitting. The first line is the header
that front ends show; the last paragraph keeps the agent from doing busywork.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from vigil.schedule.heartbeat.record import Heartbeat
from vigil.schedule.intervals import format_interval

HEADER_PREFIX = "[Heartbeat — recurring instruction"

NO_BUSYWORK = (
    "(This is an automatic heartbeat, not a new message from the user. Answer briefly. "
    "If nothing meaningful has changed since the last heartbeat, say so in one short line "
    "and stop at once: no busywork, no repeated summaries, no new work nobody asked for.)"
)


def heartbeat_header(interval: int) -> str:
    """``[Heartbeat — recurring instruction, fires every 15m]``."""
    return f"{HEADER_PREFIX}, fires every {format_interval(interval)}]"


def heartbeat_message(heartbeat: Heartbeat) -> str:
    """The user message a fire injects: header, the instruction, the no-busywork note."""
    return f"{heartbeat_header(heartbeat.interval)}\n{heartbeat.prompt}\n\n{NO_BUSYWORK}"


def is_heartbeat_message(text: str | None) -> bool:
    """Whether a stored user message was injected by a heartbeat."""
    return bool(text) and text.startswith(HEADER_PREFIX)  # type: ignore[union-attr]


def format_time(epoch: float, zone: str | None = None, *, seconds: bool = True) -> str:
    """``2026-11-30 14:05:00 CET``: a heartbeat time as people see it, with its zone, like the
    cron lists. ``zone`` is the profile's ``timezone`` setting (``None``: this machine's zone).

    Raises ``OverflowError``, ``ValueError`` or ``OSError`` for a time no date can show."""
    local = datetime.fromtimestamp(epoch, ZoneInfo(zone)) if zone else datetime.fromtimestamp(epoch).astimezone()
    return local.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")
