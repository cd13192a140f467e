"""Schedule parsing and next-occurrence computation, including daylight-saving days."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.schedule.cron.conftest import START, at
from vigil.schedule.cron.errors import ScheduleError
from vigil.schedule.cron.schedule import GRACE_MAX, GRACE_MIN, Schedule, parse_schedule, resolve_zone


def occurrences(schedule: Schedule, start: float, end: float) -> list[float]:
    out, current = [], schedule.next_after(start)
    while current is not None and current <= end:
        out.append(current)
        current = schedule.next_after(current)
    return out


def test_every_is_anchored_at_the_time_it_was_set() -> None:
    s = parse_schedule("every 2h", tz="UTC", now=START + 0.7)
    assert (s.kind, s.seconds, s.anchor) == ("interval", 7200, START)
    assert s.next_after(START) == START + 7200
    assert s.next_after(START + 7200) == START + 14400
    assert s.latest_at_or_before(START + 3 * 7200 + 5, not_before=START) == START + 3 * 7200
    assert s.count_between(START + 7200, START + 5 * 7200) == 5
    assert parse_schedule("every 1h30m", tz="UTC", now=START).seconds == 5400


def test_cron_expression_in_a_zone() -> None:
    s = parse_schedule("0 9 * * 1-5", tz="Europe/Berlin", now=START)  # Monday 09:00 CET = 08:00 UTC
    assert s.kind == "cron"
    week = occurrences(s, START, START + 7 * 86400)
    assert week[0] == at("2026-03-03 09:00", "Europe/Berlin")  # today's 09:00 CET was START itself
    assert len(week) == 5
    assert parse_schedule("@hourly", tz="UTC", now=START).expr == "0 * * * *"


def test_one_shots() -> None:
    delay = parse_schedule("30m", tz="UTC", now=START)
    assert (delay.kind, delay.at) == ("once", START + 1800)
    assert delay.next_after(START) == START + 1800 and delay.next_after(START + 1800) is None
    stamp = parse_schedule("2026-03-05T09:00", tz="Europe/Berlin", now=START)
    assert stamp.at == at("2026-03-05 09:00", "Europe/Berlin")
    offset = parse_schedule("2026-03-05T09:00:00+00:00", tz="Europe/Berlin", now=START)
    assert offset.at == at("2026-03-05 09:00")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("every 30s", "too short"),
        ("every", "missing interval"),
        ("every 5x", "not an interval"),
        ("0m", "zero"),
        ("61 * * * *", "invalid cron expression"),
        ("0 0 31 2 *", "invalid cron expression"),
        ("* * * *", "invalid schedule"),
        ("@fortnightly", "unknown schedule alias"),
        ("2026-03-01T00:00", "in the past"),
        ("tomorrow", "use 'every 2h'"),
    ],
)
def test_invalid_schedules_say_why(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(text, tz="UTC", now=START)


def test_unknown_zone() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'"):
        parse_schedule("every 1h", tz="Mars/Olympus", now=START)
    with pytest.raises(ScheduleError):
        resolve_zone("../etc/passwd")


def test_spring_forward_runs_exactly_once() -> None:
    # 2026-03-29 in Berlin: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that day.
    s = parse_schedule("30 2 * * *", tz="Europe/Berlin", now=at("2026-03-27 12:00", "Europe/Berlin"))
    runs = occurrences(s, at("2026-03-28 12:00", "Europe/Berlin"), at("2026-03-31 12:00", "Europe/Berlin"))
    days = [at(f"2026-03-{d} 00:00", "Europe/Berlin") for d in (29, 30, 31)]
    assert len(runs) == 3
    assert [sum(1 for r in runs if day <= r < day + 86400 - 3600) for day in days] == [1, 1, 1]
    assert runs[0] == at("2026-03-29 01:00")  # 03:00 CEST, the first valid minute after 02:30


def test_fall_back_runs_exactly_once() -> None:
    # 2026-10-25 in Berlin: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice.
    s = parse_schedule("30 2 * * *", tz="Europe/Berlin", now=at("2026-10-23 12:00", "Europe/Berlin"))
    runs = occurrences(s, at("2026-10-24 12:00", "Europe/Berlin"), at("2026-10-26 12:00", "Europe/Berlin"))
    assert runs == [at("2026-10-25 00:30"), at("2026-10-26 01:30")]
    # Starting inside the repeated hour (02:15 CET, after the first 02:30) must not go back.
    inside = at("2026-10-25 01:15")
    assert s.next_after(inside) == at("2026-10-26 01:30")
    assert s.latest_at_or_before(inside, not_before=at("2026-10-24 00:00")) == at("2026-10-25 00:30")


def test_intervals_ignore_daylight_saving() -> None:
    s = parse_schedule("every 1h", tz="Europe/Berlin", now=at("2026-10-24 22:00"))
    runs = occurrences(s, at("2026-10-24 22:00"), at("2026-10-25 22:00"))
    assert len(runs) == 24 and all(b - a == 3600 for a, b in zip(runs, runs[1:]))


def test_default_grace_is_half_the_period_clamped() -> None:
    assert parse_schedule("every 10m", tz="UTC", now=START).default_grace(START + 600, START) == 300
    assert parse_schedule("every 1m", tz="UTC", now=START).default_grace(START + 60, START) == GRACE_MIN
    assert parse_schedule("0 9 * * *", tz="UTC", now=START).default_grace(START + 3600, START) == GRACE_MAX
    once = parse_schedule("20m", tz="UTC", now=START)
    assert once.default_grace(once.at or 0, START) == 600


_EXPRESSIONS = ["30 2 * * *", "0 * * * *", "*/20 * * * *", "15 1,2,3 * * *", "0 9 * * 1-5", "0 0 1 * *"]
_ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC", "Asia/Kolkata"]


@settings(max_examples=150, deadline=None)
@given(
    expr=st.sampled_from(_EXPRESSIONS),
    tz=st.sampled_from(_ZONES),
    t=st.integers(min_value=int(at("2026-01-01 00:00")), max_value=int(at("2027-12-31 00:00"))),
)
def test_next_after_is_strictly_increasing_and_complete(expr: str, tz: str, t: int) -> None:
    s = Schedule("cron", expr, tz, expr=expr)
    first = s.next_after(t)
    assert first is not None and first > t
    second = s.next_after(first)
    assert second is not None and second > first
    # Nothing is skipped between them, and the backward search agrees with the forward one.
    assert s.next_after(second - 1) == second
    assert s.latest_at_or_before(second - 1, not_before=t) == first
    assert s.count_between(first, second) == 2


def test_fractional_instants_round_toward_the_right_occurrence() -> None:
    """Claims and failures happen at fractional seconds; occurrences are whole seconds."""
    every = parse_schedule("every 1m", tz="UTC", now=START)
    daily = parse_schedule("0 9 * * *", tz="UTC", now=START)
    once = parse_schedule("20m", tz="UTC", now=START)
    nine = at("2026-03-02 09:00")
    assert every.first_at_or_after(START + 60.3) == START + 120
    assert every.first_at_or_after(START + 59.7) == START + 60
    assert daily.first_at_or_after(nine + 0.3) == nine + 86400
    assert daily.first_at_or_after(nine - 0.3) == nine
    assert once.first_at_or_after(START + 1200.3) is None
    assert every.count_between(START + 60.3, START + 180) == 2
    assert daily.count_between(nine + 0.3, nine + 86400) == 1
    assert every.latest_at_or_before(START + 119.9, not_before=START + 60.3) is None
    assert daily.latest_at_or_before(nine + 86399.5, not_before=nine + 0.3) is None


_KINDS = ["every 1m", "every 7m", "*/5 * * * *", "30 2 * * *", "0 9 * * 1-5"]


@settings(max_examples=200, deadline=None)
@given(
    text=st.sampled_from(_KINDS),
    tz=st.sampled_from(_ZONES),
    t=st.integers(min_value=int(at("2026-01-01 00:00")), max_value=int(at("2027-12-31 00:00"))),
    frac=st.floats(min_value=0.001, max_value=0.999),
)
def test_fractional_bounds_agree_with_next_after(text: str, tz: str, t: int, frac: float) -> None:
    s = parse_schedule(text, tz=tz, now=at("2025-12-31 23:59:30"))
    first = s.next_after(t)
    assert first is not None
    second = s.next_after(first)
    assert second is not None
    assert s.first_at_or_after(first) == first
    assert s.first_at_or_after(first - frac) == first
    assert s.first_at_or_after(first + frac) == second
    assert s.count_between(first + frac, second) == 1
    assert s.count_between(first - frac, second + frac) == 2
    assert s.latest_at_or_before(second - frac, not_before=first + frac) is None
    assert s.latest_at_or_before(second + frac, not_before=first + frac) == second


@pytest.mark.parametrize(
    "text", ["every ١٥m", "١٥m", "１５m", "15ſ", "every 1\u212a", "٠ ٩ * * *", "0 ９ * * *", "２０２６-05-01T09:00"]
)
def test_schedules_take_ascii_digits_only(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_schedule(text, tz="UTC", now=START)


def test_a_huge_schedule_is_quoted_short_in_its_error() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("every " + "1" * 5000 + "m", tz="UTC", now=START)
    assert "the maximum interval is 365 days" in str(caught.value) and len(str(caught.value)) < 200


@pytest.mark.parametrize(
    ("text", "tz", "rule"),
    [
        ("9999-12-31T23:59:59-23:59", "UTC", "too far ahead"),
        ("9999-12-31T23:59", "Pacific/Kiritimati", "too far ahead"),
        ("9999-06-01T00:00", "America/Adak", "too far ahead"),
        ("0001-01-01T00:00+23:59", "UTC", "in the past"),
        ("0001-01-01T00:00", "America/Adak", "in the past"),
    ],
)
def test_one_shot_times_every_zone_can_show(text: str, tz: str, rule: str) -> None:
    with pytest.raises(ScheduleError, match=rule):
        parse_schedule(text, tz=tz, now=START)
    late = parse_schedule("9998-12-31T23:59", tz="Pacific/Kiritimati", now=START)
    assert late.describe().startswith("once at 9998-12-31 23:59")
