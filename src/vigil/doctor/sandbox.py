"""The sandbox every terminal command runs in: bubblewrap able to run here, who is sandboxed in
which channel, what stays hidden, and whether the sandbox has a network."""

from __future__ import annotations

from pathlib import Path

from vigil import platforms as registry
from vigil.doctor.result import NEEDS_CONFIG, CheckResult, Subject, ok, problem, skipped, warning

AREA = "sandbox"
USERNS_FIX = (
    "allow unprivileged user namespaces, e.g. sudo sysctl -w kernel.unprivileged_userns_clone=1 "
    "(Ubuntu 24.04: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0), "
    "or in a container run it with the privileges bubblewrap needs"
)
ATTENDED = ("attended channels (the REPL, -q in a terminal, "
            f"{registry.titles(where=lambda platform: platform.capabilities.buttons)})")
UNATTENDED = "unattended runs (cron jobs, heartbeats, -q without a terminal)"


def check_sandbox(subject: Subject) -> list[CheckResult]:
    if subject.settings is None:
        return [skipped(AREA, "bubblewrap", NEEDS_CONFIG)]
    terminal = subject.settings.tools.terminal
    mode = terminal.sandbox
    from vigil.tools.sandbox import INSTALL_HINT, status

    found = status()  # runs `true` in a trial sandbox, bounded by the module's own timeout
    results: list[CheckResult] = []
    if mode == "never":
        results.append(ok(AREA, "bubblewrap", "not used: tools.terminal.sandbox is never"))
    elif found.available:
        results.append(ok(AREA, "bubblewrap", f"{found.bwrap} runs a trial sandbox"))
    else:
        # Without it unattended runs cannot run commands at all, and attended ones ask each time.
        fix = f"sudo {INSTALL_HINT}" if found.bwrap is None else USERNS_FIX
        results.append(problem(AREA, "bubblewrap", found.line(mode), fix))
    results += _channels(mode, found.available)
    if mode != "never":
        results.append(_hidden(subject))
        if found.available:
            results.append(_network(terminal.network, tuple(terminal.local_ports)))
    return results


def _channels(mode: str, available: bool) -> list[CheckResult]:
    back = "set tools.terminal.sandbox always: vigil config set tools.terminal.sandbox always"
    if mode == "never":
        return [
            warning(AREA, "attended", f"{ATTENDED}: commands run unsandboxed, under the command policy alone", back),
            warning(AREA, "unattended", f"{UNATTENDED}: commands run unsandboxed, dangerous ones are refused", back),
        ]
    if not available:
        return [
            warning(AREA, "attended", f"{ATTENDED}: no sandbox, so every command asks for approval first"),
            problem(AREA, "unattended", f"{UNATTENDED}: no sandbox, so they cannot run terminal commands"),
        ]
    unattended = ok(AREA, "unattended", f"{UNATTENDED}: every command sandboxed; nothing leaves the sandbox")
    if mode == "unattended":
        return [
            warning(AREA, "attended", f"{ATTENDED}: commands run unsandboxed (tools.terminal.sandbox is "
                    "unattended); dangerous ones ask first", back),
            unattended,
        ]
    return [
        ok(AREA, "attended", f"{ATTENDED}: every command sandboxed; leaving the sandbox (a dangerous command, "
           "or one it blocked) asks for approval"),
        unattended,
    ]


def _hidden(subject: Subject) -> CheckResult:
    from vigil.tools.boundary import boundary_for

    assert subject.settings is not None
    boundary = boundary_for(subject.profile, subject.settings, subject.profile.workspaces_dir / "doctor")
    home = Path.home()
    secrets = [_shown(path, home) for path in boundary.existing_secrets()]
    homes = ", ".join(str(path) for path in boundary.homes)
    found = f"; the user's secrets present here: {', '.join(secrets)}" if secrets else ""
    return ok(AREA, "hidden", f"from commands and the file tools: vigil's homes ({homes}), all but the run's "
              f"own workspace{found}; tools.terminal.hide adds more")


def _network(enabled: bool, local_ports: tuple[int, ...]) -> CheckResult:
    if not enabled:
        return ok(AREA, "network", "off (tools.terminal.network is false): only a private loopback")
    from vigil.tools import sandbox_network

    entry = sandbox_network.status(local_ports)
    ports = ", ".join(str(port) for port in local_ports) or "none (tools.terminal.local_ports)"
    if entry.prefix is None:
        return warning(AREA, "network", f"unavailable, so sandboxed commands have no network: {entry.problem}",
                       "sudo apt-get install passt")
    return ok(AREA, "network", f"the outside world through user-mode networking (pasta); this machine's "
              f"loopback services are closed except local ports: {ports}")


def _shown(path: Path, home: Path) -> str:
    return f"~/{path.relative_to(home)}" if home in path.parents else str(path)
