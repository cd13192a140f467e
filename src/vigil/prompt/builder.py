"""Building a system prompt from a profile's files.

The parts go from the most stable to the most volatile (persona, skills index, project
context, user profile, memory) so that an edit invalidates as little of the provider's cached
prefix as possible. The result depends only on the files and the conversation's start date:
no clock time, model name or random id, so building twice from the same files gives the same
bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from vigil.profiles import Profile
from vigil.prompt.sources import (
    PromptSourceError,
    SourceText,
    find_context_files,
    find_git_root,
    read_capped,
)
from vigil.safe_files import UnsafeFile, check_regular
from vigil.prompt.skills import discover_skills

DEFAULT_SOUL = """\
You are vigil, a persistent personal AI agent running on the user's own machine.
You remember past conversations through your tools, keep notes in your memory, and work
carefully: you read before you write, you say what you did, and you ask before anything
destructive. Be direct and concise; prefer doing the work over describing it."""


@dataclass(frozen=True, slots=True)
class BuiltPrompt:
    """A freshly built prompt and what went into it."""

    text: str
    sources: tuple[str, ...]
    truncated: tuple[str, ...]


def build_system_prompt(
    profile: Profile,
    *,
    cwd: Path,
    started_at: float,
    max_file_chars: int = 20_000,
    include_context_files: bool = True,
) -> BuiltPrompt:
    """Read every source from disk and assemble the prompt for a conversation that started at
    ``started_at`` (epoch seconds; only its UTC date is used)."""
    parts: list[str] = []
    used: list[str] = []
    truncated: list[str] = []

    def add(heading: str | None, source: SourceText) -> None:
        parts.append(f"# {heading}\n\n{source.text}" if heading else source.text)
        used.append(source.label)
        if source.truncated:
            truncated.append(source.label)

    soul = read_capped(profile.soul_path, "SOUL.md", max_file_chars)
    add(None, soul or SourceText("default persona", DEFAULT_SOUL))

    skills = discover_skills(profile.skills_dir)
    if skills:
        lines = [f"- {s.name}: {s.description}" if s.description else f"- {s.name}" for s in skills]
        index = (
            "Skills you can load with the skill_view tool when one fits the task:\n"
            + "\n".join(lines)
        )
        add("Skills", SourceText("skills", index))

    if include_context_files:
        for path in find_context_files(cwd):
            label = _display_path(path, cwd)
            text = read_capped(path, label, max_file_chars)
            if text is not None:
                add(f"Project context: {label}", text)

    user = read_capped(profile.user_path, "USER.md", max_file_chars)
    if user is not None:
        add("About the user (USER.md)", user)
    memory = read_capped(profile.memory_path, "MEMORY.md", max_file_chars)
    if memory is not None:
        add("Your memory (MEMORY.md)", memory)

    day = datetime.fromtimestamp(started_at, timezone.utc).strftime("%Y-%m-%d")
    parts.append(f"This conversation started on {day} (UTC).")
    return BuiltPrompt("\n\n".join(parts) + "\n", tuple(used), tuple(truncated))


def check_profile_sources(profile: Profile) -> None:
    """Raise ``PromptSourceError`` if SOUL.md, USER.md or MEMORY.md exists but is not a
    readable regular file: checked before a session is created, so a broken file refuses the
    conversation instead of leaving an empty one behind."""
    for path, label in (
        (profile.soul_path, "SOUL.md"),
        (profile.user_path, "USER.md"),
        (profile.memory_path, "MEMORY.md"),
    ):
        try:
            check_regular(path)
        except UnsafeFile as exc:
            raise PromptSourceError(f"cannot use {label} for the system prompt: {exc}") from None


def _display_path(path: Path, cwd: Path) -> str:
    """The file's path relative to the repository root (or the working directory), so the
    prompt names no home directory or user name."""
    base = find_git_root(cwd.resolve()) or cwd.resolve()
    try:
        return str(path.relative_to(base))
    except ValueError:
        return path.name
