"""MEMORY.md (the agent's notes) and USER.md (what it knows about the user): bullet entries.

Each entry is a top-level markdown bullet (``- text``); further lines of the same entry are
indented. Anything else in the file — a heading, a paragraph the user typed by hand — is left
exactly where it is: edits splice single entries in and out instead of re-rendering the file.

Writes are atomic (temp file + rename), private (0600) and serialised across processes with a
lock file, so two conversations saving at the same moment do not lose each other's entry.
"""

from __future__ import annotations

import fcntl
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from vigil import safe_files
from vigil.safe_files import write_atomic

DEFAULT_CHAR_CAP = 8000
READ_CAP = 4 << 20
"""Bytes of a memory file read at most (the entries cap keeps real ones far smaller)."""

_BULLET = re.compile(r"^[-*+] (.*)$")


class MemoryFileError(Exception):
    """An entry cannot be added, found or changed; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One bullet: its text (continuation lines dedented) and its line span ``[start, end)``."""

    text: str
    start: int
    end: int


def read_text(path: Path) -> str:
    """The file's content, or ``""`` when it does not exist.

    ``MemoryFileError`` when it is not a regular UTF-8 file of at most ``READ_CAP`` bytes
    (a FIFO, a directory or a symlink loop would otherwise hang or crash the caller).
    """
    try:
        return safe_files.read_text(path, READ_CAP, what="a memory file") or ""
    except safe_files.UnsafeFile as exc:
        raise MemoryFileError(f"cannot use {exc}") from None


def parse_entries(text: str) -> list[MemoryEntry]:
    """The bullet entries in ``text``, in file order."""
    lines = text.splitlines()
    entries: list[MemoryEntry] = []
    i = 0
    while i < len(lines):
        match = _BULLET.match(lines[i])
        if match is None:
            i += 1
            continue
        parts = [match.group(1)]
        end = i + 1
        while end < len(lines) and lines[end][:1] in (" ", "\t") and lines[end].strip():
            parts.append(lines[end].strip())
            end += 1
        entries.append(MemoryEntry("\n".join(parts).strip(), i, end))
        i = end
    return entries


def read_entries(path: Path) -> list[str]:
    """The texts of the entries in the file at ``path`` (empty when it does not exist)."""
    return [entry.text for entry in parse_entries(read_text(path))]


def render_entry(content: str) -> str:
    """``content`` as a bullet: ``- first line`` and the other lines indented by two spaces."""
    lines = [line.strip() for line in content.strip().splitlines() if line.strip()]
    if not lines:
        raise MemoryFileError("the entry is empty; give the text to save")
    first = _BULLET.match(lines[0])
    if first:  # the caller already wrote it as a bullet
        lines[0] = first.group(1)
    return "\n".join(["- " + lines[0], *("  " + line for line in lines[1:])])


def add_entry(path: Path, content: str, *, cap: int = DEFAULT_CHAR_CAP) -> bool:
    """Append an entry; ``False`` (and no change) when an identical entry is already there."""
    block = render_entry(content)
    with _locked(path):
        text = read_text(path)
        wanted = parse_entries(block + "\n")[0].text
        if any(entry.text == wanted for entry in parse_entries(text)):
            return False
        new_text = "\n".join([*text.splitlines(), block]) + "\n"
        _write_capped(path, text, new_text, cap)
        return True


def replace_entry(path: Path, old_text: str, content: str, *, cap: int = DEFAULT_CHAR_CAP) -> None:
    """Replace the one entry containing ``old_text`` with ``content``."""
    block = render_entry(content)
    with _locked(path):
        text = read_text(path)
        entry = _find_one(path, text, old_text)
        lines = text.splitlines()
        new_text = "\n".join([*lines[: entry.start], block, *lines[entry.end :]]) + "\n"
        _write_capped(path, text, new_text, cap)


def remove_entry(path: Path, old_text: str) -> str:
    """Remove the one entry containing ``old_text``; return the text of the removed entry."""
    with _locked(path):
        text = read_text(path)
        entry = _find_one(path, text, old_text)
        lines = text.splitlines()
        rest = [*lines[: entry.start], *lines[entry.end :]]
        write_atomic(path, "\n".join(rest) + "\n" if rest else "")
        return entry.text


def _find_one(path: Path, text: str, old_text: str) -> MemoryEntry:
    needle = old_text.strip()
    if not needle:
        raise MemoryFileError("old_text is empty; give a unique part of the entry to change")
    entries = parse_entries(text)
    matches = [entry for entry in entries if needle in entry.text]
    if not matches:
        # Tolerate a needle copied with its bullet or indentation, as it appears in the file.
        lines = text.splitlines()
        matches = [e for e in entries if needle in "\n".join(lines[e.start : e.end])]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        listing = _listing(entries) or "  (the file has no entries)"
        raise MemoryFileError(f"no entry in {path.name} contains {needle!r}; its entries are:\n{listing}")
    raise MemoryFileError(
        f"{len(matches)} entries in {path.name} contain {needle!r}; give a longer part of the "
        f"one you mean:\n{_listing(matches)}"
    )


def _listing(entries: list[MemoryEntry], width: int = 100) -> str:
    def short(text: str) -> str:
        flat = " ".join(text.split())
        return flat if len(flat) <= width else flat[: width - 3] + "..."

    return "\n".join(f"  - {short(entry.text)}" for entry in entries)


def _write_capped(path: Path, old_text: str, new_text: str, cap: int) -> None:
    if len(new_text) > cap and len(new_text) > len(old_text):
        raise MemoryFileError(
            f"{path.name} would grow to {len(new_text)} characters, over its limit of {cap} "
            f"(now {len(old_text)}); remove or shorten entries first"
        )
    write_atomic(path, new_text)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.with_name(f".{path.name}.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
