"""Output piped into a reader that stops early (``vigil sessions list | head``) ends quietly:
exit code 0, nothing on stderr, no traceback. Real processes, real pipes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli
from vigil.store import NewMessage, SQLiteStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

SESSION = "ddd444000001"


@pytest.fixture
def home(vigil_home: Path) -> Path:
    """A profile with a session worth printing and a cron job with a run log."""
    vigil_home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(vigil_home / "state.db")
    try:
        store.create_session(source="cli", title="pines", session_id=SESSION)
        for n in range(3):
            store.append_message(SESSION, NewMessage("user", f"pine cones, round {n}"))
    finally:
        store.close()
    assert run_cli("cron", "add", "pulse", "-s", "every 2h", "--prompt", "Check").exit_code == 0
    return vigil_home


def _run_into_closed_pipe(args: list[str], home: Path) -> tuple[int, str]:
    """Run ``vigil ARGS`` with stdout a pipe whose reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left: every write to the pipe fails with EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "vigil.cli.main", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env={**os.environ, "VIGIL_HOME": str(home)},
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr


PRINTING = [
    ["sessions", "list"],
    ["sessions", "list", "--json"],
    ["sessions", "show", SESSION],
    ["sessions", "show", SESSION, "--json"],
    ["sessions", "search", "pine"],
    ["sessions", "export", SESSION],
    ["cron", "list"],
    ["cron", "runs"],
    ["usage"],
    ["usage", "--json"],
    ["config", "show"],
    ["profile", "list"],
    ["heartbeat", "list"],
    ["--help"],
]


@pytest.mark.parametrize("args", PRINTING, ids=" ".join)
def test_a_reader_gone_before_the_output_ends_quietly(home: Path, args: list[str]) -> None:
    code, stderr = _run_into_closed_pipe(args, home)
    assert (code, stderr) == (0, "")


def test_head_reading_one_line_of_a_long_listing(home: Path) -> None:
    store = SQLiteStore(home / "state.db")
    try:
        for n in range(1500):  # well over a pipe's buffer (64 KiB on Linux) of output
            store.create_session(source="cli", title=f"conversation number {n} about pine trees")
    finally:
        store.close()
    vigil = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "sessions", "list", "-n", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "VIGIL_HOME": str(home)},
    )
    assert vigil.stdout is not None and vigil.stderr is not None
    head = subprocess.run(["head", "-n", "1"], stdin=vigil.stdout, capture_output=True, timeout=60)
    vigil.stdout.close()  # only head holds the read end now; it has left
    stderr = vigil.stderr.read()
    assert vigil.wait(timeout=60) == 0
    assert stderr == b""
    assert head.stdout.split() == [b"id", b"last", b"active", b"source", b"msgs", b"title"]
