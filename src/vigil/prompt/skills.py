"""Skills: folders ``skills/<name>/SKILL.md`` whose YAML front matter names and describes them.

The prompt builder puts the index (name and description) into the system prompt; the full
text is loaded on demand by the ``skill_view`` tool. Discovery never fails because of one bad
skill: a folder with broken front matter is skipped and a warning says why.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path


from vigil.safe_files import UnsafeFile, read_text

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
DESCRIPTION_CAP = 500
SKILL_FILE_CAP = 1 << 20
"""Bytes a SKILL.md may have; it is loaded into the conversation whole."""
_NAME_RE = re.compile(r"^[^\s/\\][^/\\\n]*$")
_CLOSING = ("---", "...")


@dataclass(frozen=True, slots=True)
class SkillInfo:
    """One skill: its name, its one-line description and the path of its SKILL.md."""

    name: str
    description: str
    path: Path


@dataclass(frozen=True, slots=True)
class SkillScan:
    """The usable skills (sorted by name) and one warning per skipped folder."""

    skills: list[SkillInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class SkillNotFound(Exception):
    """No skill has this name; ``available`` lists the names there are."""

    def __init__(self, name: str, available: list[str]) -> None:
        names = ", ".join(available) if available else "none installed"
        super().__init__(f"no skill named '{name}' (available: {names})")
        self.name = name
        self.available = available


class FrontMatterError(ValueError):
    """A SKILL.md's front matter cannot be used."""


def scan_skills(skills_dir: Path) -> SkillScan:
    """Every usable skill under ``skills_dir``, plus warnings for the skipped ones."""
    if not skills_dir.is_dir():
        if skills_dir.exists() or skills_dir.is_symlink():
            return SkillScan(warnings=[f"no skills loaded: {skills_dir} is not a directory"])
        return SkillScan()
    candidates: list[SkillInfo] = []
    warnings: list[str] = []
    try:
        folders = sorted(skills_dir.iterdir())
    except OSError as exc:
        return SkillScan(warnings=[f"no skills loaded: cannot list {skills_dir}: {exc.strerror}"])
    for folder in folders:
        skill_file = folder / SKILL_FILE
        if folder.name.startswith(".") or not skill_file.is_file():
            continue
        try:
            candidates.append(_read_info(folder.name, skill_file))
        except UnsafeFile as exc:
            warnings.append(f"skipped skill '{folder.name}': {exc}")
        except (OSError, FrontMatterError) as exc:
            warnings.append(f"skipped skill '{folder.name}': {skill_file}: {exc}")
    # On a name clash the folder named like the skill wins, whatever the folder order.
    candidates.sort(key=lambda info: (info.name != info.path.parent.name, info.path.parent.name))
    found: dict[str, SkillInfo] = {}
    for info in candidates:
        if info.name in found:
            warnings.append(
                f"skipped skill '{info.path.parent.name}': the name '{info.name}' is already "
                f"used by {found[info.name].path}"
            )
            continue
        found[info.name] = info
    skills = sorted(found.values(), key=lambda s: (s.name.casefold(), s.name))
    return SkillScan(skills, warnings)


def discover_skills(skills_dir: Path) -> list[SkillInfo]:
    """The usable skills sorted by name; skipped folders are logged as warnings."""
    scan = scan_skills(skills_dir)
    for warning in scan.warnings:
        log.warning("%s", warning)
    return scan.skills


def load_skill(skills_dir: Path, name: str) -> str:
    """The full text of the skill called ``name``; ``SkillNotFound`` if there is none."""
    return read_skill_text(find_skill(skills_dir, name))


def read_skill_text(info: SkillInfo) -> str:
    """The full text of a found skill's SKILL.md (a regular UTF-8 file of at most
    ``SKILL_FILE_CAP`` bytes; ``UnsafeFile`` otherwise)."""
    text = read_text(info.path, SKILL_FILE_CAP, what="a SKILL.md")
    if text is None:
        raise UnsafeFile(info.path, "no longer exists")
    return text


def find_skill(skills_dir: Path, name: str) -> SkillInfo:
    """The skill called ``name`` (its front-matter name, else its folder name)."""
    skills = scan_skills(skills_dir).skills
    for info in skills:
        if info.name == name:
            return info
    for info in skills:
        if info.path.parent.name == name:
            return info
    raise SkillNotFound(name, [info.name for info in skills])


def parse_front_matter(text: str) -> tuple[dict[str, object], str]:
    """Split ``text`` into its YAML front matter (``{}`` if none) and the body after it."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].rstrip() in _CLOSING:
            raw = "".join(lines[1:index])
            body = "".join(lines[index + 1 :])
            break
    else:
        raise FrontMatterError("the front matter opened with '---' is never closed")
    import yaml  # only once a skill's front matter is read

    from vigil.config import strict_yaml

    try:
        data = strict_yaml.load(raw)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontMatterError(f"invalid YAML in the front matter: {problem}") from None
    if data is None:
        return {}, body
    if not isinstance(data, dict):
        raise FrontMatterError("the front matter must be a mapping (name: ..., description: ...)")
    return data, body


def _read_info(folder_name: str, skill_file: Path) -> SkillInfo:
    text = read_text(skill_file, SKILL_FILE_CAP, what="a SKILL.md")
    if text is None:
        raise UnsafeFile(skill_file, "disappeared while reading the skills")
    meta, _ = parse_front_matter(text)
    name = meta.get("name", folder_name)
    description = meta.get("description", "")
    if not isinstance(name, str) or not _NAME_RE.match(name.strip()):
        raise FrontMatterError(f"'name' must be a single-line text without slashes, not {name!r}")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise FrontMatterError(f"'description' must be text, not {type(description).__name__}")
    # The index is one line per skill, so flatten and bound the description.
    flat = " ".join(description.split())
    if len(flat) > DESCRIPTION_CAP:
        flat = flat[: DESCRIPTION_CAP - 3] + "..."
    return SkillInfo(name=name.strip(), description=flat, path=skill_file)
