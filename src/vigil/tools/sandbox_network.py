"""User-mode networking for sandboxed commands: the outside world, not the host's own services.

A sandboxed command with ``tools.terminal.network`` on must reach the internet (TCP, UDP, DNS)
but never the services on the host's loopback: the gateway's API on 127.0.0.1, a PostgreSQL
with trust authentication, the model server. So the command gets its own network namespace,
connected to the outside by `pasta <https://passt.top>`_ (Debian package ``passt``). pasta
turns the namespace's packets into ordinary sockets of the vigil user on the host, so
connections leave as vigil's own would; the namespace has a loopback of its own, and only the
ports in ``tools.terminal.local_ports`` are forwarded from it to the host's loopback (TCP and
UDP, on 127.0.0.1 and ::1 alike). Why pasta:

* slirp4netns (the older user-mode stack) can close the host's loopback too, but forwards only
  from the host into the namespace, so opening a single local port would need another proxy;
  it also needs the namespace made beforehand and is slower;
* a filtering proxy (``HTTP_PROXY``/SOCKS) only covers programs that honour it (not UDP, DNS,
  ssh, ``git://``), and filtering in the host's namespace (nftables) needs root and a list of
  every address the host has; a namespace closes the loopback by construction.

Starting pasta costs 30-65 ms (mostly configuring the namespace), more than a whole sandboxed
command may take, so one namespace serves every command of the process (one per distinct set of
local ports): started on first use, held by a small process whose lifeline is a pipe only this
process can write to (it ends when this process ends, SIGKILL included, and pasta quits with
it), started again if it died, stopped at exit; a forked child starts its own. Each command
joins it through :func:`network_prefix` (``nsenter``, about 1 ms). Commands sharing it share
its loopback and abstract sockets, but background processes end with their command, so only
commands running at the same time can meet there.

Measured with Debian's pasta (2023-03) as root and as an unprivileged user:

* closed: TCP and UDP to the host's 127.0.0.0/8 and ::1; the host's address copied into the
  namespace (``--config-net``; 192.0.2.2, fd00::2) leads to the namespace itself, and the
  gateway's address is not mapped to the host (``--no-map-gw``); abstract unix sockets (they
  belong to a network namespace); nothing from the host or outside reaches the namespace;
* still open: a service listening on all addresses (0.0.0.0, ::) or on another address of the
  machine (a second interface, a bridge, a VPN) is reachable at that address, just as from any
  other machine on that network; unix sockets on the filesystem are the sandbox's filesystem
  rules' matter (its ``/run`` is private); ``ping`` may fail (no ICMP socket permission);
* DNS: a resolver elsewhere is reached like any UDP service. A resolver on the host's loopback
  (systemd-resolved's 127.0.0.53, dnsmasq) would be the namespace's own loopback, so pasta
  forwards queries sent to :data:`DNS_FORWARD` to it, and the sandbox sees a resolv.conf naming
  that address (:attr:`NetworkEntry.bwrap_args`). A resolver only on ::1 is not covered (the
  forwarding was measured to work towards IPv4 resolvers only).

As root, pasta runs as root (``--runas 0``: as ``nobody`` it cannot set up the namespace) and
commands join only the network namespace. As another user, pasta's namespace belongs to a user
namespace of its own (the user mapped to root); commands join both, and bubblewrap makes a
nested one giving the command back the user's own ids.
"""

from __future__ import annotations

import atexit
import ipaddress
import logging
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable

log = logging.getLogger(__name__)

INSTALL_HINT = "apt-get install passt"
DNS_FORWARD = "169.254.1.53"
"""The address in the namespace whose DNS queries pasta hands to a resolver on the host's
loopback (link-local, so it never hides a real server)."""

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 2.0
_RETRY_AFTER = 30.0
# The holder prints its PID as the host sees it (pasta also gives it a PID namespace, where it
# is 1; the host's /proc still answers in host PIDs), then waits for the end of its lifeline.
_HOLDER = "read -r pid rest < /proc/self/stat; echo \"$pid\"; exec cat > /dev/null"
# pasta's stderr lines that are no problem for us: no syslog in a container, no ICMP sockets.
_NOISE = (
    "to syslog",
    "uid_map",
    "user mappings",
    "ping_group_range",
    "ICMP requests",
    "nameserver address",
)


@dataclass(frozen=True, slots=True)
class NetworkEntry:
    """How a sandboxed command gets the user-mode network for a set of local ports, or why not.

    With ``prefix``: run ``[*prefix, bwrap, ..., *bwrap_args, ..., "--", *command]`` and do
    not pass ``--unshare-net`` to bubblewrap (the namespace joined is already the command's
    own). ``bwrap_args`` belong after bubblewrap's filesystem options (``--ro-bind / /``,
    ``/run``), anywhere before its ``--``. The entry is only valid in the process that got it.
    Without ``prefix`` (``problem`` says why), the safe choice is no network (``--unshare-net``):
    the host's network would open its loopback services."""

    prefix: tuple[str, ...] | None
    """The command line to put in front of ``bwrap``; ``None`` when unavailable."""
    bwrap_args: tuple[str, ...] = ()
    """Further bubblewrap options: the user's own ids back (not as root), and the resolv.conf
    naming :data:`DNS_FORWARD` when the host's resolver is on its loopback."""
    local_ports: tuple[int, ...] = ()
    """The host loopback ports reachable from the namespace (sorted)."""
    problem: str | None = None
    """Why there is no user-mode network (``None`` when there is)."""
    pasta_pid: int | None = None
    holder_pid: int | None = None
    """The process holding the namespace (for diagnostics and tests)."""

    @property
    def available(self) -> bool:
        return self.prefix is not None

    def line(self) -> str:
        """One human line for ``vigil doctor``."""
        if self.prefix is None:
            return f"sandbox network: unavailable: {self.problem}"
        ports = ", ".join(str(port) for port in self.local_ports) or "none"
        return f"sandbox network: user-mode (pasta), host loopback closed, local ports: {ports}"


def network_prefix(local_ports: Iterable[int] = ()) -> NetworkEntry:
    """The user-mode network namespace for commands that may reach ``local_ports`` on the
    host's loopback: started on first use (30-65 ms), shared afterwards (microseconds),
    started again if it died. Thread-safe. A failure is remembered for half a minute, so a
    machine without pasta does not pay for a failed start on every command."""
    ports = _normalise(local_ports)
    with _lock:
        running = _running.get(ports)
        if running is not None:
            if running.alive():
                return running.entry
            log.warning("the sandbox network (pasta %d) had stopped; starting it again", running.pasta.pid)
            del _running[ports]
            running.stop()
        failed = _failed.get(ports)
        if failed is not None and time.monotonic() - failed[0] < _RETRY_AFTER:
            return NetworkEntry(None, local_ports=ports, problem=failed[1])
        started = _start(ports)
        if isinstance(started, str):
            _failed[ports] = (time.monotonic(), started)
            log.warning("sandboxed commands get no user-mode network: %s", started)
            return NetworkEntry(None, local_ports=ports, problem=started)
        _failed.pop(ports, None)
        _running[ports] = started
        return started.entry


def status(local_ports: Iterable[int] = ()) -> NetworkEntry:
    """For ``vigil doctor``: start (or reuse) the namespace for ``local_ports`` and say how it
    went; :meth:`NetworkEntry.line` is the line to show. A remembered failure is retried."""
    with _lock:
        _failed.pop(_normalise(local_ports), None)
    return network_prefix(local_ports)


def shutdown() -> None:
    """Stop every namespace of this process and forget failures (run at interpreter exit)."""
    with _lock:
        running = list(_running.values())
        _running.clear()
        _failed.clear()
    for namespace in running:
        namespace.stop()


class _Namespace:
    """One pasta, the holder process inside its namespace, and the descriptors that keep the
    namespace reachable: commands join it through this process's own descriptors, not the
    holder's PID, which could be reused by another process once the holder is gone."""

    def __init__(self, pasta: subprocess.Popen[bytes], holder: int, pidfd: int, lifeline: int,
                 ready: IO[bytes], resolv_dir: Path | None) -> None:
        self.pasta = pasta
        self.holder = holder
        self.pidfd = pidfd
        self.lifeline = lifeline
        self.ready = ready
        self.resolv_dir = resolv_dir
        self.ns_fds: list[int] = []
        self.entry = NetworkEntry(None)

    def alive(self) -> bool:
        if self.pasta.poll() is not None:
            return False
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return not poller.poll(0)  # a pidfd turns readable when its process has ended

    def stop(self) -> None:
        """End the holder and pasta (closing the lifeline alone would do it, a little later)."""
        self._close(self.lifeline)
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except OSError:
            pass  # ended already
        try:
            self.pasta.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.pasta.kill()
            self.pasta.wait()
        self._release()
        if self.resolv_dir is not None:
            shutil.rmtree(self.resolv_dir, ignore_errors=True)

    def forget(self) -> None:
        """In a forked child: let go of the parent's namespace without touching it."""
        self._close(self.lifeline)
        self._release()

    def _release(self) -> None:
        for fd in [self.pidfd, *self.ns_fds]:
            self._close(fd)
        self.ns_fds = []
        self.pidfd = self.lifeline = -1
        self.ready.close()

    @staticmethod
    def _close(fd: int) -> None:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


def _start(ports: tuple[int, ...]) -> _Namespace | str:
    """Start pasta with the holder as its command and check that a command can join its
    namespace; the running namespace, or the problem."""
    pasta = shutil.which("pasta")
    if pasta is None:
        return f"pasta is not installed ({INSTALL_HINT})"
    nsenter = shutil.which("nsenter")
    if nsenter is None:
        return "nsenter is not installed (apt-get install util-linux)"
    root = os.geteuid() == 0
    resolv = _resolv_override()
    spec = ",".join(str(port) for port in ports) or "none"
    argv = [pasta, "--foreground", "--quiet", "--config-net", "--no-map-gw",
            "--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", spec, "--udp-ns", spec]
    if root:
        argv += ["--runas", "0"]
    if resolv is not None:
        argv += ["--dns-forward", DNS_FORWARD]
    namespace = _spawn([*argv, "--", shutil.which("sh") or "/bin/sh", "-c", _HOLDER])
    if isinstance(namespace, str):
        return f"pasta did not start: {namespace}"
    try:
        prefix = _join(namespace, nsenter, root)
        bwrap_args = [] if root else ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid())]
        if resolv is not None:
            bwrap_args += _resolv_mount(namespace, resolv)
        problem = _trial(prefix)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    if problem is not None:
        namespace.stop()
        return f"cannot join pasta's namespace: {problem}"
    namespace.entry = NetworkEntry(prefix, tuple(bwrap_args), ports, None, namespace.pasta.pid, namespace.holder)
    log.info("sandbox network: pasta %d, holder %d, local ports %s", namespace.pasta.pid, namespace.holder, spec)
    return namespace


def _spawn(argv: list[str]) -> _Namespace | str:
    """Run pasta and wait for its holder to report; the namespace, or why it did not start."""
    lifeline_in, lifeline = os.pipe()  # both ends close-on-exec: no other child inherits them
    errors = tempfile.TemporaryFile()  # a file, not a pipe: pasta never blocks on it
    try:
        # Its own session: a Ctrl-C meant for vigil's terminal must not end the namespace.
        proc = subprocess.Popen(argv, stdin=lifeline_in, stdout=subprocess.PIPE, stderr=errors,
                                start_new_session=True)
    except OSError as exc:
        os.close(lifeline)
        errors.close()
        return f"cannot be run ({exc.strerror or exc})"
    finally:
        os.close(lifeline_in)
    assert proc.stdout is not None
    with errors:
        holder, said = _read_holder_pid(proc, time.monotonic() + _START_TIMEOUT)
        try:
            pidfd = os.pidfd_open(holder) if holder is not None else -1
        except OSError:
            pidfd = -1
        if pidfd < 0:
            _kill_group(proc)
            os.close(lifeline)
            proc.stdout.close()
            return said or _first_problem(errors) or f"pasta exited with code {proc.returncode}"
    assert holder is not None
    # stdout stays open while pasta runs: with its read end closed, a stray write would kill pasta.
    return _Namespace(proc, holder, pidfd, lifeline, proc.stdout, None)


def _read_holder_pid(proc: subprocess.Popen[bytes], deadline: float) -> tuple[int | None, str | None]:
    """The holder's PID from its first line, or ``None`` and what went wrong instead (``None``
    too when pasta just ended: its stderr says why)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, f"no namespace within {_START_TIMEOUT:g}s"
        # Short waits: a pasta failing half-way can leave a child holding stdout open.
        if not poller.poll(min(left, 0.05) * 1000):
            if proc.poll() is not None:
                return None, None
            continue
        chunk = os.read(fd, 64)
        if not chunk:
            return None, None
        data += chunk
    line = data.split(b"\n", 1)[0].strip()
    return (int(line), None) if line.isdigit() else (None, f"unexpected output {line[:60]!r}")


def _join(namespace: _Namespace, nsenter: str, root: bool) -> tuple[str, ...]:
    """Open the holder's namespaces in this process and return the ``nsenter`` prefix."""
    kinds = ("net",) if root else ("user", "net")
    for kind in kinds:
        namespace.ns_fds.append(os.open(f"/proc/{namespace.holder}/ns/{kind}", os.O_RDONLY))
    if not namespace.alive():
        # Opened after the holder ended: the PID may have been another process's by then.
        raise OSError("pasta ended while starting")
    me = os.getpid()
    options = [f"--{kind}=/proc/{me}/fd/{fd}" for kind, fd in zip(kinds, namespace.ns_fds)]
    if not root:
        options.append("--preserve-credentials")
    return (nsenter, *options, "--")


def _trial(prefix: tuple[str, ...]) -> str | None:
    try:
        done = subprocess.run([*prefix, "true"], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=_START_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[0] if lines else f"nsenter exited with code {done.returncode}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # The group, not just pasta: a pasta failing half-way can leave its namespace child behind.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _first_problem(errors: IO[bytes]) -> str | None:
    errors.seek(0)
    for raw in errors.read(65536).decode(errors="replace").splitlines():
        line = raw.strip()
        if line and not any(noise in line for noise in _NOISE):
            return line
    return None


def _resolv_mount(namespace: _Namespace, content: str) -> list[str]:
    """Write the sandbox's resolv.conf (removed with the namespace); the bubblewrap options
    that show it in place of the host's (on the file itself, should that be a symlink)."""
    folder = namespace.resolv_dir = Path(tempfile.mkdtemp(prefix="vigil-resolv-"))
    file = folder / "resolv.conf"
    file.write_text(content)
    file.chmod(0o644)
    folder.chmod(0o755)
    return ["--ro-bind", str(file), os.path.realpath("/etc/resolv.conf")]


def _resolv_override() -> str | None:
    """The host's resolv.conf with its IPv4 loopback resolvers replaced by :data:`DNS_FORWARD`,
    or ``None`` when none is there (the namespace reaches the others as they are; pasta forwards
    IPv4 queries to IPv4 resolvers only)."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return None
    kept: list[str] = []
    replaced = False
    for line in lines:
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nameserver" and _is_loopback(fields[1]):
            if not replaced:
                kept.append(f"nameserver {DNS_FORWARD}")
            replaced = True
            continue
        kept.append(line)
    return "\n".join(kept) + "\n" if replaced else None


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.IPv4Address(address).is_loopback
    except ValueError:
        return False


def _normalise(local_ports: Iterable[int]) -> tuple[int, ...]:
    ports = tuple(sorted({int(port) for port in local_ports}))
    for port in ports:
        if not 1 <= port <= 65535:
            raise ValueError(f"not a port number: {port}")
    return ports


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    for namespace in _running.values():
        namespace.forget()
        _inherited.append(namespace)  # kept referenced: no "still running" warnings from Popen
    _running.clear()
    _failed.clear()


_lock = threading.Lock()
_running: dict[tuple[int, ...], _Namespace] = {}
_failed: dict[tuple[int, ...], tuple[float, str]] = {}
_inherited: list[_Namespace] = []
atexit.register(shutdown)
os.register_at_fork(after_in_child=_after_fork_in_child)
