"""Fuzz: intervals, durations, schedules, grace and time zones, through the real ``vigil``.

Well-formed values are generated with the meaning they must have (and checked against what
was stored); arbitrary text must end in exit code 0 or one clear error line that changes
nothing. Every command runs under a time bound, so a schedule that makes the parser spin
fails the example instead of hanging the suite.
"""

from __future__ import annotations

import json
import zoneinfo
from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.cli_helpers import (
    JOB,
    NON_ASCII_DIGITS,
    SESSIONS,
    check,
    fresh_home,
    invoke,
    nasty_text,
    raw_control_characters,
)

UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))


@st.composite
def compound_interval(draw: st.DrawFn) -> tuple[str, int]:
    """A well-formed interval (``1h30m``, ``90s`` ...) and its length in seconds."""
    chosen = draw(st.lists(st.sampled_from(UNITS), min_size=1, max_size=4, unique=True))
    chosen.sort(key=UNITS.index)
    text, seconds = "", 0
    for unit, size in chosen:
        amount = draw(st.integers(min_value=0, max_value=400))
        text += f"{amount}{draw(st.sampled_from([unit, unit.upper()]))}"
        seconds += amount * size
    return text, seconds


INTERVAL_TEXT = st.one_of(
    compound_interval().map(lambda pair: pair[0]),
    nasty_text(16),
    st.text(NON_ASCII_DIGITS, min_size=1, max_size=3).map(lambda digits: digits + "m"),
    st.integers(min_value=20, max_value=6000).map(lambda n: "1" * n + "m"),
    st.integers(min_value=-(10**12), max_value=10**12).map(lambda n: f"{n}m"),
    st.sampled_from(["15m", "-5m", "0s", "1h30", "1.5h", "15 m", "15m30m", "30m1h", "1w", "١٥m", "１５m", "15ſ", "59s"]),
)

CRON_FIELD = st.one_of(
    st.sampled_from(["*", "*/5", "1-5", "0", "59", "60", "1,2,3", "MON-FRI", "L", "?", "5/0", "٣", "１", "-1", "99999999999"]),
    st.integers(min_value=0, max_value=70).map(str),
)
ISO_TIME = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(lambda d: d.isoformat(timespec="minutes"))

SCHEDULE_TEXT = st.one_of(
    INTERVAL_TEXT.map(lambda text: f"every {text}"),
    INTERVAL_TEXT,
    st.lists(CRON_FIELD, min_size=4, max_size=6).map(" ".join),
    ISO_TIME,
    st.tuples(ISO_TIME, st.sampled_from(["+14:00", "-12:00", "-23:59", "+23:59", "Z", "+00:00"])).map("".join),
    st.sampled_from(["9999-12-31T23:59", "9998-12-31T23:59", "0001-01-01T00:00", "9999-12-31T23:59:59.999999"]),
    st.sampled_from(["@hourly", "@daily", "@reboot", "@", "every", "every ", "0 0 30 2 *", "0 0 31 4 *", "* * * * 7"]),
    nasty_text(30),
)
ZONES = sorted(zoneinfo.available_timezones())
ZONE_TEXT = st.one_of(
    st.sampled_from(ZONES[:: max(1, len(ZONES) // 60)]),
    st.sampled_from(["UTC", "", " UTC", "../../etc/passwd", "Europe/Nowhere", "/etc/localtime", "a" * 300, "Etc/GMT+١"]),
    nasty_text(20),
)


@settings(max_examples=200, deadline=None)
@given(interval=INTERVAL_TEXT, prompt=nasty_text(30))
def test_heartbeat_set_intervals_and_prompts(interval: str, prompt: str) -> None:
    with fresh_home() as home:
        result = check(home, ["heartbeat", "set", "-s", SESSIONS[0], "--", interval, prompt])
        if result.exit_code != 0:
            return
        listed = json.loads(invoke(home, ["heartbeat", "list", "--json"]).output)
        for shown in (["heartbeat", "list"], ["heartbeat", "status", "-s", SESSIONS[0]]):
            output = invoke(home, shown, color=True).output
            assert not raw_control_characters(output), (shown, output)
    [mine] = [h for h in listed if h["session"] == SESSIONS[0]]
    assert 60 <= mine["interval_seconds"] <= 365 * 86_400
    assert mine["prompt"] == prompt.strip()


@settings(max_examples=100, deadline=None)
@given(interval=compound_interval())
def test_a_well_formed_heartbeat_interval_means_what_it_says(interval: tuple[str, int]) -> None:
    text, seconds = interval
    with fresh_home() as home:
        result = check(home, ["heartbeat", "set", "-s", SESSIONS[1], text, "watch"])
        if not 60 <= seconds <= 365 * 86_400:
            assert result.exit_code != 0
            return
        assert result.exit_code == 0, result.output
        listed = json.loads(invoke(home, ["heartbeat", "list", "--json"]).output)
    assert [h["interval_seconds"] for h in listed if h["session"] == SESSIONS[1]] == [seconds]


@settings(max_examples=200, deadline=None)
@given(
    schedule=SCHEDULE_TEXT,
    grace=st.one_of(st.none(), INTERVAL_TEXT, st.sampled_from(["0", "default", ""])),
    tz=st.one_of(st.none(), ZONE_TEXT),
)
def test_cron_add_schedules_grace_and_zones(schedule: str, grace: str | None, tz: str | None) -> None:
    args = ["cron", "add", "fuzzed", "--schedule", schedule, "--prompt", "report"]
    args += [] if grace is None else ["--grace", grace]
    args += [] if tz is None else ["--tz", tz]
    with fresh_home() as home:
        result = check(home, args)
        if result.exit_code == 0:
            assert check(home, ["cron", "list"]).exit_code == 0
            assert check(home, ["cron", "status", "--json"]).exit_code == 0


@settings(max_examples=120, deadline=None)
@given(
    option=st.sampled_from(["--schedule", "--grace", "--tz", "--catch-up", "--deliver", "--workdir"]),
    value=st.one_of(SCHEDULE_TEXT, ZONE_TEXT, st.integers(200, 400).map(lambda n: "/" + "d" * n)),
)
def test_cron_edit_options(option: str, value: str) -> None:
    with fresh_home() as home:
        check(home, ["cron", "edit", JOB, option, value])
        assert check(home, ["cron", "show", JOB]).exit_code == 0
