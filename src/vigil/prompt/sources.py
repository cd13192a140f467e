"""Reading the files a system prompt is built from, each capped with a visible marker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONTEXT_FILE_NAMES = ("AGENTS.md", ".vigil.md", "VIGIL.md", "CLAUDE.md")


@dataclass(frozen=True, slots=True)
class SourceText:
    """The text of one source file as it goes into the prompt."""

    label: str
    text: str
    truncated: bool = False


def read_capped(path: Path, label: str, max_chars: int) -> SourceText | None:
    """The file's text, cut to ``max_chars`` with a marker saying so; ``None`` if absent/empty."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None
    if not text:
        return None
    if len(text) <= max_chars:
        return SourceText(label, text)
    marker = (
        f"\n\n[... {label} truncated: {len(text):,} characters, the first {max_chars:,} shown ...]"
    )
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
