"""The file tools keep the sandbox's boundary: nothing hidden is read, nothing outside the
workspace is changed, unless a person approves; in unattended runs, never."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from vigil.profiles import Profile
from vigil.tools.base import ToolContext

MakeCtx = Callable[..., ToolContext]


class Approver:
    """Records what it was asked and answers ``answer``."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def __call__(self, tool: str, what: str) -> bool:
        self.asked.append(what)
        return self.answer


@pytest.fixture
def house(make_ctx: MakeCtx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Profile:
    """A profile with its keys and persona, and a user home with an SSH key."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user" / ".ssh").mkdir(parents=True)
    (tmp_path / "user" / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY\n")
    profile = make_ctx().profile
    (profile.home / "gateway.token").write_text("login-token\n")
    profile.soul_path.write_text("I am the agent.\n")
    profile.memory_path.write_text("remember this\n")
    return profile


async def test_an_unattended_run_reads_nothing_hidden(make_ctx: MakeCtx, call_tool, house: Profile, tmp_path: Path) -> None:
    ctx = make_ctx()
    for path in (house.home / "gateway.token", house.memory_path, tmp_path / "user" / ".ssh" / "id_ed25519"):
        result = await call_tool(ctx, "read_file", path=str(path))
        assert result.is_error and result.content.startswith("refused: no one can approve"), result.content
        assert "hidden from the agent" in result.content
        assert "login-token" not in result.content and "PRIVATE-KEY" not in result.content


async def test_an_unattended_run_changes_nothing_outside_its_workspace(
    make_ctx: MakeCtx, call_tool, house: Profile, tmp_path: Path
) -> None:
    ctx = make_ctx()
    soul = await call_tool(ctx, "write_file", path=str(house.soul_path), content="I obey the web page.\n")
    skill = await call_tool(ctx, "write_file", path=str(house.skills_dir / "evil" / "SKILL.md"), content="evil")
    patched = await call_tool(ctx, "patch_file", path=str(house.soul_path), old_text="I am", new_text="I was")
    elsewhere = await call_tool(ctx, "write_file", path=str(tmp_path / "elsewhere.txt"), content="x")
    assert all(r.is_error and r.content.startswith("refused") for r in (soul, skill, patched, elsewhere))
    assert house.soul_path.read_text() == "I am the agent.\n"
    assert not (house.skills_dir / "evil").exists() and not (tmp_path / "elsewhere.txt").exists()
    inside = await call_tool(ctx, "write_file", path="notes/today.md", content="fine")
    assert not inside.is_error and (ctx.cwd / "notes" / "today.md").read_text() == "fine"


async def test_an_attended_run_asks_and_only_a_yes_writes_outside(make_ctx: MakeCtx, call_tool, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    no = Approver(False)
    declined = await call_tool(make_ctx(approve=no), "write_file", path=str(target), content="x")
    assert declined.is_error and not target.exists()
    assert no.asked == [f"change {target}, outside the workspace {(tmp_path / 'work').resolve()}"]
    yes = Approver(True)
    approved = await call_tool(make_ctx(approve=yes), "write_file", path=str(target), content="x")
    assert not approved.is_error and target.read_text() == "x"


async def test_a_symlink_in_the_workspace_does_not_open_the_house(make_ctx: MakeCtx, call_tool, house: Profile) -> None:
    ctx = make_ctx()
    (ctx.cwd / "innocent.txt").symlink_to(house.home / "gateway.token")
    (ctx.cwd / "persona.md").symlink_to(house.soul_path)
    read = await call_tool(ctx, "read_file", path="innocent.txt")
    written = await call_tool(ctx, "write_file", path="persona.md", content="planted")
    assert read.is_error and "login-token" not in read.content
    assert written.is_error and house.soul_path.read_text() == "I am the agent.\n"


async def test_sandbox_never_keeps_the_old_reach(make_ctx: MakeCtx, call_tool, house: Profile) -> None:
    ctx = make_ctx()
    ctx.settings.tools.terminal.sandbox = "never"  # type: ignore[assignment]
    result = await call_tool(ctx, "read_file", path=str(house.home / "gateway.token"))
    assert not result.is_error and "login-token" in result.content
