"""Cron schedules: what a job's ``--schedule`` text means and when it next occurs.

Four kinds:

* ``every 2h`` — a recurring interval, measured in real elapsed time from an anchor (the time the
  schedule was set), so daylight-saving changes never shift or double it;
* ``0 9 * * 1-5`` — a 5-field cron expression (also ``@hourly``, ``@daily`` ...), evaluated by
  ``cronsim`` in the job's time zone;
* ``30m`` — a one-shot delay from the time the schedule was set;
* ``2026-05-01T09:00`` — a one-shot ISO 8601 timestamp (without an offset: in the job's zone).

Instants are epoch seconds (UTC). Occurrences fall on whole seconds; the times they are
compared with (claims, failures, back-off ends) need not, so every bound below is exact for a
fractional argument. ``next_after`` is strictly increasing in UTC whatever the zone does: a
wall-clock time that happens twice on a fall-back day runs once, and one that does not exist on
a spring-forward day runs at the first valid minute after it.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from vigil.schedule.cron.errors import ScheduleError
from vigil.schedule.intervals import IntervalError, format_interval, parse_interval

Kind = Literal["interval", "cron", "once"]

MIN_EVERY_SECONDS = 60
"""The shortest ``every`` interval."""
GRACE_MIN = 120.0
GRACE_MAX = 7200.0
"""The default grace (half the period) is clamped to this range."""

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# ASCII only: \d and Unicode case folding would take '١٥m' or '15ſ' for a delay.
_DURATION = re.compile(r"(?:[0-9]+[dhms])+", re.IGNORECASE | re.ASCII)
_QUOTE_WIDTH = 40
_FORMS = (
    "use 'every 2h' (an interval), a 5-field cron expression such as '0 9 * * 1-5', "
    "a delay such as '30m' (runs once), or an ISO 8601 time such as '2026-05-01T09:00'"
)
LATEST_INSTANT = datetime(9999, 1, 1, tzinfo=timezone.utc).timestamp()
"""One-shot times must lie before this, so that every zone can still show them as a date."""
# Counting occurrences of a long outage stops here; the count is only reported.
_COUNT_CAP = 10_000


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule, bound to a zone and (for intervals and one-shots) to a start time.

    ``text`` is the normalised form the user typed; ``anchor`` is the interval's origin;
    ``at`` the one-shot's instant; ``expr`` the 5-field cron expression.
    """

    kind: Kind
    text: str
    tz: str
    seconds: int | None = None
    expr: str | None = None
    anchor: float | None = None
    at: float | None = None

    @property
    def recurring(self) -> bool:
        return self.kind != "once"

    def next_after(self, t: float) -> float | None:
        """The first occurrence strictly after ``t``, or ``None`` when there is none."""
        if self.kind == "once":
            assert self.at is not None
            return self.at if self.at > t else None
        if self.kind == "interval":
            assert self.anchor is not None and self.seconds
            steps = math.floor((t - self.anchor) / self.seconds) + 1
            return self.anchor + max(steps, 1) * self.seconds
        return _cron_next(self._expr, self.zone, t)

    def first_at_or_after(self, t: float) -> float | None:
        """The first occurrence at ``t`` or later (``t`` may be fractional)."""
        if self.kind == "once":
            assert self.at is not None
            return self.at if self.at >= t else None
        if self.kind == "interval":
            assert self.anchor is not None and self.seconds
            steps = math.ceil((t - self.anchor) / self.seconds)
            return self.anchor + max(steps, 1) * self.seconds
        # Cron occurrences fall on whole seconds, so the first one at or after ``t`` is the
        # first one after the whole second just below ``ceil(t)``; ``t - 1`` would round a
        # fractional ``t`` down onto an occurrence before it.
        return self.next_after(math.ceil(t) - 1)

    def latest_at_or_before(self, t: float, *, not_before: float) -> float | None:
        """The last occurrence in ``[not_before, t]``, or ``None`` when there is none."""
        if self.kind == "once":
            assert self.at is not None
            return self.at if not_before <= self.at <= t else None
        if self.kind == "interval":
            assert self.anchor is not None and self.seconds
            steps = math.floor((t - self.anchor) / self.seconds)
            found = self.anchor + steps * self.seconds
            return found if steps >= 1 and found >= not_before else None
        candidate = _cron_previous(self._expr, self.zone, t)
        # Checked forward because reverse iteration around DST changes is the fragile part:
        # the answer must be an occurrence whose successor lies after ``t``.
        if candidate is None or candidate < not_before:
            candidate = self.first_at_or_after(not_before)
            if candidate is None or candidate > t:
                return None
        following = self.next_after(candidate)
        while following is not None and following <= t:
            candidate, following = following, self.next_after(following)
        return candidate

    def count_between(self, start: float, end: float) -> int:
        """How many occurrences lie in ``[start, end]`` (capped at a large number)."""
        if end < start:
            return 0
        if self.kind == "once":
            assert self.at is not None
            return int(start <= self.at <= end)
        if self.kind == "interval":
            assert self.seconds
            first = self.first_at_or_after(start)
            return 0 if first is None or first > end else int((end - first) // self.seconds) + 1
        count, current = 0, self.first_at_or_after(start)
        while current is not None and current <= end and count < _COUNT_CAP:
            count, current = count + 1, self.next_after(current)
        return count

    def period_at(self, occurrence: float, created_at: float) -> float:
        """The length of the period an occurrence belongs to (what the default grace halves)."""
        if self.kind == "interval":
            assert self.seconds
            return float(self.seconds)
        if self.kind == "once":
            return max(0.0, occurrence - created_at)
        following = self.next_after(occurrence)
        return float(following - occurrence) if following is not None else GRACE_MAX * 2

    def default_grace(self, occurrence: float, created_at: float) -> float:
        """Half the period, clamped to ``GRACE_MIN`` .. ``GRACE_MAX``."""
        half = self.period_at(occurrence, created_at) / 2
        return min(GRACE_MAX, max(GRACE_MIN, half))

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    @property
    def _expr(self) -> str:
        assert self.expr is not None
        return self.expr

    def describe(self) -> str:
        """A short human description: ``every 2h``, ``cron 0 9 * * 1-5 (Europe/Berlin)`` ..."""
        if self.kind == "interval":
            return f"every {format_interval(self.seconds or 0)}"
        if self.kind == "cron":
            return f"cron {self.text} ({self.tz})"
        assert self.at is not None
        return f"once at {format_instant(self.at, self.tz)}"

    # -- storage ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "tz": self.tz,
            "seconds": self.seconds,
            "expr": self.expr,
            "anchor": self.anchor,
            "at": self.at,
        }

    @classmethod
    def from_json(cls, data: Any) -> "Schedule":
        if not isinstance(data, dict) or data.get("kind") not in ("interval", "cron", "once"):
            raise ScheduleError("damaged schedule record")
        return cls(
            kind=data["kind"],
            text=str(data["text"]),
            tz=str(data["tz"]),
            seconds=data.get("seconds"),
            expr=data.get("expr"),
            anchor=data.get("anchor"),
            at=data.get("at"),
        )


# -- parsing -------------------------------------------------------------------------------
def parse_schedule(text: str, *, tz: str, now: float) -> Schedule:
    """Parse ``text`` for a job in zone ``tz`` whose schedule is set at ``now``.

    Raises :class:`ScheduleError` with a message naming the accepted forms.
    """
    zone = resolve_zone(tz)
    raw = " ".join(text.split())
    start = float(math.floor(now))
    if not raw:
        raise ScheduleError(f"the schedule is empty: {_FORMS}")
    lowered = raw.lower()
    if lowered == "every" or lowered.startswith("every "):
        amount = raw[5:].strip()
        try:
            seconds = parse_interval(amount, minimum=MIN_EVERY_SECONDS)
        except IntervalError as exc:
            raise ScheduleError(f"invalid schedule {_quoted(raw)}: {exc}") from None
        return Schedule("interval", f"every {amount}", tz, seconds=seconds, anchor=start)
    if _DURATION.fullmatch(lowered):
        try:
            seconds = parse_interval(lowered, minimum=1)
        except IntervalError as exc:
            raise ScheduleError(f"invalid schedule {_quoted(raw)}: {exc}") from None
        return Schedule("once", raw, tz, seconds=seconds, at=start + seconds)
    expr = _ALIASES.get(lowered, raw)
    if lowered.startswith("@") and lowered not in _ALIASES:
        raise ScheduleError(f"unknown schedule alias {_quoted(raw)} (known: {', '.join(_ALIASES)})")
    if len(expr.split()) == 5:
        return _parse_cron(raw, expr, tz, zone, start)
    at = _parse_timestamp(raw, zone)
    if at is None:
        raise ScheduleError(f"invalid schedule {_quoted(raw)}: {_FORMS}")
    if at <= now:
        raise ScheduleError(f"the time {_quoted(raw)} is in the past{_shown_instant(at, tz)}; give a future time")
    if at >= LATEST_INSTANT:
        raise ScheduleError(f"the time {_quoted(raw)} is too far ahead: give a time before the year 9999")
    return Schedule("once", raw, tz, at=at)


def _shown_instant(epoch: float, tz: str) -> str:
    shown = format_instant(epoch, tz)
    return "" if shown.startswith("at an impossible time") else f" ({shown})"


def _quoted(text: str) -> str:
    """``text`` quoted for an error message, cut so that a huge value keeps it one short line."""
    line = " ".join(text.split())
    return f"'{line}'" if len(line) <= _QUOTE_WIDTH else f"'{line[: _QUOTE_WIDTH - 1]}…'"


def _parse_cron(raw: str, expr: str, tz: str, zone: ZoneInfo, start: float) -> Schedule:
    try:
        CronSim(expr, datetime.fromtimestamp(start, zone))
    except CronSimError as exc:
        raise ScheduleError(f"invalid cron expression {_quoted(raw)}: {exc}") from None
    schedule = Schedule("cron", raw, tz, expr=expr)
    if schedule.next_after(start) is None:
        raise ScheduleError(f"the cron expression {_quoted(raw)} never matches a date")
    return schedule


def _parse_timestamp(raw: str, zone: ZoneInfo) -> float | None:
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    try:
        return float(math.floor(when.timestamp()))
    except (OverflowError, ValueError, OSError):  # an offset that pushes it past year 1 or 9999
        return None


def parse_duration(text: str, *, what: str = "duration") -> int:
    """Seconds in a duration such as ``10m`` or ``1h30m`` (``0`` allowed); ``ScheduleError``."""
    raw = text.strip().lower()
    if raw in ("0", "0s", "0m", "0h"):
        return 0
    try:
        return parse_interval(raw, minimum=1)
    except IntervalError as exc:
        raise ScheduleError(f"invalid {what} {_quoted(text)}: {exc}") from None


# -- time zones ----------------------------------------------------------------------------
def resolve_zone(name: str) -> ZoneInfo:
    """The zone called ``name``; ``ScheduleError`` for an unknown name."""
    try:
        if not name or name.strip() != name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"unknown time zone {_quoted(name)} (use an IANA name such as Europe/Berlin, "
            "America/New_York or UTC)"
        ) from None


def system_zone_name() -> str:
    """The machine's IANA zone name (``TZ``, ``/etc/localtime``, ``/etc/timezone``), else UTC."""
    candidates: list[str] = []
    env = os.environ.get("TZ", "").lstrip(":")
    if env:
        candidates.append(env)
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    try:
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    except OSError:
        pass
    for candidate in candidates:
        try:
            resolve_zone(candidate)
            return candidate
        except ScheduleError:
            continue
    return "UTC"


def default_zone(configured: str | None) -> str:
    """The zone for a job that names none: the profile's ``timezone`` setting, else the system's."""
    return configured or system_zone_name()


def format_instant(epoch: float | None, tz: str, *, seconds: bool = False) -> str:
    """``2026-03-29 03:00 CEST`` in zone ``tz`` (``-`` for ``None``)."""
    if epoch is None:
        return "-"
    try:
        local = datetime.fromtimestamp(epoch, ZoneInfo(tz))
    except (OverflowError, ValueError, OSError):  # a record from before times were bounded
        return f"at an impossible time ({epoch!r} s since 1970)"
    return local.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")


def iso_utc(epoch: float) -> str:
    """``2026-03-29T01:00:00Z``."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- cron expression evaluation ------------------------------------------------------------
# Pure functions of their arguments (a ZoneInfo is one cached object per zone), cached: jobs
# sharing an expression come due together, and a burst of claims asks the same questions.
@functools.lru_cache(maxsize=4096)
def _cron_next(expr: str, zone: ZoneInfo, t: float) -> float | None:
    # cronsim's wall-clock handling (the Debian cron rules for fixed-time jobs) can hand back
    # an instant at or before ``t`` when ``t`` lies in the repeated hour of a fall-back day;
    # skipping those is what keeps a run from happening twice.
    start = datetime.fromtimestamp(math.floor(t), zone)
    try:
        for found in CronSim(expr, start):
            instant = float(found.timestamp())
            if instant > t:
                return instant
    except CronSimError:
        return None
    return None


@functools.lru_cache(maxsize=4096)
def _cron_previous(expr: str, zone: ZoneInfo, t: float) -> float | None:
    start = datetime.fromtimestamp(math.floor(t) + 1, zone)
    try:
        for found in CronSim(expr, start, reverse=True):
            instant = float(found.timestamp())
            if instant <= t:
                return instant
    except CronSimError:
        return None
    return None
