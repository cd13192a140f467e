"""Interval parsing and formatting: the accepted forms and one clear error per broken rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil.schedule.intervals import (
    MAX_INTERVAL_SECONDS,
    TEST_MINIMUM_ENV,
    IntervalError,
    format_interval,
    minimum_interval,
    parse_interval,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("60s", 60), ("1m", 60), ("10m", 600), ("2h", 7200), ("1d", 86400),
     ("1h30m", 5400), ("1d2h3m4s", 93784), ("15M", 900), (" 15m ", 900)],
)
def test_accepted_forms(text: str, seconds: int) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("0m", "is zero: an interval must be at least 60 seconds"),
        ("0s", "is zero"),
        ("59s", "is too short: the minimum interval is 60 seconds (1m)"),
        ("10x", "is not an interval: use a number and a unit s, m, h or d"),
        ("-5m", "is negative"),
        ("", "missing interval"),
        ("15", "is not an interval"),
        ("m", "is not an interval"),
        ("1.5h", "is not an interval"),
        ("30m1h", "name each unit once, largest first"),
        ("1m1m", "name each unit once, largest first"),
        ("1h 30m", "is not an interval"),
    ],
)
def test_each_broken_rule_is_named(text: str, rule: str) -> None:
    with pytest.raises(IntervalError) as info:
        parse_interval(text)
    assert rule in str(info.value)


@pytest.mark.parametrize(("seconds", "text"), [(60, "1m"), (90, "1m30s"), (900, "15m"), (5400, "1h30m"), (86400, "1d"), (0, "0s")])
def test_format(seconds: int, text: str) -> None:
    assert format_interval(seconds) == text


@given(st.integers(min_value=60, max_value=MAX_INTERVAL_SECONDS))
def test_format_parses_back(seconds: int) -> None:
    assert parse_interval(format_interval(seconds)) == seconds


@pytest.mark.parametrize("text", ["366d", "3000000d", "8761h", "365d1s", "9" * 5000 + "d"])
def test_the_maximum_is_365_days(text: str) -> None:
    assert parse_interval("365d") == MAX_INTERVAL_SECONDS
    with pytest.raises(IntervalError) as info:
        parse_interval(text)
    message = str(info.value)
    assert "is too long: the maximum interval is 365 days (365d)" in message and len(message) < 120


def test_an_option_like_word_is_not_called_negative() -> None:
    with pytest.raises(IntervalError, match="is not an interval"):
        parse_interval("--sesion")


def test_the_test_only_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    assert minimum_interval() == 60
    monkeypatch.setenv(TEST_MINIMUM_ENV, "1")
    assert parse_interval("2s") == 2
    monkeypatch.setenv(TEST_MINIMUM_ENV, "junk")
    assert minimum_interval() == 60


@pytest.mark.parametrize("text", ["١٥m", "１５m", "1٥m", "۱h", "१५m", "15\u212am"])
def test_only_ascii_digits_and_units_are_read(text: str) -> None:
    with pytest.raises(IntervalError) as caught:
        parse_interval(text)
    assert "not an interval" in str(caught.value)


@given(st.text(st.characters(categories=["Nd"]), min_size=1, max_size=4).filter(lambda s: not s.isascii()))
def test_no_non_ascii_digit_is_taken_for_a_number(digits: str) -> None:
    with pytest.raises(IntervalError, match="digits 0-9"):
        parse_interval(digits + "m")
