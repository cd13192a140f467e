"""read_file, write_file and patch_file on real files."""

from __future__ import annotations

import os

from vigil.tools.base import ToolContext
from vigil.tools.files import LINE_CHAR_CAP


async def test_read_file_numbers_lines(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "a.txt").write_text("alpha\nbeta\ngamma\n")
    result = await call_tool(ctx, "read_file", path="a.txt")
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[0] == f"{ctx.cwd / 'a.txt'} (lines 1-3 of 3)"
    assert lines[1:] == ["     1\talpha", "     2\tbeta", "     3\tgamma"]


async def test_read_file_offset_and_limit(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = await call_tool(ctx, "read_file", path="n.txt", offset=10, limit=3)
    lines = result.content.splitlines()
    assert lines[0].endswith("(lines 10-12 of 100)")
    assert lines[1:4] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert lines[4] == "[88 more lines; continue with offset=13]"


async def test_read_file_offset_past_end(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "s.txt").write_text("one\n")
    result = await call_tool(ctx, "read_file", path="s.txt", offset=5)
    assert result.is_error
    assert "has 1 lines; offset 5 is past the end" in result.content


async def test_read_file_absolute_path_and_empty_file(ctx: ToolContext, call_tool, tmp_path) -> None:
    target = tmp_path / "elsewhere" / "empty.txt"
    target.parent.mkdir()
    target.write_text("")
    result = await call_tool(ctx, "read_file", path=str(target))
    assert not result.is_error
    assert result.content == f"{target} is empty"


async def test_read_file_cuts_very_long_lines(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "long.txt").write_text("x" * (LINE_CHAR_CAP + 500) + "\n")
    result = await call_tool(ctx, "read_file", path="long.txt")
    assert f"line cut, {LINE_CHAR_CAP + 500} characters in all" in result.content
    assert len(result.content) < LINE_CHAR_CAP + 200


async def test_read_file_caps_total_size(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "big.txt").write_text(("y" * 1000 + "\n") * 200)
    result = await call_tool(ctx, "read_file", path="big.txt")
    assert len(result.content) < 60_000
    assert "more lines; continue with offset=" in result.content


async def test_read_file_refuses_binary(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = await call_tool(ctx, "read_file", path="blob.bin")
    assert result.is_error
    assert "binary file" in result.content


async def test_read_file_missing_and_directory(ctx: ToolContext, call_tool) -> None:
    missing = await call_tool(ctx, "read_file", path="nope.txt")
    assert missing.is_error and "does not exist" in missing.content
    (ctx.cwd / "d").mkdir()
    directory = await call_tool(ctx, "read_file", path="d")
    assert directory.is_error and "is a directory" in directory.content


async def test_write_file_creates_parents_and_reports_bytes(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "write_file", path="deep/er/out.txt", content="héllo\n")
    target = ctx.cwd / "deep" / "er" / "out.txt"
    assert not result.is_error
    assert target.read_text() == "héllo\n"
    assert result.content == f"created {target}: wrote 7 bytes"


async def test_write_file_replaces_and_keeps_mode(ctx: ToolContext, call_tool) -> None:
    target = ctx.cwd / "script.sh"
    target.write_text("old")
    os.chmod(target, 0o755)
    result = await call_tool(ctx, "write_file", path="script.sh", content="new")
    assert result.content.startswith("replaced ")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o755


async def test_write_file_onto_directory_is_an_error(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "d").mkdir()
    result = await call_tool(ctx, "write_file", path="d", content="x")
    assert result.is_error and "is a directory" in result.content


async def test_patch_file_replaces_unique_text(ctx: ToolContext, call_tool) -> None:
    target = ctx.cwd / "code.py"
    target.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = await call_tool(ctx, "patch_file", path="code.py", old_text="return 2", new_text="return 3")
    assert not result.is_error
    assert result.content == f"patched {target}: replaced 1 occurrence (at line 5)"
    assert target.read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"


async def test_patch_file_not_found_changes_nothing(ctx: ToolContext, call_tool) -> None:
    target = ctx.cwd / "code.py"
    target.write_text("a = 1\n")
    result = await call_tool(ctx, "patch_file", path="code.py", old_text="b = 2", new_text="b = 3")
    assert result.is_error
    assert "old_text was not found" in result.content
    assert target.read_text() == "a = 1\n"


async def test_patch_file_not_found_hints_at_whitespace(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "code.py").write_text("x = 0\nif x:\n        y = 1\n")
    result = await call_tool(ctx, "patch_file", path="code.py", old_text="if x:\n    y = 1", new_text="")
    assert result.is_error
    assert "apart from whitespace starts at line 2" in result.content


async def test_patch_file_multiple_matches_need_replace_all(ctx: ToolContext, call_tool) -> None:
    target = ctx.cwd / "t.txt"
    target.write_text("foo\nbar\nfoo\nfoo\n")
    result = await call_tool(ctx, "patch_file", path="t.txt", old_text="foo", new_text="baz")
    assert result.is_error
    assert "occurs 3 times" in result.content and "lines 1, 3, 4" in result.content
    assert target.read_text() == "foo\nbar\nfoo\nfoo\n"

    result = await call_tool(
        ctx, "patch_file", path="t.txt", old_text="foo", new_text="baz", replace_all=True
    )
    assert not result.is_error
    assert "replaced 3 occurrences" in result.content
    assert target.read_text() == "baz\nbar\nbaz\nbaz\n"


async def test_patch_file_keeps_windows_line_endings(ctx: ToolContext, call_tool) -> None:
    target = ctx.cwd / "w.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await call_tool(ctx, "patch_file", path="w.txt", old_text="one\ntwo", new_text="1\n2")
    assert not result.is_error, result.content
    assert target.read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_patch_file_empty_old_text_and_binary(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "a.txt").write_text("a")
    empty = await call_tool(ctx, "patch_file", path="a.txt", old_text="", new_text="b")
    assert empty.is_error and "old_text is empty" in empty.content
    (ctx.cwd / "b.bin").write_bytes(b"a\x00b")
    binary = await call_tool(ctx, "patch_file", path="b.bin", old_text="a", new_text="c")
    assert binary.is_error and "binary file" in binary.content
