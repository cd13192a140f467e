"""config.yaml: readable and valid (the same validation every command applies)."""

from __future__ import annotations

import os
import shlex
import stat

from vigil.config.settings import Settings, load_settings
from vigil.config.errors import ConfigError
from vigil.doctor.result import CheckResult, ok, problem, warning
from vigil.masking import printable
from vigil.profiles import Profile

AREA = "config"


def check_config(profile: Profile) -> tuple[list[CheckResult], Settings | None]:
    """The config's results and its settings (``None`` when it cannot be used)."""
    path = profile.config_path
    try:
        settings = load_settings(path)
    except ConfigError as exc:
        return [
            problem(
                AREA,
                "config.yaml",
                printable(" ".join(str(exc).split()), 500),
                f"correct the line named, then check with `vigil config show` (file: {shlex.quote(str(path))})",
            )
        ], None
    if not path.exists():
        return [ok(AREA, "config.yaml", f"{path} does not exist: every setting has its default")], settings
    results = [ok(AREA, "config.yaml", f"{path} is valid")]
    if settings.model.api_key:
        results.append(_private(path))
    return results, settings


def _private(path: os.PathLike[str]) -> CheckResult:
    """config.yaml holds an API key: it must not be readable by anyone else."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        return warning(
            AREA,
            "config.yaml permissions",
            f"it holds model.api_key and is readable by others (mode {mode:04o})",
            f"chmod 600 {shlex.quote(str(path))}   (or move the key to an environment variable: model.api_key_env)",
        )
    return ok(AREA, "config.yaml permissions", f"private (mode {mode:04o}); it holds model.api_key")
