"""Heartbeat intervals: ``90s``, ``10m``, ``2h``, ``1d`` and compounds such as ``1h30m``.

Parsing is strict: every error names the rule that was broken, so the person typing the
command knows what to change.
"""

from __future__ import annotations

import math
import os
import re

MIN_INTERVAL_SECONDS = 60
"""The shortest interval a heartbeat may have."""

MAX_INTERVAL_SECONDS = 365 * 86_400
"""The longest interval a heartbeat may have (365 days): beyond it the next fire time is
far past anything a date can show, and cron is the tool for rare jobs anyway."""

TEST_MINIMUM_ENV = "VIGIL_TEST_HEARTBEAT_MIN_SECONDS"
"""Test-only: lowers the minimum so a pseudo-terminal test can watch a heartbeat fire in
seconds. Never set this in real use. Its companion ``VIGIL_TEST_SCHEDULE_POLL_SECONDS``
(:data:`vigil.schedule.polling.TEST_POLL_ENV`) lowers the schedulers' poll interval and the
heartbeat lease time, so a test can watch a heartbeat move between processes in seconds."""

_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
# [0-9], not \d: \d (and int()) would take Arabic-Indic or full-width digits as well.
_PART = re.compile(r"([0-9]+)([dhms])")
_MAX_DIGITS = 12  # more digits than any interval under the maximum has, in any unit
_COMPOUND = re.compile(r"(?:[0-9]+[dhms])+")
_ASCII_LOWER = str.maketrans("DHMS", "dhms")
_EXAMPLES = "90s, 10m, 2h, 1d or 1h30m"


class IntervalError(ValueError):
    """An interval that breaks a rule; the message says which one."""


def minimum_interval() -> int:
    """The minimum in seconds: 60, unless the test-only environment variable lowers it."""
    raw = os.environ.get(TEST_MINIMUM_ENV)
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            pass
    return MIN_INTERVAL_SECONDS


def parse_interval(text: str, *, minimum: int | None = None, noun: str = "interval") -> int:
    """Seconds in ``text`` (``15m``, ``1h30m`` ...); raises :class:`IntervalError`.

    Units are ``s``, ``m``, ``h`` and ``d``, each used at most once, largest first. The
    result must be at least ``minimum`` seconds (default: :func:`minimum_interval`) and at
    most :data:`MAX_INTERVAL_SECONDS`. ``noun`` is what the messages call the value (a
    heartbeat's ``--for`` is a ``duration``).
    """
    floor = minimum_interval() if minimum is None else minimum
    a_noun = f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"
    raw = text.strip()
    if not raw:
        raise IntervalError(f"missing {noun}: give a number and a unit, e.g. {_EXAMPLES}")
    # Only ASCII letters are case-folded: str.lower() maps e.g. the Kelvin sign to "k".
    lowered = raw.translate(_ASCII_LOWER)
    if any(ch.isdigit() and not ch.isascii() for ch in raw):
        raise IntervalError(f"{_quoted(raw)} is not {a_noun}: write its numbers with the digits 0-9")
    if lowered.startswith("-") and _COMPOUND.fullmatch(lowered[1:]):
        raise IntervalError(f"{_quoted(raw)} is negative: {a_noun} must be at least {_describe(floor)}")
    if not _COMPOUND.fullmatch(lowered):
        raise IntervalError(
            f"{_quoted(raw)} is not {a_noun}: use a number and a unit s, m, h or d ({_EXAMPLES})"
        )
    parts = _PART.findall(lowered)
    units = [unit for _, unit in parts]
    order = list(_UNITS)
    if len(set(units)) != len(units) or units != sorted(units, key=order.index):
        raise IntervalError(
            f"{_quoted(raw)} is not {a_noun}: name each unit once, largest first (e.g. 1h30m)"
        )
    too_long = f"{_quoted(raw)} is too long: the maximum {noun} is {_describe(MAX_INTERVAL_SECONDS)}"
    if any(len(number.lstrip("0")) > _MAX_DIGITS for number, _ in parts):
        raise IntervalError(too_long)
    seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
    if seconds > MAX_INTERVAL_SECONDS:
        raise IntervalError(too_long)
    if seconds == 0:
        raise IntervalError(f"{_quoted(raw)} is zero: {a_noun} must be at least {_describe(floor)}")
    if seconds < floor:
        raise IntervalError(f"{_quoted(raw)} is too short: the minimum {noun} is {_describe(floor)}")
    return seconds


def format_interval(seconds: int | float) -> str:
    """The compact form of a number of seconds: ``15m``, ``1h30m``, ``1d``, ``90s`` → ``1m30s``."""
    if not math.isfinite(seconds):
        return "?"
    remaining = int(seconds)
    if remaining <= 0:
        return "0s"
    out = []
    for unit, size in _UNITS.items():
        count, remaining = divmod(remaining, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)


def _quoted(raw: str, width: int = 24) -> str:
    return f"'{raw}'" if len(raw) <= width else f"'{raw[: width - 1]}…'"


def _describe(seconds: int) -> str:
    if seconds % 86_400 == 0:
        return f"{seconds // 86_400} days ({format_interval(seconds)})"
    if seconds % 60 == 0:
        return f"{seconds} seconds ({format_interval(seconds)})"
    return f"{seconds} seconds"
