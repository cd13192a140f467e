"""MEMORY.md / USER.md entries: the file module and the memory tool."""

from __future__ import annotations

import stat

import pytest

from vigil.tools import memory_files
from vigil.tools.memory_files import MemoryFileError
from vigil.tools.base import ToolContext


def test_parse_entries_reads_bullets_and_continuations() -> None:
    text = "# Notes\n\nIntro paragraph.\n- first\n- second line one\n  second line two\n\n* third\n"
    entries = memory_files.parse_entries(text)
    assert [e.text for e in entries] == ["first", "second line one\nsecond line two", "third"]
    assert (entries[1].start, entries[1].end) == (4, 6)


def test_add_renders_multiline_entries_indented(tmp_path) -> None:
    path = tmp_path / "MEMORY.md"
    assert memory_files.add_entry(path, "deploys go through\nthe staging host first")
    assert path.read_text() == "- deploys go through\n  the staging host first\n"
    assert memory_files.read_entries(path) == ["deploys go through\nthe staging host first"]


def test_add_is_idempotent_and_strips_a_given_bullet(tmp_path) -> None:
    path = tmp_path / "MEMORY.md"
    assert memory_files.add_entry(path, "- uses fish shell")
    assert not memory_files.add_entry(path, "uses fish shell")
    assert path.read_text() == "- uses fish shell\n"


def test_edits_keep_hand_written_text(tmp_path) -> None:
    path = tmp_path / "USER.md"
    path.write_text("# About the user\n\nWritten by hand.\n\n- likes tea\n- lives in Oslo\n")
    memory_files.replace_entry(path, "Oslo", "lives in Bergen")
    memory_files.remove_entry(path, "tea")
    assert path.read_text() == "# About the user\n\nWritten by hand.\n\n- lives in Bergen\n"


def test_files_are_private_and_written_atomically(tmp_path) -> None:
    path = tmp_path / "MEMORY.md"
    memory_files.add_entry(path, "x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_ambiguous_and_missing_old_text(tmp_path) -> None:
    path = tmp_path / "MEMORY.md"
    memory_files.add_entry(path, "python 3.11 in the venv")
    memory_files.add_entry(path, "python tests use pytest")
    with pytest.raises(MemoryFileError, match="2 entries in MEMORY.md contain 'python'"):
        memory_files.remove_entry(path, "python")
    with pytest.raises(MemoryFileError, match="no entry in MEMORY.md contains 'rust'") as info:
        memory_files.replace_entry(path, "rust", "rust 1.80")
    assert "- python tests use pytest" in str(info.value)  # lists what there is
    assert len(memory_files.read_entries(path)) == 2


def test_cap_refuses_growth_but_allows_shrinking(tmp_path) -> None:
    path = tmp_path / "MEMORY.md"
    memory_files.add_entry(path, "a" * 80, cap=100)
    before = path.read_text()
    with pytest.raises(MemoryFileError, match="would grow to .* over its limit of 100"):
        memory_files.add_entry(path, "b" * 40, cap=100)
    assert path.read_text() == before
    memory_files.replace_entry(path, "aaa", "short", cap=10)  # over the cap but shrinking
    assert memory_files.read_entries(path) == ["short"]


async def test_tool_add_replace_remove(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "memory", action="add", target="memory", content="repo uses uv")
    assert not result.is_error
    assert "saved to MEMORY.md" in result.content
    assert "takes effect in new sessions or after `vigil sessions refresh-prompts`" in result.content
    assert memory_files.read_entries(ctx.profile.memory_path) == ["repo uses uv"]

    result = await call_tool(
        ctx, "memory", action="replace", target="memory", old_text="uv", content="repo uses poetry"
    )
    assert not result.is_error and "replaced an entry in MEMORY.md" in result.content
    assert memory_files.read_entries(ctx.profile.memory_path) == ["repo uses poetry"]

    result = await call_tool(ctx, "memory", action="remove", target="memory", old_text="poetry")
    assert not result.is_error and "removed 'repo uses poetry' from MEMORY.md" in result.content
    assert memory_files.read_entries(ctx.profile.memory_path) == []


async def test_tool_user_target_writes_user_md(ctx: ToolContext, call_tool) -> None:
    await call_tool(ctx, "memory", action="add", target="user", content="prefers short answers")
    assert memory_files.read_entries(ctx.profile.user_path) == ["prefers short answers"]
    assert not ctx.profile.memory_path.exists()


async def test_tool_errors(ctx: ToolContext, call_tool) -> None:
    await call_tool(ctx, "memory", action="add", target="memory", content="alpha one")
    await call_tool(ctx, "memory", action="add", target="memory", content="alpha two")

    ambiguous = await call_tool(ctx, "memory", action="remove", target="memory", old_text="alpha")
    assert ambiguous.is_error and "2 entries in MEMORY.md contain 'alpha'" in ambiguous.content

    no_content = await call_tool(ctx, "memory", action="add", target="memory")
    assert no_content.is_error and "needs `content`" in no_content.content

    no_old = await call_tool(ctx, "memory", action="replace", target="memory", content="x")
    assert no_old.is_error and "needs `old_text`" in no_old.content

    bad_action = await call_tool(ctx, "memory", action="append", target="memory", content="x")
    assert bad_action.is_error and "must be one of" in bad_action.content


async def test_tool_cap(ctx: ToolContext, call_tool) -> None:
    big = "word " * 1500
    assert (await call_tool(ctx, "memory", action="add", target="memory", content=big)).is_error is False
    result = await call_tool(ctx, "memory", action="add", target="memory", content=big + "again")
    assert result.is_error
    assert "over its limit of 8000" in result.content
