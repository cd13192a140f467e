"""The ``skills_list`` and ``skill_view`` tools: the skill index and one skill's full text."""

from __future__ import annotations

import asyncio
from typing import Any

from vigil.prompt.skills import SkillNotFound, find_skill, scan_skills
from vigil.tools.base import Tool, ToolContext, ToolFailure, ToolResult


class SkillsListTool(Tool):
    name = "skills_list"
    description = (
        "List the installed skills (name — description). A skill is a set of instructions "
        "for a kind of task; read one with skill_view before doing that task."
    )
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        skills_dir = ctx.profile.skills_dir
        scan = await asyncio.to_thread(scan_skills, skills_dir)
        if not scan.skills:
            lines = [f"no skills installed (a skill is a folder with a SKILL.md under {skills_dir})"]
        else:
            lines = [f"{len(scan.skills)} skill(s):"]
            for info in scan.skills:
                lines.append(f"- {info.name} — {info.description}" if info.description else f"- {info.name}")
        lines.extend(scan.warnings)
        return ToolResult("\n".join(lines))


class SkillViewTool(Tool):
    name = "skill_view"
    description = (
        "Show the full SKILL.md of one skill, by name. Files the skill refers to live in the "
        "same folder (its path is shown) and can be read with read_file."
    )
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill's name."}},
        "required": ["name"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        def load() -> ToolResult:
            try:
                info = find_skill(ctx.profile.skills_dir, args["name"])
            except SkillNotFound as exc:
                raise ToolFailure(str(exc)) from None
            text = info.path.read_text(encoding="utf-8")
            return ToolResult(f"skill '{info.name}' ({info.path})\n\n{text}")

        return await asyncio.to_thread(load)
