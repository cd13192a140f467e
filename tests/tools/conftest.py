"""Fixtures for the tool tests: a ToolContext rooted in tmp_path and a way to call tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.store.records import ToolCall
from vigil.tools.base import ToolContext, ToolResult
from vigil.tools.registry import ALL_TOOL_NAMES, run_tool_call

MakeCtx = Callable[..., ToolContext]
CallTool = Callable[..., Awaitable[ToolResult]]


@pytest.fixture
def make_ctx(tmp_path: Path) -> MakeCtx:
    """Build a ToolContext: profile home and working directory under tmp_path, default settings."""

    def make(**overrides: Any) -> ToolContext:
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        fields: dict[str, Any] = {
            "profile": Profile("default", tmp_path / "home").ensure(),
            "settings": Settings(),
            "cwd": work,
        }
        fields.update(overrides)
        return ToolContext(**fields)

    return make


@pytest.fixture
def ctx(make_ctx: MakeCtx) -> ToolContext:
    return make_ctx()


@pytest.fixture
def call_tool() -> CallTool:
    """Run a tool the way the agent does: a ToolCall with JSON arguments through the registry."""

    async def call(ctx: ToolContext, tool: str, /, **args: Any) -> ToolResult:
        return await run_tool_call(ToolCall("call-1", tool, json.dumps(args)), ctx, ALL_TOOL_NAMES)

    return call
