"""Running the real ``vigil`` command in-process and as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
