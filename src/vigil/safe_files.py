"""Reading the files of a profile (config.yaml, SOUL.md, MEMORY.md, ...) without trusting them,
and replacing one whole (:func:`write_atomic`).

A profile file may be anything a user or a mishap put there: a FIFO (reading it would wait
forever for a writer), a symlink to ``/dev/zero`` (reading it would never end), a symlink
loop, a directory, a multi-gigabyte log. Every read here opens without blocking, accepts only
a regular file and reads at most a given number of bytes, and a refusal names the file and why.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CappedRead", "UnsafeFile", "check_regular", "describe_kind", "read_bytes", "read_text", "write_atomic"]


class UnsafeFile(Exception):
    """A file cannot be read safely; ``str()`` is ``"<path>: <reason>"``."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CappedRead:
    """What was read: at most the cap's bytes, and the file's full size at the time."""

    data: bytes
    size: int

    @property
    def complete(self) -> bool:
        return len(self.data) >= self.size


def describe_kind(mode: int) -> str:
    """What kind of thing a non-regular ``st_mode`` is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _open(path: Path) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file; ``None`` if it is missing."""
    # O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever. It has no
    # effect on a regular file, which is all we go on to read.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnsafeFile(path, _reason(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise UnsafeFile(path, _reason(exc)) from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UnsafeFile(path, f"is {describe_kind(mode)}, not a regular file; move it aside")
    return fd


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symbolic link loop (it never reaches a file); remove or fix the link"
    if exc.errno == errno.EACCES:
        return "cannot be read: permission denied"
    if exc.errno == errno.ENAMETOOLONG:
        return "cannot be read: the path is too long"
    if exc.errno == errno.ENOTDIR:
        return "cannot be read: a part of its path is not a directory"
    return f"cannot be read: {exc.strerror or exc}"


def check_regular(path: Path) -> bool:
    """``True`` if ``path`` is a readable regular file, ``False`` if it does not exist;
    ``UnsafeFile`` if it is anything else."""
    fd = _open(path)
    if fd is None:
        return False
    os.close(fd)
    return True


def read_bytes(path: Path, cap: int) -> CappedRead | None:
    """At most ``cap`` bytes of the regular file ``path``; ``None`` if it does not exist."""
    fd = _open(path)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        remaining = cap
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as exc:
        raise UnsafeFile(path, _reason(exc)) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return CappedRead(data, max(size, len(data)))


def read_text(path: Path, cap: int, *, what: str = "the file") -> str | None:
    """The whole UTF-8 text of ``path`` (``None`` if missing); ``UnsafeFile`` if it is larger
    than ``cap`` bytes, not UTF-8, or not a regular file. For files that must be read whole."""
    read = read_bytes(path, cap + 1)
    if read is None:
        return None
    if len(read.data) > cap:
        raise UnsafeFile(
            path, f"is too large for {what} ({read.size:,} bytes; the limit is {cap:,} bytes)"
        )
    try:
        return read.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = read.data[: exc.start].count(b"\n") + 1
        raise UnsafeFile(path, f"is not UTF-8 text (an invalid byte on line {line})") from None


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` via a private (0600) temp file beside it and a rename,
    so a reader sees the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
