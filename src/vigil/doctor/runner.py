"""Runs every check, each under a time bound, and never lets one failure hide the others."""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Mapping

from vigil.doctor.result import CheckResult, Subject, ok, problem
from vigil.profiles import DEFAULT_PROFILE, Profile, ProfileError, profile_path

DEADLINE_SECONDS = 20.0
"""The longest any one area may take; each has shorter timeouts of its own (connecting to a
server 3 s, the model endpoint 5 s, the sandbox trial 10 s), so this only catches a hang."""

Check = Callable[[Subject], list[CheckResult]]


def _areas() -> list[tuple[str, Check]]:
    from vigil.doctor.gateway import check_gateway
    from vigil.doctor.mcp import check_mcp
    from vigil.doctor.model import check_model
    from vigil.doctor.platforms import check_platforms
    from vigil.doctor.sandbox import check_sandbox
    from vigil.doctor.store import check_store

    return [
        ("store", check_store),
        ("platforms", check_platforms),
        ("sandbox", check_sandbox),
        ("model", check_model),
        ("gateway", check_gateway),
        ("mcp", check_mcp),
    ]


def find_profile(name: str | None) -> Profile:
    """The profile to check, without creating anything (the default one may not exist yet);
    ``ProfileError`` for a named profile that does not exist."""
    profile = profile_path(name)
    if profile.name != DEFAULT_PROFILE and not profile.exists:
        raise ProfileError(
            f"profile '{profile.name}' does not exist (create it with `vigil profile create {profile.name}`)"
        )
    return profile


def run_checks(profile: Profile, env: Mapping[str, str] = os.environ) -> list[CheckResult]:
    """Every check for ``profile``, in a fixed order. Reads only: nothing is created, written
    or migrated. The areas after config.yaml run side by side, each within
    :data:`DEADLINE_SECONDS`."""
    results = [_home(profile)]
    try:
        from vigil.doctor.config_file import check_config

        found, settings = check_config(profile)
    except Exception as exc:  # whatever the file holds, doctor reports instead of failing
        found, settings = [problem("config", "config.yaml", _failed(exc), "vigil config show")], None
    results += found
    subject = Subject(profile, settings, env)
    _preload()
    slots: dict[str, list[CheckResult]] = {}
    threads = []
    for area, check in _areas():
        thread = threading.Thread(
            target=_run_into, args=(slots, area, check, subject), name=f"doctor {area}", daemon=True
        )
        thread.start()
        threads.append((area, thread))
    deadline = time.monotonic() + DEADLINE_SECONDS
    for area, thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if area in slots:
            results += slots[area]
        else:
            # A daemon thread: a check stuck in a system call cannot keep the process alive.
            results.append(problem(area, area, f"the check did not finish within {DEADLINE_SECONDS:g} s"))
    return results


_OWN_MODULES = (
    "vigil.store.sqlite.migrations",
    "vigil.store.sqlite.meta",
    "vigil.models.factory",
    "vigil.models.local_engine",
    "vigil.tools.sandbox",
    "vigil.tools.mcp.probe",
    "vigil.tools.mcp.launch",
    "vigil.gateway.lock",
    "vigil.gateway.status",
    "vigil.gateway.token",
)


def _preload() -> None:
    """Import vigil's own modules the checks use before the threads start: two threads
    entering one circle of imports at different points can each find the other's module
    half made. (Third-party SDKs are each imported by one check only.)"""
    import importlib

    for name in _OWN_MODULES:
        importlib.import_module(name)


def _run_into(slots: dict[str, list[CheckResult]], area: str, check: Check, subject: Subject) -> None:
    try:
        slots[area] = check(subject)
    except Exception as exc:  # one broken check must not hide the others
        slots[area] = [problem(area, area, _failed(exc))]


def _failed(exc: BaseException) -> str:
    from vigil.masking import printable

    return f"the check failed: {type(exc).__name__}: {printable(' '.join(str(exc).split()), 300)}"


def _home(profile: Profile) -> CheckResult:
    if not profile.home.is_dir():
        if profile.home.exists() or profile.home.is_symlink():
            return problem("config", "profile", f"{profile.home} is not a directory", "move it aside")
        return ok(
            "config",
            "profile",
            f"'{profile.name}': {profile.home} does not exist yet (the first command creates it)",
        )
    return ok("config", "profile", f"'{profile.name}' at {profile.home}")
