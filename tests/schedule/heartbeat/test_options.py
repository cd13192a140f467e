"""Heartbeat options as the schedule sees them: quiet windows (midnight, zones, DST), ends,
the typed option words, and what a stored record with options means."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from vigil.schedule.heartbeat.options import (
    HeartbeatOptions,
    OptionError,
    OptionWords,
    QuietWindow,
    parse_for,
    parse_until,
    resolve,
    take_options,
)
from vigil.schedule.heartbeat.record import Heartbeat, HeartbeatError
from vigil.schedule.heartbeat.text import asks_for_silence, heartbeat_message, is_silent_answer

BERLIN = "Europe/Berlin"


def at(text: str, zone: str = BERLIN) -> float:
    """``2027-01-15 22:30`` in ``zone`` as an epoch."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


def test_a_window_across_midnight_is_quiet_from_its_start_to_its_end() -> None:
    window = QuietWindow.parse("22:00-07:00")
    assert str(window) == "22:00-07:00"
    assert QuietWindow.parse("22:00–07:00") == QuietWindow.parse("22:00 — 07:00") == window
    assert not window.contains(at("2027-01-15 21:59"), BERLIN)
    assert window.contains(at("2027-01-15 22:00"), BERLIN)
    assert window.contains(at("2027-01-16 03:00"), BERLIN)
    assert not window.contains(at("2027-01-16 07:00"), BERLIN)
    # a time inside is released at the window's end, the next morning or the same one
    assert window.release(at("2027-01-15 23:10"), BERLIN) == at("2027-01-16 07:00")
    assert window.release(at("2027-01-16 06:59"), BERLIN) == at("2027-01-16 07:00")
    assert window.release(at("2027-01-15 12:00"), BERLIN) == at("2027-01-15 12:00")


def test_a_window_is_read_in_its_zone() -> None:
    window = QuietWindow.parse("9:00-17:30")
    noon_utc = at("2027-01-15 12:00", "UTC")
    assert window.contains(noon_utc, "UTC")
    assert not window.contains(noon_utc, "Asia/Tokyo")  # 21:00 there
    assert window.release(noon_utc, "UTC") == at("2027-01-15 17:30", "UTC")


def test_the_end_of_a_window_on_a_dst_night_is_the_local_wall_clock_time() -> None:
    window = QuietWindow.parse("01:00-06:00")
    # 2027-03-28: Berlin jumps from 02:00 to 03:00; the night is an hour shorter
    assert window.release(at("2027-03-28 01:30"), BERLIN) == at("2027-03-28 06:00")
    assert window.release(at("2027-03-28 01:30"), BERLIN) - at("2027-03-28 01:30") == 3.5 * 3600


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("", "missing quiet window"),
        ("22:00", "HH:MM-HH:MM"),
        ("22-07", "HH:MM-HH:MM"),
        ("24:00-07:00", "hours are 00-23"),
        ("22:60-07:00", "minutes 00-59"),
        ("07:00-07:00", "cannot be empty"),
        ("２２:00-07:00", "digits 0-9"),
        ("22:00-07:00-08:00", "HH:MM-HH:MM"),
    ],
)
def test_a_malformed_window_names_the_rule(text: str, rule: str) -> None:
    with pytest.raises(OptionError, match=rule):
        QuietWindow.parse(text)


def test_ends_by_duration_or_date() -> None:
    now = at("2027-01-15 10:00")
    assert parse_for("3d") == 3 * 86_400
    assert parse_until("2027-01-20", BERLIN, now) == at("2027-01-21 00:00")  # the end of that day
    assert parse_until("2027-01-20 18:30", BERLIN, now) == at("2027-01-20 18:30")
    assert parse_until("2027-01-20T18:30Z", BERLIN, now) == at("2027-01-20 18:30", "UTC")
    for bad, rule in [
        ("10x", "not a duration"), ("0m", "zero"), ("59s", "too short"), ("-1d", "negative"), ("400d", "too long"),
    ]:
        with pytest.raises(OptionError, match=rule):
            parse_for(bad)
    for bad, rule in [
        ("2027-01-14", "in the past"), ("2029-01-01", "too far ahead"), ("2027-02-30", "not a date"),
        ("tomorrow", "not a date"), ("2027-01-20 25:00", "not a date"), ("", "missing date"),
    ]:
        with pytest.raises(OptionError, match=rule):
            parse_until(bad, BERLIN, now)


def test_an_end_before_the_first_fire_is_refused() -> None:
    now = at("2027-01-15 10:00")
    with pytest.raises(OptionError, match="before its first fire"):
        resolve(OptionWords(for_="10m"), 900, BERLIN, now)
    with pytest.raises(OptionError, match="not both"):
        resolve(OptionWords(for_="1d", until="2027-01-20"), 900, BERLIN, now)
    options = resolve(OptionWords(quiet="22:00-07:00", for_="1d", loud=True), 900, BERLIN, now)
    assert options == HeartbeatOptions(QuietWindow(22 * 60, 7 * 60), 86_400, None, True, BERLIN)


@pytest.mark.parametrize(
    ("typed", "words", "interval", "prompt"),
    [
        ("15m check CI", OptionWords(), "15m", "check CI"),
        ("--quiet 22:00-07:00 15m check  CI", OptionWords(quiet="22:00-07:00"), "15m", "check  CI"),
        ("15m --for=3d --loud watch", OptionWords(for_="3d", loud=True), "15m", "watch"),
        ("15m --until 2027-01-20 18:00 watch", OptionWords(until="2027-01-20 18:00"), "15m", "watch"),
        ("15m -- --verbose is the prompt", OptionWords(), "15m", " --verbose is the prompt"),
        ("15m check --loud later", OptionWords(), "15m", "check --loud later"),  # options come before the prompt
        # a phone's keyboard turns "--" into a dash as it is typed
        ("15m —quiet 22:00–07:00 —loud check", OptionWords(quiet="22:00–07:00", loud=True), "15m", "check"),
        ("15m —as said before", OptionWords(), "15m", "—as said before"),
    ],
)
def test_option_words_before_the_prompt(typed: str, words: OptionWords, interval: str, prompt: str) -> None:
    assert take_options(typed) == (words, interval, prompt)


@pytest.mark.parametrize(
    ("typed", "rule"),
    [
        ("15m --quite 22:00-07:00 x", "unknown option '--quite'"),
        ("15m --quiet", "--quiet needs a value"),
        ("15m --loud --loud x", "given twice"),
        ("15m --loud=yes x", "takes no value"),
    ],
)
def test_malformed_option_words_name_the_rule(typed: str, rule: str) -> None:
    with pytest.raises(OptionError, match=rule):
        take_options(typed)


def test_a_record_with_options_fires_only_outside_its_window_and_before_its_end() -> None:
    now = at("2027-01-15 21:50")
    options = HeartbeatOptions(QuietWindow.parse("22:00-07:00"), ends_in=2 * 86_400, zone=BERLIN)
    hb = Heartbeat.create("s", "p", 900, now, options=options)
    assert hb.next_due == at("2027-01-15 22:05")
    assert hb.fire_at() == at("2027-01-16 07:00")  # due inside the window: fires as it ends
    assert not hb.due(at("2027-01-16 03:00")) and hb.due(at("2027-01-16 07:00"))
    assert hb.ends_at == now + 2 * 86_400 and not hb.ended(hb.ends_at - 1) and hb.ended(hb.ends_at)
    late = Heartbeat.create("s", "p", 900, hb.ends_at - 600, options=HeartbeatOptions(ends_in=800))
    assert late.fire_at() is None and late.wake_at() == late.ends_at  # it ends before its next fire
    again = Heartbeat.from_json(hb.to_json())
    assert again == hb
    # a record written before options existed reads as having none
    old = {k: v for k, v in hb.to_json().items() if k not in ("quiet", "zone", "ends_at", "loud", "paused_by")}
    assert Heartbeat.from_json(old).fire_at() == hb.next_due


def test_a_damaged_window_or_zone_is_a_damaged_record() -> None:
    hb = Heartbeat.create("s", "p", 900, 0.0).to_json()
    for damage in ({"quiet": "25:00-07:00"}, {"quiet": 7}, {"quiet": "22:00-07:00", "zone": "Nowhere/Else"}):
        with pytest.raises(HeartbeatError, match="damaged"):
            Heartbeat.from_json({**hb, **damage})


def test_the_injected_message_asks_for_heartbeat_ok_unless_loud() -> None:
    quiet = Heartbeat.create("s", "check CI", 900, 0.0)
    loud = Heartbeat.create("s", "check CI", 900, 0.0, options=HeartbeatOptions(loud=True))
    assert "answer exactly HEARTBEAT_OK" in heartbeat_message(quiet) and asks_for_silence(heartbeat_message(quiet))
    assert "HEARTBEAT_OK" not in heartbeat_message(loud) and not asks_for_silence(heartbeat_message(loud))
    assert all(is_silent_answer(a) for a in ("HEARTBEAT_OK", " **HEARTBEAT_OK**\n", "`HEARTBEAT_OK`."))
    assert not any(is_silent_answer(a) for a in ("", "HEARTBEAT_OK: CI failed", "CI failed", "heartbeat ok"))
