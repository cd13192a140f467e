"""The ``memory`` tool: add, replace or remove entries of MEMORY.md and USER.md."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from vigil.tools import memory_files
from vigil.tools.memory_files import DEFAULT_CHAR_CAP, MemoryFileError
from vigil.tools.base import Tool, ToolContext, ToolFailure, ToolResult

_TAKES_EFFECT = (
    "takes effect in new sessions or after `vigil sessions refresh-prompts`; "
    "this session's system prompt is unchanged"
)


class MemoryTool(Tool):
    name = "memory"
    description = (
        "Keep durable notes across sessions. target 'memory' is your own notes (MEMORY.md: "
        "facts about the environment, conventions, lessons learned); target 'user' is the user "
        "profile (USER.md: who the user is, preferences, habits). action 'add' saves `content` "
        "as a new entry; 'replace' swaps the entry containing `old_text` for `content`; "
        "'remove' deletes the entry containing `old_text`. `old_text` is a short unique part "
        "of the entry. Keep entries short and durable; each file holds at most "
        f"{DEFAULT_CHAR_CAP} characters. Saved entries reach the system prompt of new sessions."
    )
    parameters = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove"]},
            "target": {"type": "string", "enum": ["memory", "user"]},
            "content": {"type": "string", "description": "The entry text (add, replace)."},
            "old_text": {
                "type": "string",
                "description": "A unique part of the existing entry (replace, remove).",
            },
        },
        "required": ["action", "target"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = ctx.profile.memory_path if args["target"] == "memory" else ctx.profile.user_path
        try:
            return await asyncio.to_thread(self._apply, path, args)
        except MemoryFileError as exc:
            raise ToolFailure(str(exc)) from None

    def _apply(self, path: Path, args: dict[str, Any]) -> ToolResult:
        action = args["action"]
        content = args.get("content")
        old_text = args.get("old_text")
        if action in ("add", "replace") and not (content and content.strip()):
            raise ToolFailure(f"action '{action}' needs `content`: the entry text to save")
        if action in ("replace", "remove") and not (old_text and old_text.strip()):
            raise ToolFailure(f"action '{action}' needs `old_text`: a unique part of the entry")

        if action == "add":
            if not memory_files.add_entry(path, content):
                return ToolResult(f"{path.name} already has this entry; nothing changed")
            done = "saved to"
        elif action == "replace":
            memory_files.replace_entry(path, old_text, content)
            done = "replaced an entry in"
        else:
            done = f"removed {_quote(memory_files.remove_entry(path, old_text))} from"
        size = len(memory_files.read_text(path))
        return ToolResult(f"{done} {path.name} ({size}/{DEFAULT_CHAR_CAP} characters); {_TAKES_EFFECT}")


def _quote(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 3] + "...")
