"""Building a system prompt from a profile's files."""

from __future__ import annotations

from pathlib import Path

from vigil.profiles import Profile
from vigil.prompt.builder import DEFAULT_SOUL, build_system_prompt

DAY = 1_800_000_000.0  # 2027-01-15 UTC


def _profile(tmp_path: Path) -> Profile:
    return Profile("default", tmp_path / "home").ensure()


def test_default_persona_and_date_only(tmp_path: Path) -> None:
    built = build_system_prompt(_profile(tmp_path), cwd=tmp_path, started_at=DAY)
    assert built.text.startswith(DEFAULT_SOUL)
    assert built.text.rstrip().endswith("This conversation started on 2027-01-15 (UTC).")
    assert built.sources == ("default persona",)


def test_parts_run_from_stable_to_volatile(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    profile.soul_path.write_text("SOUL TEXT")
    skill = profile.skills_dir / "deploy"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship the app\n---\nSteps...\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("REPO RULES")
    sub = repo / "pkg"
    sub.mkdir()
    (sub / "CLAUDE.md").write_text("PKG RULES")
    profile.user_path.write_text("USER TEXT")
    profile.memory_path.write_text("MEMORY TEXT")
    (tmp_path / "AGENTS.md").write_text("OUTSIDE THE REPO")

    text = build_system_prompt(profile, cwd=sub, started_at=DAY).text
    order = ["SOUL TEXT", "deploy: Ship the app", "REPO RULES", "PKG RULES", "USER TEXT", "MEMORY TEXT"]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions)
    assert "OUTSIDE THE REPO" not in text
    assert "Project context: AGENTS.md" in text and "Project context: pkg/CLAUDE.md" in text
    assert str(tmp_path) not in text  # no home directory or user name in the prompt


def test_same_files_same_bytes_wherever_built(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    profile.soul_path.write_text("persona")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("rules")
    first = build_system_prompt(profile, cwd=repo, started_at=DAY).text
    second = build_system_prompt(profile, cwd=repo, started_at=DAY + 3600).text
    assert first == second
    assert build_system_prompt(profile, cwd=repo, started_at=DAY + 86_400).text != first


def test_oversized_files_are_cut_with_a_marker(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    profile.memory_path.write_text("m" * 5000)
    built = build_system_prompt(profile, cwd=tmp_path, started_at=DAY, max_file_chars=1000)
    assert "[... MEMORY.md truncated: 5,000 characters, the first 1,000 shown ...]" in built.text
    assert built.truncated == ("MEMORY.md",)
    assert "m" * 1001 not in built.text


def test_context_files_can_be_switched_off(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("LOCAL RULES")
    profile = _profile(tmp_path)
    assert "LOCAL RULES" in build_system_prompt(profile, cwd=tmp_path, started_at=DAY).text
    assert "LOCAL RULES" not in build_system_prompt(
        profile, cwd=tmp_path, started_at=DAY, include_context_files=False
    ).text
