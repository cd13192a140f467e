"""The bubblewrap sandbox for terminal commands that nobody is there to approve.

The command policy (``danger.check``) reads a command line, but it cannot see through an
interpreter (``python3 -c 'os.system(...)'``, ``perl -e``, a script written and then run). So,
by default, commands of unattended runs (cron, heartbeats, ``chat -q`` without a terminal) also
run inside `bubblewrap <https://github.com/containers/bubblewrap>`_:

* the whole filesystem is read-only; only the run's working directory (the session's or the
  cron job's, chosen by the user; not the ``workdir`` argument the model passes, which only says
  where the command starts) is writable, unless it is ``/``, which would make everything
  writable; ``/tmp`` is a private, empty tmpfs (``TMPDIR`` points there);
* vigil's homes (the profile home and ``$VIGIL_HOME`` with every profile in it: ``config.yaml``
  with API keys, ``state.db`` with every conversation) are hidden behind an empty read-only
  tmpfs. When the working directory lies inside a home (cron jobs run in the profile home by
  default) that directory stays visible and writable, but the secrets in it stay hidden:
  ``config.yaml``, ``state.db`` and its journal files, ``repl_history`` cannot be opened (a
  device-less ``/dev/null`` is mounted over each), ``logs/``, ``cron/output/`` and ``profiles/``
  appear as empty read-only folders;
* ``/run`` is a private, empty tmpfs, so the sockets there (D-Bus, systemd, docker, database
  servers) are out of reach; ``/etc/resolv.conf`` keeps working when it points into ``/run``;
* ``/dev`` is minimal (null, zero, full, random, urandom, tty, pts, shm: no disks), ``/proc``
  shows only the sandbox's own processes;
* the command runs in new PID and IPC namespaces with no capabilities (even when vigil runs as
  root: otherwise root could simply remount ``/`` writable), in a new session so it cannot push
  keystrokes into a terminal (TIOCSTI), and the whole process tree ends with the run: background
  processes do not outlive the command, and a killed vigil (even SIGKILL) takes them along;
* the network stays on unless ``tools.terminal.network`` is false (then only a private loopback).

Known limits: the working directory is writable whole, so a run working in ``$HOME`` may change
dotfiles there (give cron jobs a project folder); unix sockets elsewhere on the read-only
filesystem (e.g. an agent socket in ``~/.gnupg``) can still be connected to, and with the network
on so can abstract sockets and every TCP service, the machine's own included; programs that
write caches under ``$HOME`` (pip, npm) fail unless pointed into the working directory.

Where bubblewrap is missing or cannot run here (user namespaces disabled, a container without
the needed privileges), commands run unsandboxed under the command policy alone (with
``sandbox: always`` too); vigil says so at ``vigil cron add``, when ``vigil gateway run`` starts
and at ``vigil config set``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from vigil.config import TerminalSettings
from vigil.profiles import Profile, vigil_home

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

    def line(self, mode: str = "unattended") -> str:
        """One human line for a status display, given ``tools.terminal.sandbox``."""
        if mode == "never":
            return "sandbox: off (tools.terminal.sandbox is never); terminal commands run unsandboxed"
        which = "unattended terminal commands" if mode == "unattended" else "all terminal commands"
        if self.available:
            return f"sandbox: {which} run in bubblewrap ({self.bwrap})"
        return (
            f"sandbox: unavailable, {self._why()}; {which} run without it "
            "(only the command policy applies)"
        )

    def warning(self, mode: str) -> str | None:
        """The warning to show once where it matters, or ``None`` when there is nothing to say."""
        if self.available or mode == "never":
            return None
        which = "unattended terminal commands" if mode == "unattended" else "terminal commands"
        return f"warning: {self._why()}, so {which} run without the sandbox (only the command policy applies)"

    def _why(self) -> str:
        if self.bwrap is None:
            return f"bubblewrap (bwrap) is not installed ({INSTALL_HINT})"
        return f"bubblewrap ({self.bwrap}) does not work here: {self.problem}"


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
        argv = Sandbox(bwrap, Path(workdir), network=False).argv(["true"])
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


def protected_homes(profile: Profile) -> tuple[Path, ...]:
    """The vigil homes a sandboxed command of ``profile`` must not see: its own and the root
    one, which holds every other profile."""
    return (vigil_home(), profile.home)


def for_run(
    settings: TerminalSettings,
    *,
    unattended: bool,
    workdir: Path,
    start_in: Path | None = None,
    homes: Sequence[Path] = (),
    secret_files: Sequence[Path] = (),
) -> "Sandbox | None":
    """The sandbox a command of this run goes into, or ``None`` to run it unsandboxed: the
    mode does not ask for one, or bubblewrap is unavailable (logged once per process).

    ``workdir`` is the run's working directory (the session's or the job's, chosen by the
    user), the one folder the command may change; ``start_in`` is where it starts (the tool's
    ``workdir`` argument, chosen by the model, which therefore does not make anything writable)."""
    if not wanted(settings.sandbox, unattended):
        return None
    found = status()
    if not found.available:
        _warn_once(found, settings.sandbox)
        return None
    assert found.bwrap is not None
    return Sandbox(found.bwrap, workdir, start_in, settings.network, tuple(homes), tuple(secret_files))


def _warn_once(found: SandboxStatus, mode: str) -> None:
    global _warned
    with _lock:
        if _warned:
            return
        _warned = True
    # Said once where people look (cron add, gateway start, config set); here only for the log.
    log.info("%s", found.warning(mode))


@dataclass(frozen=True, slots=True)
class Sandbox:
    """One sandboxed run: ``argv`` wraps a command line in bubblewrap."""

    bwrap: str
    workdir: Path
    """The one writable folder (unless it is ``/``): the run's working directory."""
    start_in: Path | None = None
    """Where the command starts (default: ``workdir``)."""
    network: bool = True
    homes: tuple[Path, ...] = ()
    """Folders hidden whole (vigil's homes), except the workdir where it lies inside one."""
    secret_files: tuple[Path, ...] = ()
    """Further files made unreadable wherever they are (a session database outside the homes)."""

    def argv(self, command: Sequence[str]) -> list[str]:
        """The bubblewrap command line that runs ``command`` in the sandbox."""
        workdir = _real(self.workdir)
        writable = workdir != Path("/") and workdir.is_dir()
        homes = _outermost(_real(home) for home in self.homes)
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        args += _private_run()
        # A home around the workdir is masked first, so the workdir can be bound back on top
        # (a home that is the workdir itself is simply covered by it).
        around = [home for home in homes if _within(workdir, home)]
        elsewhere = [home for home in homes if home not in around]
        emptied = [home for home in homes if home != workdir]
        for home in around:
            if home != workdir:
                args += ["--tmpfs", str(home)]
        if writable:
            args += ["--bind", str(workdir), str(workdir)]
        for home in elsewhere:
            args += ["--tmpfs", str(home)]
        args += _secret_masks(workdir, [_real(home) for home in self.homes], around, elsewhere, self.secret_files)
        for home in emptied:
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
        return f"[ran in the sandbox: files outside {where} are read-only{network}]"


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


def _secret_masks(workdir: Path, homes: Sequence[Path], around: Sequence[Path],
                  elsewhere: Sequence[Path], files: Sequence[Path]) -> list[str]:
    """Masks for the secrets still visible: those in a home around the (re-bound) workdir, and
    ``files`` (a session database kept outside the homes) wherever they are."""
    secret_files = list(files)
    secret_folders: list[Path] = []
    for home in homes:
        profile = Profile("masked", home)
        secret_files += [profile.config_path, profile.history_path, *database_files(profile.state_db)]
        secret_folders += [profile.logs_dir, profile.cron_output_dir, profile.home / "profiles"]

    def visible(path: Path) -> bool:
        if path == workdir or any(_within(path, home) for home in elsewhere):
            return False
        return _within(path, workdir) or not any(_within(path, home) for home in around)

    args: list[str] = []
    # Only what exists: a mask on a missing path would create it in the real workdir.
    for path in dict.fromkeys(_real(p) for p in secret_files):
        if visible(path) and path.is_file():
            args += ["--ro-bind", "/dev/null", str(path)]
    for path in dict.fromkeys(_real(p) for p in secret_folders):
        if visible(path) and path.is_dir():
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
    return args


def database_files(db: Path) -> list[Path]:
    """An SQLite database and the journal files beside it, which hold its recent pages (what
    ``Sandbox.secret_files`` needs to hide a session database)."""
    return [db, *(Path(f"{db}{suffix}") for suffix in ("-wal", "-shm", "-journal"))]


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without duplicates and without those nested in another one."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if path != Path("/") and not any(_within(path, outer) for outer in kept):
            kept.append(path)
    return kept
