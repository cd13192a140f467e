"""One gateway per profile: an exclusive ``flock`` on ``<profile home>/gateway.lock``.

The holder writes its pid, host and start time into the file (0600), so a second gateway and
``vigil gateway status`` can name it. The kernel drops a ``flock`` when its process dies, however
it dies, so a file left by a crashed or SIGKILLed gateway never blocks the next one; the file
itself is never deleted (unlinking a lock file lets two processes lock two different files).

Scale-out: with a shared (PostgreSQL) store several gateways may run for one profile, each a
worker claiming its work in the store. That is decided in :func:`acquire` alone (the one place
every gateway passes through): ``shared=True`` takes a *shared* ``flock`` and writes nothing
into the file, so any number of workers run side by side (here and on other machines), while
a gateway of the same profile home on an SQLite store (exclusive) and they still exclude each
other. Who runs is then the store's worker registry (:mod:`vigil.gateway.cluster.workers`), not this
file.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType

from vigil.gateway.install import unit_name
from vigil.profiles import Profile

LOCK_FILE = "gateway.lock"
_CONTENTION_TRIES = 5
_CONTENTION_PAUSE = 0.05
"""A ``status`` probe holds a shared lock for microseconds: a start that meets one tries again
these few times before concluding another gateway runs."""
_READ_TRIES = 20
_READ_PAUSE = 0.025
"""A holder that has just locked the file writes its pid a moment later."""


class GatewayRunning(Exception):
    """Another process holds the profile's gateway lock; the message says who and how to stop it."""

    def __init__(self, message: str, *, pid: int | None, started_at: float | None) -> None:
        super().__init__(message)
        self.pid = pid
        self.started_at = started_at


class LockUnavailable(Exception):
    """The lock file cannot be opened or locked at all (not a regular file, no permission)."""


@dataclass(frozen=True, slots=True)
class LockHolder:
    """What the holder of a gateway lock wrote into it (``pid`` 0: not written yet)."""

    pid: int
    host: str | None
    started_at: float | None


def lock_path(profile: Profile) -> Path:
    """``gateway.lock`` in the profile's home."""
    return profile.home / LOCK_FILE


class GatewayLock:
    """The held lock of one profile; a context manager that releases it on exit.

    Releasing empties the file (while still holding it) and closes it; the kernel releases the
    lock by itself if the process dies first.
    """

    def __init__(self, profile: Profile, fd: int, holder: LockHolder, *, shared: bool = False) -> None:
        self.profile = profile
        self.path = lock_path(profile)
        self.holder = holder
        self.shared = shared
        """A shared lock (several workers on a shared store): the file is not written."""
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self.shared:
            os.close(fd)  # the file names no one: nothing to empty
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # a full disk must not keep the lock: the next holder overwrites the contents
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> GatewayLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()


def acquire(profile: Profile, *, now: float | None = None, shared: bool = False) -> GatewayLock:
    """Take the profile's gateway lock, or raise :class:`GatewayRunning` naming the holder.

    The file is created 0600 if missing (and narrowed to 0600 if it was wider); when another
    process holds the lock, nothing is written. ``now`` is the start time recorded in the file
    (default: the real clock). :class:`LockUnavailable` when the file cannot be used at all.

    ``shared``: the gateway's store is shared (PostgreSQL), so other gateways of the profile
    may run too; only an exclusive holder (a gateway on an SQLite store) refuses it.
    """
    path = lock_path(profile)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise LockUnavailable(f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        _refuse_irregular(fd, path)
        if shared:
            if not _try_lock(fd, fcntl.LOCK_SH, tries=_CONTENTION_TRIES):
                holder = _read_holder(fd)
                raise GatewayRunning(_running_message(profile, holder), pid=holder.pid or None, started_at=holder.started_at)
            os.fchmod(fd, 0o600)
            return GatewayLock(profile, fd, LockHolder(os.getpid(), socket.gethostname(), time.time() if now is None else now), shared=True)
        if not _try_lock(fd, fcntl.LOCK_EX, tries=_CONTENTION_TRIES):
            if _try_lock(fd, fcntl.LOCK_SH, tries=1):  # held shared: workers on a shared store
                raise GatewayRunning(_workers_message(profile), pid=None, started_at=None)
            holder = _read_holder(fd)
            raise GatewayRunning(_running_message(profile, holder), pid=holder.pid or None, started_at=holder.started_at)
        holder = LockHolder(os.getpid(), socket.gethostname(), time.time() if now is None else now)
        os.fchmod(fd, 0o600)  # a file left by hand (or an older version) may be wider
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps({"pid": holder.pid, "host": holder.host, "started_at": holder.started_at}) + "\n").encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return GatewayLock(profile, fd, holder)


def holder(profile: Profile) -> LockHolder | None:
    """Who holds the profile's gateway lock, or ``None`` when nobody does. Creates nothing and
    never takes the lock in a way that could stop a gateway from starting (see
    ``_CONTENTION_TRIES``)."""
    path = lock_path(profile)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LockUnavailable(f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        _refuse_irregular(fd, path)
        if _try_lock(fd, fcntl.LOCK_SH, tries=1):
            return None  # free; closing the descriptor below lets go of the probe at once
        return _read_holder(fd)
    finally:
        os.close(fd)


def is_locked(profile: Profile) -> int | None:
    """The pid of the process holding the profile's gateway lock (0 when it has not written it
    yet), or ``None`` when no process does."""
    found = holder(profile)
    return None if found is None else found.pid


def _try_lock(fd: int, kind: int, *, tries: int) -> bool:
    for attempt in range(tries):
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LockUnavailable(f"cannot lock the gateway lock file: {exc.strerror or exc}") from None
        if attempt + 1 < tries:
            time.sleep(_CONTENTION_PAUSE)
    return False


def _refuse_irregular(fd: int, path: Path) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise LockUnavailable(f"{path} is not a regular file; move it aside")


def _read_holder(fd: int) -> LockHolder:
    for attempt in range(_READ_TRIES):
        found = _parse(os.pread(fd, 4096, 0))
        if found is not None:
            return found
        if attempt + 1 < _READ_TRIES:
            time.sleep(_READ_PAUSE)
    return LockHolder(0, None, None)


def _parse(raw: bytes) -> LockHolder | None:
    try:
        data = json.loads(raw.decode("utf-8"))
        pid = data["pid"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    host = data.get("host") if isinstance(data.get("host"), str) else None
    started = data.get("started_at")
    started_at = float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else None
    return LockHolder(pid, host, started_at)


def _running_message(profile: Profile, found: LockHolder) -> str:
    stop = f"systemctl --user stop {unit_name(profile)}"
    if not found.pid:
        return (
            f"another gateway is already running for profile '{profile.name}' (it is just starting); "
            f"stop it first ({stop})"
        )
    since = f", since {_when(found.started_at)}" if found.started_at is not None else ""
    host = f" on {found.host}" if found.host and found.host != socket.gethostname() else ""
    return (
        f"another gateway is already running for profile '{profile.name}' (pid {found.pid}{host}{since}); "
        f"stop it first (kill {found.pid} / {stop})"
    )


def _workers_message(profile: Profile) -> str:
    return (
        f"gateways of profile '{profile.name}' are running on a shared (PostgreSQL) store, and this one's "
        f"store is not shared; stop them first (`vigil gateway status` lists them), or give this one "
        f"the same store.url"
    )


def _when(epoch: float) -> str:
    """``12:03`` today, ``2026-11-30 12:03`` another day (local time)."""
    moment = datetime.fromtimestamp(epoch)
    return moment.strftime("%H:%M") if moment.date() == datetime.now().date() else moment.strftime("%Y-%m-%d %H:%M")
