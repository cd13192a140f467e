"""Skill discovery from SKILL.md front matter, and the skills_list / skill_view tools."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from vigil.prompt.skills import SkillNotFound, discover_skills, load_skill, scan_skills
from vigil.tools.base import ToolContext


def write_skill(skills_dir: Path, folder: str, text: str) -> Path:
    path = skills_dir / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "zeta", "---\nname: zeta\ndescription: Last one.\n---\n# Zeta\nBody.\n")
    write_skill(
        root,
        "deploy-folder",
        "---\nname: deploy\ndescription: >\n  Ship a release\n  to production.\n---\nSteps...\n",
    )
    write_skill(root, "plain", "# Plain skill\nNo front matter at all.\n")
    write_skill(root, "alpha", "---\ndescription: First by name.\n---\nalpha body\n")
    return root


def test_discovery_sorted_with_defaults(skills_dir: Path) -> None:
    skills = discover_skills(skills_dir)
    assert [(s.name, s.description) for s in skills] == [
        ("alpha", "First by name."),  # name defaults to the folder name
        ("deploy", "Ship a release to production."),  # folded into one line
        ("plain", ""),
        ("zeta", "Last one."),
    ]
    assert skills[1].path == skills_dir / "deploy-folder" / "SKILL.md"


def test_broken_front_matter_is_skipped_with_a_warning(
    skills_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_skill(skills_dir, "unclosed", "---\nname: unclosed\ndescription: never ends\n")
    write_skill(skills_dir, "badyaml", "---\nname: [unterminated\n---\nbody\n")
    write_skill(skills_dir, "notmap", "---\n- a\n- b\n---\nbody\n")
    write_skill(skills_dir, "badname", "---\nname: 42\n---\nbody\n")
    write_skill(skills_dir, "dupe", "---\nname: zeta\ndescription: clash\n---\n")
    (skills_dir / "no-skill-file").mkdir()

    scan = scan_skills(skills_dir)
    assert [s.name for s in scan.skills] == ["alpha", "deploy", "plain", "zeta"]
    assert len(scan.warnings) == 5
    joined = "\n".join(scan.warnings)
    assert "'unclosed'" in joined and "never closed" in joined
    assert "'badyaml'" in joined and "invalid YAML" in joined
    assert "'notmap'" in joined and "must be a mapping" in joined
    assert "'badname'" in joined
    assert "'dupe'" in joined and "already used" in joined

    with caplog.at_level(logging.WARNING, logger="vigil.prompt.skills"):
        assert len(discover_skills(skills_dir)) == 4
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 5


def test_missing_skills_dir_is_empty(tmp_path: Path) -> None:
    assert discover_skills(tmp_path / "nope") == []


def test_load_skill_by_name_or_folder(skills_dir: Path) -> None:
    assert load_skill(skills_dir, "deploy").endswith("Steps...\n")
    assert load_skill(skills_dir, "deploy-folder").endswith("Steps...\n")
    with pytest.raises(SkillNotFound, match="available: alpha, deploy, plain, zeta"):
        load_skill(skills_dir, "../zeta")


async def test_skills_list_tool(ctx: ToolContext, call_tool) -> None:
    empty = await call_tool(ctx, "skills_list")
    assert empty.content.startswith("no skills installed")

    write_skill(ctx.profile.skills_dir, "deploy", "---\ndescription: Ship it.\n---\n")
    write_skill(ctx.profile.skills_dir, "notes", "just text\n")
    write_skill(ctx.profile.skills_dir, "broken", "---\nname: [\n---\n")
    result = await call_tool(ctx, "skills_list")
    lines = result.content.splitlines()
    assert lines[:3] == ["2 skill(s):", "- deploy — Ship it.", "- notes"]
    assert lines[3].startswith("skipped skill 'broken'")


async def test_skill_view_tool(ctx: ToolContext, call_tool) -> None:
    path = write_skill(ctx.profile.skills_dir, "deploy", "---\ndescription: Ship it.\n---\nRun make ship.\n")
    result = await call_tool(ctx, "skill_view", name="deploy")
    assert not result.is_error
    assert result.content.startswith(f"skill 'deploy' ({path})\n\n---\n")
    assert result.content.endswith("Run make ship.\n")

    unknown = await call_tool(ctx, "skill_view", name="nope")
    assert unknown.is_error
    assert "no skill named 'nope' (available: deploy)" in unknown.content
