"""The registry: names, specs, pinning, argument checks and failures turned into results."""

from __future__ import annotations

import json

import pytest

from vigil.config.settings import Settings
from vigil.store.records import ToolCall
from vigil.tools.base import ToolContext
from vigil.tools.registry import (
    ALL_TOOL_NAMES,
    UnknownToolError,
    default_tool_names,
    get_tool,
    run_tool_call,
    tool_specs,
)


def call(name: str, arguments: str | dict) -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall("call-1", name, text)


def test_all_tool_names_are_stable() -> None:
    assert ALL_TOOL_NAMES == (
        "terminal",
        "read_file",
        "write_file",
        "patch_file",
        "memory",
        "skills_list",
        "skill_view",
        "session_search",
        "cron",
        "send_file",
    )


def test_specs_follow_the_given_order_and_are_well_formed() -> None:
    names = ["memory", "terminal", "read_file"]
    specs = tool_specs(names)
    assert [spec.name for spec in specs] == names
    for spec in tool_specs(ALL_TOOL_NAMES):
        assert spec.description
        assert spec.parameters["type"] == "object"
        assert set(spec.parameters.get("required", [])) <= set(spec.parameters["properties"])
        json.dumps(spec.parameters)  # serialisable as is


def test_specs_are_identical_between_calls() -> None:
    # They are part of the cached request prefix.
    assert tool_specs(ALL_TOOL_NAMES) == tool_specs(ALL_TOOL_NAMES)


def test_unknown_tool_names() -> None:
    with pytest.raises(UnknownToolError, match="unknown tool 'browser'"):
        get_tool("browser")
    with pytest.raises(UnknownToolError):
        tool_specs(["terminal", "browser"])


def test_default_tool_names() -> None:
    assert default_tool_names(Settings()) == list(ALL_TOOL_NAMES)
    settings = Settings.from_data({"tools": {"enabled": ["read_file", "memory", "read_file"]}})
    assert default_tool_names(settings) == ["read_file", "memory"]
    with pytest.raises(ValueError, match="unknown tool 'brwoser'"):  # config.yaml is checked at load
        Settings.from_data({"tools": {"enabled": ["read_file", "brwoser"]}})
    # The registry still refuses a name that got past validation (settings built in code).
    bad = settings.copy_with(update={"tools": settings.tools.copy_with(update={"enabled": ["read_file", "brwoser"]})})
    with pytest.raises(UnknownToolError, match="tools.enabled lists unknown tool\\(s\\): brwoser"):
        default_tool_names(bad)


async def test_tool_not_pinned_in_session_is_refused(ctx: ToolContext) -> None:
    (ctx.cwd / "a.txt").write_text("x")
    result = await run_tool_call(call("read_file", {"path": "a.txt"}), ctx, ["terminal"])
    assert result.is_error
    assert result.content == "tool 'read_file' is not available in this session (available: terminal)"


async def test_unknown_tool_is_refused(ctx: ToolContext) -> None:
    result = await run_tool_call(call("browser", {}), ctx, ALL_TOOL_NAMES)
    assert result.is_error and "not available in this session" in result.content
    pinned = await run_tool_call(call("old_tool", {}), ctx, ["old_tool"])
    assert pinned.is_error and "not known to this version" in pinned.content


async def test_invalid_json_arguments(ctx: ToolContext) -> None:
    result = await run_tool_call(call("read_file", '{"path": "a.txt"'), ctx, ALL_TOOL_NAMES)
    assert result.is_error
    assert result.content.startswith("read_file: the arguments are not valid JSON (")
    array = await run_tool_call(call("read_file", '["a.txt"]'), ctx, ALL_TOOL_NAMES)
    assert array.is_error and "must be a JSON object, not list" in array.content


async def test_missing_and_mistyped_arguments(ctx: ToolContext) -> None:
    missing = await run_tool_call(call("patch_file", {"path": "a", "new_text": "b"}), ctx, ALL_TOOL_NAMES)
    assert missing.is_error
    assert missing.content == "patch_file: missing required argument 'old_text'"

    wrong = await run_tool_call(call("read_file", {"path": 7}), ctx, ALL_TOOL_NAMES)
    assert wrong.content == "read_file: argument 'path' must be a string, not an integer"

    boolean = await run_tool_call(call("read_file", {"path": "a", "limit": True}), ctx, ALL_TOOL_NAMES)
    assert boolean.content == "read_file: argument 'limit' must be an integer, not a boolean"

    extra = await run_tool_call(call("read_file", {"path": "a", "lines": 3}), ctx, ALL_TOOL_NAMES)
    assert extra.is_error and "unexpected argument(s) 'lines'" in extra.content


async def test_integral_float_is_accepted_as_integer(ctx: ToolContext) -> None:
    (ctx.cwd / "a.txt").write_text("1\n2\n3\n")
    result = await run_tool_call(call("read_file", {"path": "a.txt", "limit": 2.0}), ctx, ALL_TOOL_NAMES)
    assert not result.is_error
    assert "(lines 1-2 of 3)" in result.content


async def test_empty_arguments_mean_no_arguments(ctx: ToolContext) -> None:
    result = await run_tool_call(call("skills_list", ""), ctx, ALL_TOOL_NAMES)
    assert not result.is_error


async def test_exception_in_a_tool_becomes_a_one_line_error(ctx: ToolContext) -> None:
    (ctx.cwd / "plain-file").write_text("not a directory")
    result = await run_tool_call(
        call("write_file", {"path": "plain-file/child.txt", "content": "x"}), ctx, ALL_TOOL_NAMES
    )
    assert result.is_error
    assert result.content.startswith("write_file failed: ")
    assert "\n" not in result.content


async def test_results_are_capped(ctx: ToolContext) -> None:
    result = await run_tool_call(call("terminal", {"command": "seq 1 5000"}), ctx, ALL_TOOL_NAMES, cap=300)
    assert "characters omitted" in result.content
    assert len(result.content) < 400
