"""Running the real ``vigil`` command in-process and as a subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from vigil.cli.main import cli


def run_cli(*args: str, input: str | None = None) -> Result:
    """Invoke ``vigil ARGS`` in-process (environment and VIGIL_HOME as the test set them)."""
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def run_vigil(*args: str, home: Path, env: dict[str, str] | None = None, timeout: float = 60):
    """Run the installed ``vigil`` entry point in a separate process."""
    full_env = {**os.environ, "VIGIL_HOME": str(home), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def state_digest(home: Path, *, ignore: tuple[str, ...] = (), skip_rows: tuple[str, ...] = ()) -> str:
    """A digest of everything a profile home holds: every row of every table of ``state.db``
    (read through SQLite, so a WAL checkpoint does not count as a change) and the bytes of
    every other file except those named in ``ignore``; rows whose SQL text contains one of
    ``skip_rows`` are left out. Equal digests before and after a command mean it changed
    nothing."""
    digest = hashlib.sha256()
    for path in sorted(home.rglob("*")) if home.exists() else []:
        relative = path.relative_to(home).as_posix()
        if path.name in ("state.db-wal", "state.db-shm", "state.db-journal", *ignore) or path.is_dir():
            continue
        digest.update(relative.encode() + b"\0")
        if path.name == "state.db":
            connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                for line in connection.iterdump():
                    if not any(marker in line for marker in skip_rows):
                        digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
            finally:
                connection.close()
        else:
            digest.update(path.read_bytes())
    return digest.hexdigest()


def is_clear_error(result: Result) -> bool:
    """A refusal a person can read: a non-zero exit, no exception escaping the command, no
    traceback, and exactly one ``Error:`` line (click's usage lines may come before it), or,
    for a command given ``--json``, exactly one JSON error object."""
    if result.exit_code == 0:
        return False
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return False
    lines = result.output.splitlines()
    if "Traceback" in result.output:
        return False
    if lines and lines[0].startswith('{"error": '):  # a command given --json reports errors as JSON
        return len(lines) == 1 and set(json.loads(lines[0])["error"]) == {"kind", "message"}
    return sum(line.startswith("Error:") for line in lines) == 1


CPR_REQUEST = "\x1b[6n"
"""prompt_toolkit's cursor position request; a real terminal answers it."""


def expect_in_terminal(child: Any, pattern: str) -> None:
    """``child.expect(pattern)`` on a pexpect child, answering prompt_toolkit's cursor position
    requests on the way as a terminal would (it draws the bottom toolbar only once it knows
    where the cursor is). The child's ``timeout`` bounds the whole wait: a REPL that keeps
    redrawing (a countdown) without ever showing ``pattern`` fails instead of hanging."""
    import time

    import pexpect

    # One expect for both, so whichever comes first in the output is taken: answering the
    # requests first would skip over a pattern already printed before the next request.
    deadline = time.monotonic() + (child.timeout or 30)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise pexpect.TIMEOUT(f"{pattern!r} did not appear within {child.timeout} s")
        if child.expect([re.escape(CPR_REQUEST), pattern], timeout=remaining) == 1:
            return
        child.send("\x1b[1;1R")
