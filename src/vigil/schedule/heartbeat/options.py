"""The options a heartbeat may be set with: a quiet window, an end, and ``--loud``.

``--quiet HH:MM-HH:MM`` is a daily window in the profile's time zone (it may cross midnight,
``22:00-07:00``) in which the heartbeat does not fire: a slot that comes due inside it fires
once when the window ends. ``--for DURATION`` and ``--until DATE`` end the heartbeat by
itself. ``--loud`` delivers every answer, ``HEARTBEAT_OK`` included.

Parsing is strict and every error names the rule that was broken; nothing here touches the
store, so a refused option changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

from vigil.schedule.intervals import (
    MAX_INTERVAL_SECONDS,
    IntervalError,
    format_interval,
    minimum_interval,
    parse_interval,
)

MAX_AHEAD_SECONDS = MAX_INTERVAL_SECONDS
"""How far ahead a heartbeat's end may lie (365 days), by ``--for`` or ``--until``."""

QUIET_EXAMPLE = "22:00-07:00"
UNTIL_EXAMPLES = "2026-12-24, '2026-12-24 18:00' or 2026-12-24T18:00+01:00"
_QUIET = re.compile(r"([0-9]{1,2}):([0-9]{2})-([0-9]{1,2}):([0-9]{2})")
_MAX_UNTIL_CHARS = 40


class OptionError(ValueError):
    """A heartbeat option that breaks a rule; the message says which one."""


@dataclass(frozen=True, slots=True)
class QuietWindow:
    """A daily window, ``start`` to ``end`` in minutes after local midnight (``end`` may be
    smaller than ``start``: the window crosses midnight). Never empty."""

    start: int
    end: int

    @classmethod
    def parse(cls, text: str) -> "QuietWindow":
        """``22:00-07:00`` → ``QuietWindow(1320, 420)``; raises :class:`OptionError`."""
        raw = text.strip()
        shown = _quoted(raw)
        if not raw:
            raise OptionError(f"missing quiet window: give two times of day, e.g. --quiet {QUIET_EXAMPLE}")
        # Phones turn "-" into a dash as it is typed: "22:00–07:00" means the same.
        match = _QUIET.fullmatch(raw.replace(" ", "").replace("–", "-").replace("—", "-"))
        if match is None or not raw.replace("–", "-").replace("—", "-").isascii():
            raise OptionError(
                f"--quiet {shown} is not a quiet window: write HH:MM-HH:MM with the digits 0-9, "
                f"e.g. {QUIET_EXAMPLE}"
            )
        sh, sm, eh, em = (int(part) for part in match.groups())
        for hour, minute in ((sh, sm), (eh, em)):
            if hour > 23 or minute > 59:
                raise OptionError(
                    f"--quiet {shown} has an impossible time {hour:02d}:{minute:02d}: hours are 00-23 "
                    "and minutes 00-59 (midnight is 00:00)"
                )
        start, end = sh * 60 + sm, eh * 60 + em
        if start == end:
            raise OptionError(f"--quiet {shown} starts and ends at the same time: a quiet window cannot be empty")
        return cls(start, end)

    @classmethod
    def from_text(cls, text: str) -> "QuietWindow":
        """A stored window (as :meth:`__str__` wrote it); ``ValueError`` when damaged."""
        try:
            return cls.parse(text)
        except OptionError as exc:
            raise ValueError(str(exc)) from None

    def __str__(self) -> str:
        return f"{_hhmm(self.start)}-{_hhmm(self.end)}"

    def contains(self, epoch: float, zone: str | None) -> bool:
        """Whether ``epoch`` falls inside the window, read in ``zone`` (``None``: the machine's)."""
        return self._minute(epoch, zone) is not None

    def release(self, epoch: float, zone: str | None) -> float:
        """``epoch`` itself when outside the window, else the moment the window ends."""
        inside = self._minute(epoch, zone)
        if inside is None:
            return epoch
        local = _local(epoch, zone)
        day = local.date() if inside < self.end else local.date() + timedelta(days=1)
        end = _at(day, self.end, local.tzinfo)
        # A DST change can make the local end land at or before ``epoch``; never go back.
        return end if end > epoch else epoch + 60.0

    def _minute(self, epoch: float, zone: str | None) -> float | None:
        local = _local(epoch, zone)
        minute = local.hour * 60 + local.minute + local.second / 60
        if self.start < self.end:
            return minute if self.start <= minute < self.end else None
        return minute if minute >= self.start or minute < self.end else None


@dataclass(frozen=True, slots=True)
class HeartbeatOptions:
    """What ``--quiet``, ``--for``/``--until`` and ``--loud`` asked for, validated.

    ``ends_in`` (seconds from when the heartbeat is set) and ``ends_at`` (an absolute time)
    exclude each other; ``zone`` is the profile's time zone, kept with the heartbeat so that
    its quiet window means the same in every process."""

    quiet: QuietWindow | None = None
    ends_in: int | None = None
    ends_at: float | None = None
    loud: bool = False
    zone: str | None = None

    def end(self, now: float) -> float | None:
        """When a heartbeat set at ``now`` ends (``None``: it does not end by itself)."""
        if self.ends_in is not None:
            return now + self.ends_in
        return self.ends_at

    def check(self, interval: int, now: float) -> None:
        """Refuse an end that leaves no fire: in the past, or before the first fire."""
        end = self.end(now)
        if end is None:
            return
        if end <= now:
            raise OptionError("--until lies in the past: give a time still to come")
        if end - now > MAX_AHEAD_SECONDS:
            raise OptionError(f"the end is too far ahead: a heartbeat may run at most {format_interval(MAX_AHEAD_SECONDS)}")
        if end < now + interval:
            option = "--for" if self.ends_in is not None else "--until"
            raise OptionError(
                f"{option} ends the heartbeat in {format_interval(round(end - now)) or '0s'}, before its first "
                f"fire (every {format_interval(interval)}): give a later end or a shorter interval"
            )


OPTION_NAMES = ("--quiet", "--for", "--until", "--loud")
OPTIONS_HELP = "--quiet HH:MM-HH:MM, --for DURATION, --until DATE and --loud"
_WORD = re.compile(r"\s*(\S+)")
_DASHES = ("—", "–")
_CLOCK_TIME = re.compile(r"[0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:?[0-9]{2})?")


@dataclass(frozen=True, slots=True)
class OptionWords:
    """The options as typed, not yet checked against a zone and a time (see :func:`resolve`)."""

    quiet: str | None = None
    for_: str | None = None
    until: str | None = None
    loud: bool = False


def take_options(text: str) -> tuple[OptionWords, str | None, str]:
    """Split what follows ``/heartbeat every``: options (before the interval or between it
    and the prompt), the interval, and the prompt as typed. ``--`` ends the options (for a
    prompt that begins with ``--``). Raises :class:`OptionError`."""
    found: dict[str, str | bool] = {}
    interval: str | None = None
    pos = 0
    while True:
        match = _WORD.match(text, pos)
        if match is None:
            return _words(found), interval, ""
        word = match.group(1)
        if word == "--":
            pos = match.end()
            if interval is None:
                nxt = _WORD.match(text, pos)
                interval, pos = (None, pos) if nxt is None else (nxt.group(1), nxt.end())
            return _words(found), interval, text[pos:]
        if word[:1] in _DASHES and "--" + word[1:].partition("=")[0] in OPTION_NAMES:
            word = "--" + word[1:]  # a phone made "--quiet" into "—quiet"
        if not word.startswith("--"):
            if interval is not None:
                return _words(found), interval, text[match.start(1):]
            interval, pos = word, match.end()
            continue
        name, eq, value = word.partition("=")
        if name not in OPTION_NAMES:
            raise OptionError(
                f"unknown option {_quoted(name)}: a heartbeat takes {OPTIONS_HELP} "
                "(put -- before a prompt that begins with --)"
            )
        if name in found:
            raise OptionError(f"{name} is given twice")
        pos = match.end()
        if name == "--loud":
            if eq:
                raise OptionError("--loud takes no value")
            found[name] = True
            continue
        if not eq:
            nxt = _WORD.match(text, pos)
            if nxt is None or nxt.group(1).startswith("--"):
                raise OptionError(f"{name} needs a value, e.g. {_EXAMPLE[name]}")
            value, pos = nxt.group(1), nxt.end()
        if name == "--until" and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
            after = _WORD.match(text, pos)  # '--until 2026-12-24 18:00': the time belongs to it
            if after is not None and _CLOCK_TIME.fullmatch(after.group(1)):
                value, pos = f"{value} {after.group(1)}", after.end()
        found[name] = value


def resolve(words: OptionWords, interval: int, zone: str | None, now: float) -> HeartbeatOptions:
    """Check the typed options for a heartbeat of ``interval`` set at ``now`` in ``zone``."""
    if words.for_ is not None and words.until is not None:
        raise OptionError("give --for or --until, not both")
    options = HeartbeatOptions(
        quiet=None if words.quiet is None else QuietWindow.parse(words.quiet),
        ends_in=None if words.for_ is None else parse_for(words.for_),
        ends_at=None if words.until is None else parse_until(words.until, zone, now),
        loud=words.loud,
        zone=zone if words.quiet is not None else None,  # only a quiet window needs it
    )
    options.check(interval, now)
    return options


_EXAMPLE = {"--quiet": f"--quiet {QUIET_EXAMPLE}", "--for": "--for 3d", "--until": "--until 2026-12-24"}


def _words(found: dict[str, str | bool]) -> OptionWords:
    def text(name: str) -> str | None:
        value = found.get(name)
        return value if isinstance(value, str) else None

    return OptionWords(text("--quiet"), text("--for"), text("--until"), bool(found.get("--loud")))


def parse_for(text: str) -> int:
    """``--for 3d`` → seconds (at least the minimum interval); raises :class:`OptionError`."""
    try:
        return parse_interval(text, minimum=minimum_interval(), noun="duration")
    except IntervalError as exc:
        raise OptionError(f"--for: {exc}") from None


def parse_until(text: str, zone: str | None, now: float) -> float:
    """``--until`` as an epoch: a date alone is the end of that day, a date and time that
    moment, both in ``zone`` unless the text carries its own offset. Raises
    :class:`OptionError` (the time must lie ahead and at most a year away)."""
    raw = text.strip()
    shown = _quoted(raw)
    if not raw:
        raise OptionError(f"missing date: give a date, e.g. --until {UNTIL_EXAMPLES}")
    if len(raw) > _MAX_UNTIL_CHARS or not raw.isascii() or not raw.isprintable():
        raise OptionError(f"--until {shown} is not a date: write it as {UNTIL_EXAMPLES}")
    try:
        if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", raw):
            day = date.fromisoformat(raw)
            moment = datetime.combine(day, time(0), tzinfo=_zone(zone)) + timedelta(days=1)
        elif re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:?[0-9]{2})?", raw):
            moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=_zone(zone))
        else:
            raise ValueError("not the form")
        epoch = moment.timestamp()
    except (ValueError, OverflowError, OSError):
        raise OptionError(f"--until {shown} is not a date: write it as {UNTIL_EXAMPLES}") from None
    if epoch <= now:
        raise OptionError(f"--until {shown} lies in the past: give a time still to come")
    if epoch - now > MAX_AHEAD_SECONDS:
        raise OptionError(
            f"--until {shown} is too far ahead: a heartbeat may run at most {format_interval(MAX_AHEAD_SECONDS)}"
        )
    return epoch


def _zone(zone: str | None) -> tzinfo:
    if zone:
        return ZoneInfo(zone)
    local = datetime.now().astimezone().tzinfo
    assert local is not None
    return local


def _local(epoch: float, zone: str | None) -> datetime:
    return datetime.fromtimestamp(epoch, ZoneInfo(zone)) if zone else datetime.fromtimestamp(epoch).astimezone()


def _at(day: date, minute: int, zone: tzinfo | None) -> float:
    naive = datetime.combine(day, time(minute // 60, minute % 60))
    if isinstance(zone, ZoneInfo):
        return naive.replace(tzinfo=zone).timestamp()
    return naive.timestamp()  # the machine's zone, DST included


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _quoted(raw: str, width: int = 24) -> str:
    line = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in raw)
    return f"'{line}'" if len(line) <= width else f"'{line[: width - 1]}…'"
