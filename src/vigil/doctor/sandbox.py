"""The bubblewrap sandbox for unattended terminal commands: installed, and able to run here."""

from __future__ import annotations

from vigil.doctor.result import NEEDS_CONFIG, CheckResult, Subject, ok, problem, skipped, warning

AREA = "sandbox"
USERNS_FIX = (
    "allow unprivileged user namespaces, e.g. sudo sysctl -w kernel.unprivileged_userns_clone=1 "
    "(Ubuntu 24.04: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0), "
    "or in a container run it with the privileges bubblewrap needs"
)


def check_sandbox(subject: Subject) -> list[CheckResult]:
    if subject.settings is None:
        return [skipped(AREA, "bubblewrap", NEEDS_CONFIG)]
    mode = subject.settings.tools.terminal.sandbox
    if mode == "never":
        return [ok(AREA, "bubblewrap", "not used: tools.terminal.sandbox is never")]
    from vigil.tools.sandbox import INSTALL_HINT, status

    found = status()  # runs `true` in a trial sandbox, bounded by the module's own timeout
    if found.available:
        return [ok(AREA, "bubblewrap", f"{found.bwrap} runs a trial sandbox")]
    # vigil still runs commands, under the command policy alone; with `always` the user asked
    # for more than they get.
    report = problem if mode == "always" else warning
    if found.bwrap is None:
        return [report(AREA, "bubblewrap", found.line(mode), f"sudo {INSTALL_HINT}")]
    return [report(AREA, "bubblewrap", found.line(mode), USERNS_FIX)]
