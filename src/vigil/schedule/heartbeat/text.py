"""The text a heartbeat puts into its conversation.

It is an ordinary user-role message: the stored system prompt and the tool list stay exactly
as they are, so the provider's prompt-prefix cache keeps hitting. The first line is the header
that front ends show; the last paragraph keeps the agent from doing busywork and, unless the
heartbeat is ``loud``, asks for exactly :data:`SILENT_ANSWER` when nothing changed: such an
answer is stored like any other (the history stays complete and cache-true) but is not pushed
to the person's platform (:func:`is_silent_answer`).
"""

from __future__ import annotations

import re
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


SILENT_ANSWER = "HEARTBEAT_OK"
"""The whole answer of a heartbeat turn in which nothing changed."""

ASK_FOR_SILENCE = (
    "(This is an automatic heartbeat, not a new message from the user. If nothing meaningful "
    f"has changed since the last heartbeat, answer exactly {SILENT_ANSWER} and nothing else. "
    "Otherwise answer briefly: no busywork, no repeated summaries, no new work nobody asked for.)"
)

_SILENT = re.compile(rf"[\s*_`'\"]*{SILENT_ANSWER}[\s*_`'\".!]*")


def heartbeat_header(interval: int) -> str:
    """``[Heartbeat — recurring instruction, fires every 15m]``."""
    return f"{HEADER_PREFIX}, fires every {format_interval(interval)}]"


def heartbeat_message(heartbeat: Heartbeat) -> str:
    """The user message a fire injects: header, the instruction, the no-busywork note (which
    asks for :data:`SILENT_ANSWER` when nothing changed, unless the heartbeat is loud)."""
    note = NO_BUSYWORK if heartbeat.loud else ASK_FOR_SILENCE
    return f"{heartbeat_header(heartbeat.interval)}\n{heartbeat.prompt}\n\n{note}"


def asks_for_silence(text: str | None) -> bool:
    """Whether an injected heartbeat message asked for :data:`SILENT_ANSWER` (not loud)."""
    return is_heartbeat_message(text) and (text or "").endswith(ASK_FOR_SILENCE)


def is_silent_answer(answer: str | None) -> bool:
    """Whether ``answer`` is :data:`SILENT_ANSWER` (emphasis, quotes and a final full stop
    around it are forgiven; anything else is a real answer)."""
    return bool(answer) and _SILENT.fullmatch(answer or "") is not None


def is_heartbeat_message(text: str | None) -> bool:
    """Whether a stored user message was injected by a heartbeat."""
    return bool(text) and text.startswith(HEADER_PREFIX)  # type: ignore[union-attr]


def format_time(epoch: float, zone: str | None = None, *, seconds: bool = True) -> str:
    """``2026-11-30 14:05:00 CET``: a heartbeat time as people see it, with its zone, like the
    cron lists. ``zone`` is the profile's ``timezone`` setting (``None``: this machine's zone).

    Raises ``OverflowError``, ``ValueError`` or ``OSError`` for a time no date can show."""
    local = datetime.fromtimestamp(epoch, ZoneInfo(zone)) if zone else datetime.fromtimestamp(epoch).astimezone()
    return local.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")
