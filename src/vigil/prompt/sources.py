"""Reading the files a system prompt is built from, each capped with a visible marker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vigil.profiles import ProfileError
from vigil.safe_files import UnsafeFile, read_bytes

CONTEXT_FILE_NAMES = ("AGENTS.md", ".vigil.md", "VIGIL.md", "CLAUDE.md")
READ_CAP = 4 << 20
"""Bytes read of a source file at most: enough for any ``prompt.max_file_chars`` (4 bytes a
character at worst), and a bound on what a huge or endless file costs."""


class PromptSourceError(ProfileError):
    """A file the system prompt is built from cannot be used; the message names it and why."""


@dataclass(frozen=True, slots=True)
class SourceText:
    """The text of one source file as it goes into the prompt."""

    label: str
    text: str
    truncated: bool = False


def read_capped(path: Path, label: str, max_chars: int) -> SourceText | None:
    """The file's text, cut to ``max_chars`` with a marker saying so; ``None`` if absent/empty.

    Only a regular file is read, and at most ``READ_CAP`` bytes of it: anything else (a FIFO,
    a device, a directory, a symlink loop) raises ``PromptSourceError`` naming the file.
    """
    try:
        read = read_bytes(path, READ_CAP)
    except UnsafeFile as exc:
        raise PromptSourceError(f"cannot use {label} for the system prompt: {exc}") from None
    if read is None:
        return None
    text = read.data.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    if read.complete and len(text) <= max_chars:
        return SourceText(label, text)
    size = f"{len(text):,} characters" if read.complete else f"{read.size:,} bytes"
    marker = f"\n\n[... {label} truncated: {size}, the first {max_chars:,} shown ...]"
    return SourceText(label, text[:max_chars].rstrip() + marker, truncated=True)


def find_git_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` that contains ``.git``."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def find_context_files(cwd: Path) -> list[Path]:
    """Context files from the git root (or ``cwd`` alone, outside a repository) down to ``cwd``.

    Outer directories come first: they are the more general, more stable context.
    """
    cwd = cwd.resolve()
    root = find_git_root(cwd)
    chain = [cwd]
    if root is not None:
        chain = [d for d in (cwd, *cwd.parents) if d == root or root in d.parents]
    found: list[Path] = []
    for directory in reversed(chain):
        for name in CONTEXT_FILE_NAMES:
            candidate = directory / name
            if candidate.is_file():
                found.append(candidate)
    return found
