"""The bubblewrap sandbox every terminal command runs in: the boundary of what the agent may do.

The command policy (``danger.check``) reads a command line, but it cannot see through an
interpreter (``python3 -c 'os.system(...)'``, ``perl -e``, a script written and then run). So
commands run inside `bubblewrap <https://github.com/containers/bubblewrap>`_, in every channel
by default (``tools.terminal.sandbox: always``); leaving it takes a person's approval
(:mod:`vigil.tools.terminal`), and unattended runs never leave it. Inside:

* the whole filesystem is read-only; only the run's workspace (the conversation's or the cron
  job's working directory, chosen by the user; not the ``workdir`` argument the model passes,
  which only says where the command starts) is writable, unless it is ``/``, which would make
  everything writable; ``/tmp`` is a private, empty tmpfs (``TMPDIR`` points there);
* what :mod:`vigil.tools.boundary` hides is hidden: every vigil home behind an empty read-only
  tmpfs (the workspace bound back on top where it lies inside one), the user's secrets
  (``~/.ssh``, ``~/.aws``, browser profiles ...: an empty folder, or a file that reads empty),
  the session database kept outside the home;
* ``/run`` is a private, empty tmpfs, so the sockets there (D-Bus, systemd, docker, database
  servers) are out of reach; ``/etc/resolv.conf`` keeps working when it points into ``/run``;
* ``/dev`` is minimal (null, zero, full, random, urandom, tty, pts, shm: no disks), ``/proc``
  shows only the sandbox's own processes;
* the command runs in new PID and IPC namespaces with no capabilities (even when vigil runs as
  root: otherwise root could simply remount ``/`` writable), in a new session so it cannot push
  keystrokes into a terminal (TIOCSTI), and the whole process tree ends with the run: background
  processes do not outlive the command, and a killed vigil (even SIGKILL) takes them along;
* its own network namespace: with ``tools.terminal.network`` it reaches the outside world
  through user-mode networking (:mod:`vigil.tools.sandbox_network`) but not the host's own
  loopback services (the gateway, the database, a local model server) except the ports in
  ``tools.terminal.local_ports``; without it, only a private loopback.

Known limits: unix sockets elsewhere on the read-only filesystem can still be connected to;
programs that write caches under ``$HOME`` (pip, npm) fail unless pointed into the workspace.

Where bubblewrap is missing or cannot run here (user namespaces disabled, a container without
the needed privileges), attended channels ask before every command and unattended runs refuse
to run any; vigil says so at ``vigil cron add``, when ``vigil gateway run`` starts, at
``vigil config set`` and in ``vigil doctor``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from vigil.config.settings import TerminalSettings
from vigil.tools.boundary import Boundary

log = logging.getLogger(__name__)

INSTALL_HINT = "apt-get install bubblewrap"
_PROBE_TIMEOUT = 10.0

_lock = threading.Lock()
_verdicts: dict[str, "SandboxStatus"] = {}
_warned = False


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """Whether commands can be sandboxed on this machine, and if not, why."""

    bwrap: str | None
    """The bubblewrap executable found on ``PATH``, or ``None``."""
    problem: str | None = None
    """Why it cannot be used (``None`` when it works)."""

    @property
    def available(self) -> bool:
        return self.bwrap is not None and self.problem is None

    def line(self, mode: str = "always") -> str:
        """One human line for a status display, given ``tools.terminal.sandbox``."""
        if mode == "never":
            return "sandbox: off (tools.terminal.sandbox is never); terminal commands run unsandboxed"
        if self.available:
            if mode == "unattended":
                return (f"sandbox: unattended terminal commands run in bubblewrap ({self.bwrap}); "
                        "attended ones run unsandboxed (tools.terminal.sandbox is unattended)")
            return f"sandbox: every terminal command runs in bubblewrap ({self.bwrap})"
        return f"sandbox: unavailable, {self._why()}; {self._consequence(mode)}"

    def warning(self, mode: str) -> str | None:
        """The warning to show once where it matters, or ``None`` when there is nothing to say."""
        if self.available or mode == "never":
            return None
        return f"warning: {self._why()}, so there is no sandbox: {self._consequence(mode)}"

    def _consequence(self, mode: str) -> str:
        unattended = "unattended runs (cron jobs, heartbeats, -q without a terminal) cannot run terminal commands"
        if mode == "unattended":
            return unattended
        return f"attended channels ask before every terminal command and {unattended}"

    def _why(self) -> str:
        if self.bwrap is None:
            return f"bubblewrap (bwrap) is not installed ({INSTALL_HINT})"
        return f"bubblewrap ({self.bwrap}) does not work here: {self.problem}"


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The run wants a sandbox and this machine cannot make one: ``why``, in words."""

    why: str


def wanted(mode: str, unattended: bool) -> bool:
    """Whether ``tools.terminal.sandbox`` = ``mode`` asks for a sandbox in this run."""
    return mode == "always" or (mode == "unattended" and unattended)


def status() -> SandboxStatus:
    """Find bwrap on ``PATH`` and check, once per process and executable, that it really runs."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxStatus(None)
    with _lock:
        verdict = _verdicts.get(bwrap)
        if verdict is None:
            verdict = _verdicts[bwrap] = SandboxStatus(bwrap, _probe(bwrap))
    return verdict


def _probe(bwrap: str) -> str | None:
    """Run ``true`` in a sandbox built like the real ones; the problem, or ``None`` if it worked."""
    with tempfile.TemporaryDirectory(prefix="vigil-sandbox-probe-") as workdir:
        boundary = Boundary(Path(workdir), homes=(), secrets=())
        argv = Sandbox(bwrap, boundary, network=False).argv(["true"])
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_PROBE_TIMEOUT
            )
        except subprocess.TimeoutExpired:
            return f"a trial run did not finish within {_PROBE_TIMEOUT:g}s"
        except OSError as exc:
            return f"cannot be started ({exc.strerror or exc})"
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return lines[0] if lines else f"a trial run exited with code {done.returncode}"


def for_run(
    settings: TerminalSettings,
    *,
    unattended: bool,
    boundary: Boundary,
    start_in: Path | None = None,
) -> "Sandbox | Unavailable | None":
    """Where a command of this run goes: into a :class:`Sandbox`; :class:`Unavailable` when
    the run wants one and bubblewrap cannot make it (the caller asks a person, or refuses);
    ``None`` when ``tools.terminal.sandbox`` does not ask for one in this run.

    ``boundary`` holds the run's workspace (chosen by the user), the one folder the command may
    change; ``start_in`` is where it starts (the tool's ``workdir`` argument, chosen by the
    model, which therefore does not make anything writable)."""
    if not wanted(settings.sandbox, unattended):
        return None
    found = status()
    if not found.available:
        _warn_once(found, settings.sandbox)
        return Unavailable(found._why())
    assert found.bwrap is not None
    prefix: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    network = settings.network
    if network:
        from vigil.tools import sandbox_network

        entry = sandbox_network.network_prefix(settings.local_ports)
        if entry.prefix is None:
            # Without user-mode networking the only safe network is none: the host's would
            # open its loopback services.
            _warn_network_once(entry.problem)
            network = False
        else:
            prefix, extra = entry.prefix, entry.bwrap_args
    return Sandbox(found.bwrap, boundary, start_in, network, prefix, extra)


def _warn_once(found: SandboxStatus, mode: str) -> None:
    global _warned
    with _lock:
        if _warned:
            return
        _warned = True
    # Said once where people look (cron add, gateway start, config set, doctor); here for the log.
    log.warning("%s", found.warning(mode))


_network_warned = False


def _warn_network_once(problem: str | None) -> None:
    global _network_warned
    with _lock:
        if _network_warned:
            return
        _network_warned = True
    log.warning("sandboxed commands run without a network: %s", problem)


def _own_code_under_tmp() -> list[str]:
    """vigil's own Python environment and code, when they live under ``/tmp`` (a checkout or a
    venv made there), bound back read-only over the private ``/tmp``: without them a sandboxed
    ``python`` of that venv, or an MCP server installed in it, would not exist inside."""
    found: list[str] = []
    for path in sorted({_real(Path(sys.prefix)), _real(Path(sys.base_prefix)), _real(Path(__file__).parents[2])}):
        if path != Path("/tmp") and _within(path, Path("/tmp")) and path.is_dir():
            found += ["--ro-bind", str(path), str(path)]
    return found


@dataclass(frozen=True, slots=True)
class Sandbox:
    """One sandboxed run: ``argv`` wraps a command line in bubblewrap."""

    bwrap: str
    boundary: Boundary
    """The workspace (the one writable folder, unless it is ``/``) and what stays hidden."""
    start_in: Path | None = None
    """Where the command starts (default: the workspace)."""
    network: bool = True
    """Whether the command reaches the network (through ``network_prefix``'s namespace)."""
    network_prefix: tuple[str, ...] = ()
    """The command line that puts bubblewrap into the user-mode network namespace; empty with
    ``network`` on means the host's network (only for tests of the sandbox itself)."""
    network_args: tuple[str, ...] = ()
    """bubblewrap options that namespace needs (ids, a resolv.conf): see
    :class:`vigil.tools.sandbox_network.NetworkEntry`."""

    @property
    def workdir(self) -> Path:
        return self.boundary.workspace

    def argv(self, command: Sequence[str]) -> list[str]:
        """The command line that runs ``command`` in the sandbox."""
        workdir = _real(self.workdir)
        writable = workdir != Path("/") and workdir.is_dir()
        # Only existing homes: a mount point cannot be made on the read-only root (and there is
        # nothing to hide in a home not made yet).
        homes = [home for home in self.boundary.homes if home != Path("/") and home.is_dir()]
        args = [*self.network_prefix, self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/tmp", *_own_code_under_tmp()]
        args += _private_run()
        args += self.network_args
        # A home around the workdir is masked first, so the workdir can be bound back on top.
        around = [home for home in homes if _within(workdir, home) and home != workdir]
        elsewhere = [home for home in homes if not _within(workdir, home)]
        for home in around:
            args += ["--tmpfs", str(home)]
        if writable:
            args += ["--bind", str(workdir), str(workdir)]
        for home in elsewhere:
            args += ["--tmpfs", str(home)]
        args += _secret_masks(workdir, homes, self.boundary.existing_secrets())
        for home in [*around, *elsewhere]:
            args += ["--remount-ro", str(home)]
        args += ["--unshare-pid", "--unshare-ipc"]
        if not self.network:
            args += ["--unshare-net"]
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        start = _real(self.start_in) if self.start_in is not None else workdir
        args += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(start), "--", *command]
        return args

    def note(self) -> str:
        """A short line telling the model why a command may have failed."""
        workdir = _real(self.workdir)
        where = f"{workdir} and /tmp" if workdir != Path("/") and workdir.is_dir() else "/tmp"
        network = "" if self.network else ", no network"
        return (f"[ran in the sandbox: files outside {where} are read-only, vigil's files and the "
                f"user's keys are hidden, this machine's own services are out of reach{network}]")


def _private_run() -> list[str]:
    """A private empty ``/run``, keeping name resolution when ``/etc/resolv.conf`` points there."""
    args = ["--tmpfs", "/run"]
    var_run = Path("/var/run")
    if var_run.is_dir() and not var_run.is_symlink():
        args += ["--tmpfs", "/var/run"]
    resolv = _real(Path("/etc/resolv.conf"))
    for run in (Path("/run"), var_run):
        if _within(resolv, run) and resolv != run and resolv.exists():
            args += ["--ro-bind", str(resolv.parent), str(resolv.parent)]
            break
    return args


def _secret_masks(workdir: Path, homes: Sequence[Path], secrets: Sequence[Path]) -> list[str]:
    """Masks over the secrets still in sight: an empty read-only folder over a folder, a
    device-less ``/dev/null`` over a file. One inside a hidden home is hidden already."""
    args: list[str] = []
    for path in secrets:
        if any(_within(path, home) for home in homes) and not _within(path, workdir):
            continue
        if path.is_dir():
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents
