"""File tools: ``read_file``, ``write_file`` and ``patch_file`` (exact-text replacement).

Relative paths are taken relative to the session's working directory. They keep the same
boundary as the terminal's sandbox (:mod:`vigil.tools.file_guard`): they change files only in
the workspace and read nothing the sandbox hides, unless a person approves.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from vigil.tools.base import Tool, ToolContext, ToolFailure, ToolResult
from vigil.tools.file_guard import check_read, check_write

DEFAULT_LINE_LIMIT = 2000
LINE_CHAR_CAP = 2000
READ_CHAR_CAP = 50_000
_SNIFF_BYTES = 8192


def _looks_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(_SNIFF_BYTES)


def _existing_file(ctx: ToolContext, raw: str) -> Path:
    path = ctx.resolve(raw)
    if not path.exists():
        raise ToolFailure(f"{path} does not exist")
    if path.is_dir():
        raise ToolFailure(f"{path} is a directory, not a file (use the terminal tool to list it)")
    if _looks_binary(path):
        size = path.stat().st_size
        raise ToolFailure(f"{path} is a binary file ({size} bytes); only text files can be read or patched")
    return path


class ReadFileTool(Tool):
    name = "read_file"
    description = (
        "Read a text file and return its lines numbered from 1. For long files use `offset` "
        "(first line to show, 1-based) and `limit` (number of lines; default 2000). "
        "Binary files are refused."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path (relative to the working directory)."},
            "offset": {"type": "integer", "description": "First line to show, 1-based (default 1)."},
            "limit": {"type": "integer", "description": "Maximum number of lines (default 2000)."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        offset = args.get("offset") or 1
        limit = args.get("limit") or DEFAULT_LINE_LIMIT
        if offset < 1 or limit < 1:
            raise ToolFailure("offset and limit must be at least 1")
        if refusal := await check_read(ctx, self.name, ctx.resolve(args["path"])):
            return refusal
        return await asyncio.to_thread(self._read, ctx, args["path"], offset, limit)

    def _read(self, ctx: ToolContext, raw: str, offset: int, limit: int) -> ToolResult:
        path = _existing_file(ctx, raw)
        shown: list[str] = []
        size = 0
        total = 0
        last_shown = offset - 1
        with path.open("r", encoding="utf-8", errors="replace", newline=None) as handle:
            for number, line in enumerate(handle, start=1):
                total = number
                if number < offset or len(shown) >= limit or size > READ_CHAR_CAP:
                    continue
                line = line.rstrip("\n")
                if len(line) > LINE_CHAR_CAP:
                    line = line[:LINE_CHAR_CAP] + f" [... line cut, {len(line)} characters in all]"
                entry = f"{number:>6}\t{line}"
                size += len(entry) + 1
                shown.append(entry)
                last_shown = number
        if total == 0:
            return ToolResult(f"{path} is empty")
        if offset > total:
            raise ToolFailure(f"{path} has {total} lines; offset {offset} is past the end")
        header = f"{path} (lines {offset}-{last_shown} of {total})"
        footer = ""
        if last_shown < total:
            footer = f"\n[{total - last_shown} more lines; continue with offset={last_shown + 1}]"
        return ToolResult(header + "\n" + "\n".join(shown) + footer)


class WriteFileTool(Tool):
    name = "write_file"
    description = (
        "Write `content` to a file, replacing it if it exists and creating missing parent "
        "directories. Prefer patch_file for small changes to an existing file."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path (relative to the working directory)."},
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args["path"])
        if refusal := await check_write(ctx, self.name, path):
            return refusal
        return await asyncio.to_thread(self._write, path, args["content"])

    def _write(self, path: Path, content: str) -> ToolResult:
        if path.is_dir():
            raise ToolFailure(f"{path} is a directory")
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        # Writing in place (not temp + rename) keeps the file's permissions and hard links.
        path.write_bytes(data)
        verb = "replaced" if existed else "created"
        return ToolResult(f"{verb} {path}: wrote {len(data)} bytes")


class PatchFileTool(Tool):
    name = "patch_file"
    description = (
        "Replace an exact piece of text in a file with new text. `old_text` must match the "
        "file exactly (whitespace and indentation included) and, unless `replace_all` is true, "
        "occur exactly once: include enough surrounding lines to make it unique."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path (relative to the working directory)."},
            "old_text": {"type": "string", "description": "The exact text to replace."},
            "new_text": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence instead of requiring exactly one.",
            },
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if refusal := await check_write(ctx, self.name, ctx.resolve(args["path"])):
            return refusal
        return await asyncio.to_thread(
            self._patch,
            ctx,
            args["path"],
            args["old_text"],
            args["new_text"],
            bool(args.get("replace_all", False)),
        )

    def _patch(self, ctx: ToolContext, raw: str, old: str, new: str, replace_all: bool) -> ToolResult:
        if not old:
            raise ToolFailure("old_text is empty; give the exact text to replace")
        path = _existing_file(ctx, raw)
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailure(f"{path} is not UTF-8 text; it cannot be patched") from None
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
            # Models write "\n"; a file with Windows line endings should still be patchable.
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            count = text.count(old)
        if count == 0:
            raise ToolFailure(f"old_text was not found in {path}" + _near_miss(text, old))
        if count > 1 and not replace_all:
            lines = ", ".join(str(n) for n in _match_lines(text, old)[:10])
            raise ToolFailure(
                f"old_text occurs {count} times in {path} (at lines {lines}); include more "
                "surrounding text to make it unique, or set replace_all to true"
            )
        at = _match_lines(text, old)
        patched = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        path.write_bytes(patched.encode("utf-8"))
        where = f"line {at[0]}" if len(at) == 1 else "lines " + ", ".join(str(n) for n in at[:10])
        noun = "occurrence" if count == 1 else "occurrences"
        return ToolResult(f"patched {path}: replaced {count} {noun} (at {where})")


def _match_lines(text: str, needle: str) -> list[int]:
    """1-based line numbers where each non-overlapping occurrence of ``needle`` starts."""
    lines: list[int] = []
    start = text.find(needle)
    while start != -1:
        lines.append(text.count("\n", 0, start) + 1)
        start = text.find(needle, start + len(needle))
    return lines


def _near_miss(text: str, old: str) -> str:
    """A hint when ``old`` matches once whitespace differences are ignored."""
    words = old.split()
    if not words:
        return ""
    pattern = r"\s+".join(re.escape(word) for word in words)
    match = re.search(pattern, text)
    if match is None:
        return "; read the file again to see its current content"
    line = text.count("\n", 0, match.start()) + 1
    return (
        f"; text matching it apart from whitespace starts at line {line}: copy it exactly, "
        "including indentation and line breaks"
    )
