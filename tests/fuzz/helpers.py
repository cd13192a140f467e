"""What every fuzz case checks: the real CLI answers with success or one clear line, and a
refusal leaves the profile's files exactly as they were."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from click.testing import CliRunner, Result

from vigil.cli.main import cli

Snapshot = dict[str, tuple[str, bytes | None, int]]


def invoke(home: Path, *args: str) -> Result:
    """``vigil ARGS`` in-process with ``VIGIL_HOME=home``; exceptions are kept, not raised."""
    return CliRunner().invoke(cli, list(args), env={"VIGIL_HOME": str(home)}, catch_exceptions=True)


def run(home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, str]:
    """``vigil ARGS`` in a subprocess, for cases where a bug would hang; a hang fails the case."""
    full_env = {**os.environ, "VIGIL_HOME": str(home), **(env or {})}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "vigil.cli.main", *args],
            env=full_env,
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"`vigil {' '.join(args)}` hung for more than {timeout} s") from None
    return done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")


def assert_clean(exit_code: int, output: str, exception: BaseException | None = None) -> None:
    """Exit 0, exit 1 with one line starting ``Error:``, or a usage error (exit 2) whose last
    line starts with ``Error:``; never a traceback."""
    if exception is not None and not isinstance(exception, SystemExit):
        raise AssertionError(f"uncaught {type(exception).__name__}: {exception}\n{output}") from exception
    assert "Traceback" not in output, output
    assert exit_code in (0, 1, 2), (exit_code, output)
    lines = [line for line in output.strip().splitlines() if line.strip()]
    if exit_code == 1:
        assert len(lines) == 1 and lines[0].startswith("Error: "), output
    elif exit_code == 2:
        assert lines and lines[-1].startswith("Error: "), output


def assert_result(result: Result) -> None:
    assert_clean(result.exit_code, result.output, result.exception)


def snapshot(home: Path, names: Sequence[str] | None = None) -> Snapshot:
    """Kind, content and mtime of every entry in ``home`` (not following symlinks)."""
    taken: Snapshot = {}
    for entry in sorted(home.iterdir()) if home.is_dir() else []:
        if names is not None and entry.name not in names:
            continue
        info = entry.lstat()
        if stat.S_ISREG(info.st_mode):
            taken[entry.name] = ("file", entry.read_bytes(), info.st_mtime_ns)
        elif stat.S_ISLNK(info.st_mode):
            taken[entry.name] = ("link", os.readlink(entry).encode(), 0)
        else:
            taken[entry.name] = (stat.filemode(info.st_mode)[0], None, info.st_mtime_ns)
    return taken
