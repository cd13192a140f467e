"""What a doctor check reports, and what every check is given."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Mapping

if TYPE_CHECKING:
    from vigil.config.settings import Settings
    from vigil.profiles import Profile

Status = Literal["ok", "warning", "problem", "skipped"]
STATUSES: tuple[Status, ...] = ("ok", "warning", "problem", "skipped")
"""``skipped``: the check could not run because something it needs is broken (said in ``detail``)."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One line of ``vigil doctor``: which check, how it went, and what to do about it.

    ``detail`` says what was found; ``fix`` (for a warning or a problem) says what to do,
    a command to copy where there is one. Neither ever holds a secret's value.
    """

    area: str
    """The part of vigil checked: config, store, platforms, sandbox, model, gateway, mcp."""
    name: str
    status: Status
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "area": self.area,
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix,
        }


def ok(area: str, name: str, detail: str) -> CheckResult:
    return CheckResult(area, name, "ok", detail)


def warning(area: str, name: str, detail: str, fix: str | None = None) -> CheckResult:
    return CheckResult(area, name, "warning", detail, fix)


def problem(area: str, name: str, detail: str, fix: str | None = None) -> CheckResult:
    return CheckResult(area, name, "problem", detail, fix)


def skipped(area: str, name: str, detail: str) -> CheckResult:
    return CheckResult(area, name, "skipped", detail)


@dataclass(frozen=True, slots=True)
class Subject:
    """What the checks look at: the profile, its settings (``None`` when config.yaml is
    broken) and the environment (read for names and presence, never printed)."""

    profile: Profile
    settings: Settings | None
    env: Mapping[str, str] = field(repr=False)


NEEDS_CONFIG = "skipped: config.yaml is broken (see above)"
"""The detail of a check that needs the settings when config.yaml cannot be read."""
