"""Shared pieces of the CLI fuzz tests: a seeded profile copied fresh for every example, the
real ``vigil`` command run in-process under a time bound, and the outcome every case must
have (exit 0, or one clear error line and nothing changed)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

from click.testing import CliRunner, Result
from hypothesis import strategies as st

from tests.cli.helpers import is_clear_error, state_digest
from vigil.cli.main import cli
from vigil.store import NewMessage, SQLiteStore

# Two sessions that share the prefix "abc1" (so "abc1" is ambiguous), one more, a cron job
# and a heartbeat: enough for references, prefixes, runs and heartbeats to mean something.
SESSIONS = ("abc100000001", "abc100000002", "def200000001")
JOB = "daily"
BOUND_SECONDS = 20.0
"""No single command may take longer than this (a hang fails the example)."""


class Hang(AssertionError):
    """A command ran past :data:`BOUND_SECONDS`."""


@contextlib.contextmanager
def bounded(seconds: float = BOUND_SECONDS) -> Iterator[None]:
    """Fail with :class:`Hang` if the block runs longer than ``seconds`` (SIGALRM interrupts
    pure-Python loops too, so a parser spinning forever is caught, not waited for)."""

    def on_alarm(_signum: int, _frame: object) -> None:
        raise Hang(f"the command ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@functools.lru_cache(maxsize=1)
def template_home() -> Path:
    """The seeded profile home, built once per test process; copy it, never use it directly."""
    root = Path(tempfile.mkdtemp(prefix="vigil-fuzz-template-"))
    atexit.register(shutil.rmtree, root, True)
    home = root / "home"
    home.mkdir()
    store = SQLiteStore(home / "state.db")
    try:
        for index, session_id in enumerate(SESSIONS):
            store.create_session(source="cli", title=f"conversation {index}", session_id=session_id)
            store.append_message(session_id, NewMessage("user", f"first message {index}"))
            store.append_message(session_id, NewMessage("assistant", f"answer {index}"))
    finally:
        store.close()
    for args in (
        ["cron", "add", JOB, "--schedule", "every 1d", "--prompt", "write the report"],
        ["heartbeat", "set", "-s", SESSIONS[2], "15m", "check the CI run"],
    ):
        result = invoke(home, args)
        assert result.exit_code == 0, result.output
    return home


@contextlib.contextmanager
def fresh_home() -> Iterator[Path]:
    """A private copy of the seeded profile home for one example."""
    where = Path(tempfile.mkdtemp(prefix="vigil-fuzz-"))
    home = where / "home"
    shutil.copytree(template_home(), home)
    try:
        yield home
    finally:
        shutil.rmtree(where, ignore_errors=True)


def invoke(home: Path, args: Sequence[str], env: dict[str, str] | None = None, *, color: bool = False) -> Result:
    """``vigil ARGS`` in-process against ``home``, bounded in time, exceptions caught;
    ``color`` keeps escape sequences in the output (as a terminal would receive them)."""
    with bounded():
        return CliRunner().invoke(cli, list(args), env={"VIGIL_HOME": str(home), **(env or {})}, color=color)


def raw_control_characters(text: str) -> set[str]:
    """Control characters other than newline that ``text`` would send to a terminal."""
    return {ch for ch in text if (ord(ch) < 0x20 and ch != "\n") or 0x7F <= ord(ch) <= 0x9F}


def check(home: Path, args: Sequence[str], env: dict[str, str] | None = None) -> Result:
    """Run ``vigil ARGS`` and assert the outcome every input must have: exit code 0, or a
    clear one-line error with the profile's store and files exactly as they were."""
    before = state_digest(home)
    result = invoke(home, args, env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"vigil {list(args)!r} raised {result.exception!r}\n{result.output}") from result.exception
    if result.exit_code != 0:
        assert is_clear_error(result), f"vigil {list(args)!r} gave an unclear error:\n{result.output}"
        assert state_digest(home) == before, f"vigil {list(args)!r} was refused but changed the profile"
    return result


# -- strategies ----------------------------------------------------------------------------
SURROGATE_ESCAPES = st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)
NON_ASCII_DIGITS = st.characters(categories=["Nd"]).filter(lambda ch: not ch.isascii())
CONTROL = st.characters(categories=["Cc"])
MARKUP = st.sampled_from(["[bold]", "[/bold]", "[/]", "[link=file:///etc]", "\\[", "\\", "[red]", "[", "]", "%s", "{}"])
SPECIAL = st.sampled_from(["", " ", "  ", "-", "--", "-n", "0", "-1", "1e9", "١٥", "１５", "\t", "\n", "'", '"', "\x00"])


def nasty_text(max_size: int = 30) -> st.SearchStrategy[str]:
    """Arbitrary text biased towards what breaks command lines: undecodable bytes (surrogate
    escapes), non-ASCII digits, control characters, rich markup, quotes and dashes. NUL is
    left out: no shell can pass it in an argument."""
    piece = st.one_of(
        st.text(max_size=8),
        SURROGATE_ESCAPES,
        NON_ASCII_DIGITS,
        CONTROL,
        MARKUP,
        SPECIAL,
        st.integers().map(str),
    )
    return st.lists(piece, max_size=6).map(lambda parts: "".join(parts).replace("\x00", "")[:max_size])


def number_text() -> st.SearchStrategy[str]:
    """Text for a numeric option: plain, huge, negative, signed, padded, non-ASCII, float."""
    return st.one_of(
        st.integers(min_value=-(10**6), max_value=10**6).map(str),
        st.integers(min_value=0, max_value=10**30).map(str),
        st.integers(min_value=20, max_value=6000).map(lambda n: "9" * n),
        st.text(NON_ASCII_DIGITS, min_size=1, max_size=4),
        st.sampled_from(["", " 5", "5 ", "+5", "-0", "007", "1_000", "1e3", "5.0", "0x10", "inf", "nan", "٣", "１２"]),
        nasty_text(10),
    )
