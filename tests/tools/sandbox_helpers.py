"""Shared by the sandbox tests: skip cleanly where bubblewrap cannot run, and places outside
``/tmp`` (the sandbox's ``/tmp`` is private, so a write test there would prove nothing)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from vigil.tools import sandbox


def require_sandbox() -> str:
    """The bwrap path, or skip the test saying why the sandbox cannot run here."""
    found = sandbox.status()
    if found.bwrap is None:
        pytest.skip("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    if not found.available:
        pytest.skip(f"bubblewrap does not work on this machine: {found.problem}")
    return found.bwrap


def outside_tmp_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory that is writable outside the sandbox and not under ``/tmp``."""
    for base in ("/var/tmp", str(Path.home())):
        try:
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        except OSError:
            continue
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
        return
    pytest.skip("no writable directory outside /tmp (tried /var/tmp and $HOME)")
