"""Fuzz: ``/heartbeat`` and ``/hb`` typed into the real REPL (``vigil chat`` in a pseudo-terminal).

One REPL process serves every example of a test: each example types a slash command, then a
sentinel command (``/title``) whose answer marks the end of the first one's output. A command
the parser refuses must answer with its rule and usage and leave the profile unchanged; no
command may escape into the REPL's catch-all ("Error: ...") or print a traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pexpect
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.helpers import state_digest
from tests.fuzz.cli_helpers import NON_ASCII_DIGITS, SESSIONS, template_home
from vigil.runtime.heartbeat_commands import HeartbeatInputError, parse_command
from vigil.schedule.heartbeat.lease import HOLDER_PREFIX
from vigil.testing.fake_model import FakeModelServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

def store_digest(home: Path) -> str:
    """The profile's content apart from the REPL history, which records every typed line, and
    the REPL's heartbeat lease renewals, which run on a timer whatever is typed."""
    return state_digest(home, ignore=("repl_history",), skip_rows=(f"'{HOLDER_PREFIX}",))


SENTINEL = re.compile(r"Title: conversation 0")
PROMPT = "you ›"


class ReplDriver:
    """A running ``vigil chat --resume`` whose lines are typed one command at a time."""

    def __init__(self, home: Path, model: FakeModelServer) -> None:
        self.home = home
        env = {
            **os.environ,
            "VIGIL_HOME": str(home),
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": model.api_key,
            "TERM": "dumb",
        }
        self.child = pexpect.spawn(
            sys.executable, ["-m", "vigil.cli.main", "chat", "--resume", SESSIONS[0]],
            env=env, encoding="utf-8", codec_errors="replace", timeout=20, dimensions=(40, 400),
        )
        self.child.expect(PROMPT)

    def command(self, line: str) -> str:
        """Type ``line`` and return everything the REPL printed until it was done with it."""
        self.child.sendline(line)
        self.child.sendline("/title")
        self.child.expect(SENTINEL)
        output = self.child.before
        self.child.expect(PROMPT)
        return output

    def close(self) -> None:
        self.child.sendline("/quit")
        self.child.expect(pexpect.EOF)
        self.child.close(force=True)


@pytest.fixture(scope="module")
def repl() -> Iterator[ReplDriver]:
    where = Path(tempfile.mkdtemp(prefix="vigil-fuzz-repl-"))
    home = where / "home"
    shutil.copytree(template_home(), home)
    with FakeModelServer() as model:
        driver = ReplDriver(home, model)
        try:
            yield driver
        finally:
            driver.close()
    shutil.rmtree(where, ignore_errors=True)


# What a terminal can type: printable text (control keys are editing commands, not text).
TYPED = st.characters(categories=["L", "M", "N", "P", "S", "Zs"], exclude_characters="›")
WORD = st.one_of(
    st.text(TYPED, max_size=8),
    st.sampled_from(["every", "EVERY", "status", "pause", "resume", "clear", "15m", "1h30m", "-5m", "0s", "59s",
                     "1d", "366d", "١٥m", "１５m", "[bold]", "[/]", "\\", "''", "--", "-s"]),
    st.sampled_from(["--quiet", "22:00-07:00", "24:00-01:00", "7:00-7:00", "--quiet=1:00-2:00", "--for", "3d",
                     "--for=10s", "--until", "2031-01-01", "2020-01-01", "--until=2099-12-31", "--loud", "--loud=1",
                     "--quite"]),
    st.text(NON_ASCII_DIGITS, min_size=1, max_size=2).map(lambda d: d + "m"),
    st.integers(min_value=-(10**30), max_value=10**30).map(lambda n: f"{n}m"),
    st.integers(min_value=20, max_value=300).map(lambda n: "9" * n + "s"),  # typed key by key: keep it short
)
SLASH_TEXT = st.tuples(st.sampled_from(["/heartbeat", "/hb", "/HB"]), st.lists(WORD, max_size=5)).map(
    lambda parts: " ".join([parts[0], *parts[1]]).rstrip()
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=SLASH_TEXT)
def test_heartbeat_slash_commands_in_the_repl(repl: ReplDriver, line: str) -> None:
    before = store_digest(repl.home)
    output = repl.command(line)
    assert "Traceback" not in output and "Error:" not in output, output
    words = line.split()
    args = line.split(maxsplit=1)[1] if len(words) > 1 else ""
    try:
        parse_command(args)
        refused = False
    except HeartbeatInputError:
        refused = True
    if len(words) > 2 and words[1].lower() == "every" and not all(ch.isascii() for ch in words[2] if ch.isdigit()):
        assert refused, f"{line!r}: an interval with non-ASCII digits was accepted"
    if refused:
        assert "Usage: /heartbeat every" in output, output
        assert store_digest(repl.home) == before, f"{line!r} was refused but changed the profile"


def test_undecodable_bytes_typed_into_the_repl_change_nothing(repl: ReplDriver) -> None:
    before = store_digest(repl.home)
    os.write(repl.child.child_fd, b"/hb every 15m watch \xff\xfe\r")
    repl.child.sendline("/title")
    repl.child.expect(SENTINEL)
    output = repl.child.before
    repl.child.expect(PROMPT)
    assert "Traceback" not in output and "Error:" not in output, output
    # Either the terminal layer replaced the bytes (the heartbeat is set with U+FFFD) or the
    # command was refused; the store must never hold an undecodable character.
    if store_digest(repl.home) != before:
        assert "Heartbeat set" in output
