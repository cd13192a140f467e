"""The messaging platforms enabled in config.yaml: their secrets are in the environment (only
the variables' names are ever shown), their SDK imports, and what else each platform checks
(every platform of the registry, :mod:`vigil.platforms`, with a config section of its own)."""

from __future__ import annotations

import importlib
from typing import Mapping

from vigil import platforms as registry
from vigil.doctor.result import NEEDS_CONFIG, CheckResult, Subject, ok, problem, skipped, warning

AREA = "platforms"


def check_platforms(subject: Subject) -> list[CheckResult]:
    settings = subject.settings
    if settings is None:
        return [skipped(AREA, "platforms", NEEDS_CONFIG)]
    own = [platform for platform in registry.platforms() if platform.section is not None]
    enabled = [platform for platform in own if platform.enabled(settings)]
    if not enabled:
        off = " and ".join(f"{platform.section}.enabled" for platform in own)
        return [ok(AREA, "platforms", f"none enabled ({off} {'is' if len(own) == 1 else 'are'} false)")]
    results: list[CheckResult] = []
    for platform in enabled:
        results.append(_secrets(platform.name, platform.secrets(settings), subject.env))
        if platform.sdk is not None:
            results.append(_sdk(platform.name, *platform.sdk))
        results += [problem(AREA, name, what, fix) for name, what, fix in platform.checks(settings)]
        results += [warning(AREA, name, what, fix) for name, what, fix in platform.warnings(settings)]
    return results


def _secrets(platform: str, names: list[str], env: Mapping[str, str]) -> CheckResult:
    missing = [name for name in names if not env.get(name, "").strip()]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        return problem(
            AREA,
            f"{platform} secrets",
            f"{platform} is enabled but {', '.join(missing)} {verb} not set in the environment",
            "; ".join(f"export {name}=..." for name in missing)
            + " (for the gateway's service too: `vigil gateway install --env-file` writes it into gateway.env)",
        )
    if not names:
        return ok(AREA, f"{platform} secrets", "none needed")
    return ok(AREA, f"{platform} secrets", f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} set")


def _sdk(platform: str, module: str, install: str) -> CheckResult:
    try:
        importlib.import_module(module)
    except Exception as exc:  # an ImportError, or a broken install failing while it loads
        return problem(
            AREA, f"{platform} SDK", f"{module} cannot be imported ({type(exc).__name__}: {exc})", install
        )
    return ok(AREA, f"{platform} SDK", f"{module} imports")
