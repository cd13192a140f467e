"""Fuzz: the heartbeat options through the real ``vigil heartbeat set`` (``--quiet``, ``--for``,
``--until``, ``--loud``) and through the slash command's parser.

Well-formed values are generated with their meaning and checked against what was stored;
arbitrary text must end in exit code 0 or one clear error line that changes nothing (see
:func:`tests.fuzz.cli_helpers.check`), under a time bound, so a parser that hangs fails.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.cli_helpers import NON_ASCII_DIGITS, SESSIONS, bounded, check, fresh_home, invoke, nasty_text
from vigil.runtime.heartbeat_commands import HeartbeatInputError, parse_command

CLOCK_TIME = st.tuples(st.integers(0, 30), st.integers(0, 70)).map(lambda t: f"{t[0]:02d}:{t[1]:02d}")
QUIET_TEXT = st.one_of(
    st.tuples(CLOCK_TIME, CLOCK_TIME).map("-".join),
    st.tuples(st.integers(0, 23), st.integers(0, 59), st.integers(0, 23), st.integers(0, 59)).map(
        lambda t: f"{t[0]}:{t[1]:02d}-{t[2]}:{t[3]:02d}"
    ),
    nasty_text(16),
    st.text(NON_ASCII_DIGITS, min_size=1, max_size=2).map(lambda d: f"{d}:00-07:00"),
    st.sampled_from(["22:00-07:00", "07:00-07:00", "24:00-01:00", "22:00", "22-07", "-", "22:00 - 07:00",
                     "22:00-07:00-08:00", "9:5-10:00", "00:00-23:59", "2200-0700", "22:00–07:00", "１:00-2:00"]),
)
FOR_TEXT = st.one_of(
    st.integers(-100, 10**7).map(lambda n: f"{n}m"),
    st.sampled_from(["3d", "1h30m", "59s", "0m", "400d", "1w", "1.5d", "", " ", "-", "3 d", "١d"]),
    nasty_text(12),
)


def _day(offset: int) -> str:
    return (datetime.now(timezone.utc) + timedelta(days=offset)).strftime("%Y-%m-%d")


UNTIL_TEXT = st.one_of(
    st.integers(-5, 400).map(_day),
    st.tuples(st.integers(-1, 30), st.integers(0, 25), st.integers(0, 61)).map(
        lambda t: f"{_day(t[0])} {t[1]:02d}:{t[2]:02d}"
    ),
    st.tuples(st.integers(1, 30), st.sampled_from(["Z", "+14:00", "-12:00", "+99:00", "+0530"])).map(
        lambda t: f"{_day(t[0])}T12:00{t[1]}"
    ),
    st.sampled_from(["9999-12-31", "0001-01-01", "2026-02-30", "tomorrow", "", "2026-13-01", "99999-01-01",
                     "2026-12-24T", "2026-12-24 18", "20261224"]),
    nasty_text(24),
)


@settings(max_examples=150, deadline=None)
@given(
    quiet=st.one_of(st.none(), QUIET_TEXT),
    for_=st.one_of(st.none(), FOR_TEXT),
    until=st.one_of(st.none(), UNTIL_TEXT),
    loud=st.booleans(),
)
def test_heartbeat_set_options(quiet: str | None, for_: str | None, until: str | None, loud: bool) -> None:
    args = ["heartbeat", "set", "-s", SESSIONS[0]]
    args += [] if quiet is None else ["--quiet", quiet]
    args += [] if for_ is None else ["--for", for_]
    args += [] if until is None else ["--until", until]
    args += ["--loud"] if loud else []
    with fresh_home() as home:
        before = time.time()
        result = check(home, [*args, "--", "15m", "check the CI run"])
        if result.exit_code != 0:
            return
        listed = json.loads(invoke(home, ["heartbeat", "list", "--json"]).output)
        assert check(home, ["heartbeat", "status", "-s", SESSIONS[0]]).exit_code == 0
        assert check(home, ["heartbeat", "list"]).exit_code == 0
    [mine] = [h for h in listed if h["session"] == SESSIONS[0]]
    assert mine["loud"] is loud and (mine["quiet"] is None) is (quiet is None)
    assert not (for_ is not None and until is not None)  # both at once is refused
    if mine["ends_at"] is not None:
        assert before + 900 <= mine["ends_at"] <= time.time() + 366 * 86_400
        assert mine["fire_at"] is None or mine["fire_at"] < mine["ends_at"]


@settings(max_examples=150, deadline=None)
@given(start=st.integers(0, 23 * 60 + 59), length=st.integers(1, 24 * 60 - 1))
def test_a_well_formed_quiet_window_is_stored_as_written(start: int, length: int) -> None:
    end = (start + length) % (24 * 60)
    window = f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}"
    with fresh_home() as home:
        result = check(home, ["heartbeat", "set", "-s", SESSIONS[1], "--quiet", window, "10m", "watch"])
        assert result.exit_code == 0, result.output
        listed = json.loads(invoke(home, ["heartbeat", "list", "--json"]).output)
    [mine] = [h for h in listed if h["session"] == SESSIONS[1]]
    assert mine["quiet"] == window and mine["fire_at"] >= mine["next_fire"]


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(st.sampled_from(["--quiet", "--for", "--until", "--loud", "--", "--quiet=", "--for=", "--x"]), max_size=3),
    values=st.lists(st.one_of(QUIET_TEXT, FOR_TEXT, UNTIL_TEXT), max_size=3),
    interval=st.sampled_from(["15m", "1s", "-5m", "", "1d"]),
    prompt=nasty_text(20),
)
def test_the_slash_parser_answers_every_option_string_with_a_command_or_a_rule(
    before: list[str], values: list[str], interval: str, prompt: str
) -> None:
    words = [w for pair in zip(before, values) for w in pair] + before[len(values):]
    text = " ".join(["every", *words, interval, prompt])
    with bounded(5.0):
        try:
            command = parse_command(text, "Europe/Berlin", time.time())
        except HeartbeatInputError as exc:
            assert str(exc) and "\n" not in str(exc) and "Traceback" not in str(exc)
            return
    assert command.action == "every" and command.prompt and command.interval
