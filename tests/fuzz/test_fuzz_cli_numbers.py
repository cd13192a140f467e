"""Fuzz: every numeric option of the CLI, through the real ``vigil`` command.

A value is accepted exactly when it is written with ASCII digits (an optional sign) and lies
within the option's bounds; anything else is one clear error naming the rule or the limit,
and changes nothing.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.cli_helpers import JOB, SESSIONS, check, fresh_home, number_text

# (command line before the value, option, lowest, highest)
NUMERIC_OPTIONS = [
    (["sessions", "list"], "-n", 0, 100_000),
    (["sessions", "search", "message"], "--limit", 1, 10_000),
    (["usage"], "-n", 0, 100_000),
    (["cron", "runs"], "-n", 0, 100_000),
    (["cron", "edit", JOB], "--repeat", 0, 1_000_000),
    (["cron", "add", "fuzzed", "--schedule", "every 2h", "--prompt", "p"], "--repeat", 0, 1_000_000),
]

_ASCII_INTEGER = re.compile(r"[+-]?[0-9]+")


def _accepted(text: str, lowest: int, highest: int) -> bool:
    return bool(_ASCII_INTEGER.fullmatch(text)) and len(text) < 40 and lowest <= int(text) <= highest


@settings(max_examples=150, deadline=None)
@given(option=st.sampled_from(NUMERIC_OPTIONS), value=number_text())
def test_numeric_options_accept_exactly_bounded_ascii_integers(
    option: tuple[list[str], str, int, int], value: str
) -> None:
    prefix, flag, lowest, highest = option
    with fresh_home() as home:
        result = check(home, [*prefix, flag, value])
    if _accepted(value, lowest, highest):
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code != 0, f"{flag}={value!r} was accepted:\n{result.output}"
        error = result.output.strip().splitlines()[-1]
        assert len(error) < 400


@settings(max_examples=40, deadline=None)
@given(limit=st.integers(min_value=0, max_value=5))
def test_a_bounded_limit_shows_that_many(limit: int) -> None:
    with fresh_home() as home:
        result = check(home, ["sessions", "list", "-n", str(limit), "--json"])
    shown = result.output.count('"conversation_root"')
    assert shown == (len(SESSIONS) if limit == 0 else min(limit, len(SESSIONS)))
