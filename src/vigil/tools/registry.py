"""The built-in tools by name, and the one place a model's tool call is checked and run.

A session pins its tool names when it starts (they are part of the cached request prefix), so
``run_tool_call`` takes the pinned list and refuses anything outside it, even a tool that
exists. MCP tools (``mcp__<server>__<tool>``) are pinned with their specs
(:mod:`vigil.tools.mcp.pins`); ``pinned`` hands those in. Every failure becomes an error
``ToolResult`` for the model; nothing here raises because a tool failed.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping, Sequence

from vigil.config.settings import Settings
from vigil.models.base import ToolSpec
from vigil.store.records import ToolCall
from vigil.tools.base import Tool, ToolContext, ToolFailure, ToolResult, truncate_middle
from vigil.tools.cron import CronTool
from vigil.tools.files import PatchFileTool, ReadFileTool, WriteFileTool
from vigil.tools.mcp.naming import is_mcp_name
from vigil.tools.mcp.pins import PinnedTool
from vigil.tools.memory import MemoryTool
from vigil.tools.send_file import SendFileTool
from vigil.tools.session_search import SessionSearchTool
from vigil.tools.skills import SkillsListTool, SkillViewTool
from vigil.tools.terminal import TerminalTool

log = logging.getLogger(__name__)

RESULT_CHAR_CAP = 100_000
"""The longest result handed back to the model; tools keep their own, tighter caps."""

_TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        TerminalTool(),
        ReadFileTool(),
        WriteFileTool(),
        PatchFileTool(),
        MemoryTool(),
        SkillsListTool(),
        SkillViewTool(),
        SessionSearchTool(),
        CronTool(),
        SendFileTool(),
    )
}

ALL_TOOL_NAMES: tuple[str, ...] = tuple(_TOOLS)
"""Every built-in tool, in the stable order used when a session pins its tools."""

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


class UnknownToolError(ValueError):
    """A tool name that no built-in tool has."""


def get_tool(name: str) -> Tool:
    """The built-in tool called ``name``; ``UnknownToolError`` if there is none."""
    try:
        return _TOOLS[name]
    except KeyError:
        raise UnknownToolError(
            f"unknown tool '{name}' (known tools: {', '.join(ALL_TOOL_NAMES)})"
        ) from None


def default_tool_names(settings: Settings) -> list[str]:
    """The tools a new session gets: ``tools.enabled`` from the config (in its order,
    duplicates dropped), or every built-in tool. An unknown name is an ``UnknownToolError``."""
    enabled = settings.tools.enabled
    if enabled is None:
        return list(ALL_TOOL_NAMES)
    unknown = [name for name in enabled if name not in _TOOLS]
    if unknown:
        raise UnknownToolError(
            f"tools.enabled lists unknown tool(s): {', '.join(unknown)} "
            f"(known tools: {', '.join(ALL_TOOL_NAMES)})"
        )
    return list(dict.fromkeys(enabled))


def tool_specs(names: Sequence[str], pinned: Mapping[str, PinnedTool] | None = None) -> list[ToolSpec]:
    """The specs of ``names``, in that order; an MCP tool's from ``pinned`` (one missing
    there is left out, with a log line: its stored spec is lost)."""
    specs: list[ToolSpec] = []
    for name in names:
        if not is_mcp_name(name):
            specs.append(get_tool(name).spec())
        elif pinned is not None and name in pinned:
            specs.append(pinned[name].spec)
        else:
            log.warning("the pinned MCP tool %s has no stored spec; it is left out", name)
    return specs


async def run_tool_call(
    call: ToolCall,
    ctx: ToolContext,
    allowed: Sequence[str],
    *,
    cap: int = RESULT_CHAR_CAP,
    pinned: Mapping[str, PinnedTool] | None = None,
) -> ToolResult:
    """Check and run one tool call; any failure is returned as an error result, never raised.

    Cancellation (``asyncio.CancelledError``) still propagates, so an interrupted turn stops.
    """
    if call.name not in allowed:
        available = ", ".join(allowed) if allowed else "none"
        return ToolResult(
            f"tool '{call.name}' is not available in this session (available: {available})",
            is_error=True,
        )
    if is_mcp_name(call.name):
        return _capped(await _run_mcp(call, ctx, (pinned or {}).get(call.name)), cap)
    tool = _TOOLS.get(call.name)
    if tool is None:
        return ToolResult(f"tool '{call.name}' is not known to this version of vigil", is_error=True)

    args, problem = _parse_arguments(call)
    if problem is None:
        problem = check_arguments(tool.parameters, args)
    if problem is not None:
        return ToolResult(f"{call.name}: {problem}", is_error=True)

    try:
        result = await tool.run(args, ctx)
    except ToolFailure as exc:
        result = ToolResult(str(exc), is_error=True)
    except Exception as exc:  # a tool bug or an OS error must not end the turn
        reason = " ".join(str(exc).split()) or "no details"
        result = ToolResult(f"{call.name} failed: {type(exc).__name__}: {reason}", is_error=True)
    return _capped(result, cap)


async def _run_mcp(call: ToolCall, ctx: ToolContext, pin: PinnedTool | None) -> ToolResult:
    if pin is None:
        return ToolResult(f"tool '{call.name}' has no stored description in this session; it cannot be called",
                          is_error=True)
    args, problem = _parse_arguments(call)
    if problem is not None:
        return ToolResult(f"{call.name}: {problem}", is_error=True)
    from vigil.tools.mcp.calls import run_mcp_call

    try:
        return await run_mcp_call(pin, args, ctx)
    except Exception as exc:  # a bug must not end the turn
        log.exception("MCP tool %s failed", call.name)
        reason = " ".join(str(exc).split()) or "no details"
        return ToolResult(f"{call.name} failed: {type(exc).__name__}: {reason}", is_error=True)


def _capped(result: ToolResult, cap: int) -> ToolResult:
    if len(result.content) > cap:
        return ToolResult(truncate_middle(result.content, cap), result.is_error)
    return result


def _parse_arguments(call: ToolCall) -> tuple[dict[str, Any], str | None]:
    if not call.arguments.strip():
        return {}, None  # some models send "" for a tool without arguments
    try:
        args = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc}); send a JSON object"
    if not isinstance(args, dict):
        return {}, f"the arguments must be a JSON object, not {type(args).__name__}"
    return args, None


def check_arguments(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """What is wrong with ``args`` against a tool's flat object ``schema``, or ``None``.

    Checks required names, unexpected names (when ``additionalProperties`` is false), the
    basic JSON types and enums: enough to give the model a precise correction.
    """
    properties: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if args.get(name) is None:
            return f"missing required argument '{name}'"
    if schema.get("additionalProperties") is False:
        extra = sorted(set(args) - set(properties))
        if extra:
            return (
                f"unexpected argument(s) {', '.join(repr(n) for n in extra)} "
                f"(accepted: {', '.join(properties) or 'none'})"
            )
    for name, value in list(args.items()):
        prop = properties.get(name)
        if prop is None or value is None:
            continue
        expected = prop.get("type")
        if expected == "integer" and isinstance(value, float) and value.is_integer():
            args[name] = value = int(value)
        if expected in _JSON_TYPES:
            ok = isinstance(value, _JSON_TYPES[expected])
            if isinstance(value, bool) and expected != "boolean":
                ok = False  # JSON true is not a number, though Python's bool is an int
            if not ok:
                return f"argument '{name}' must be {_article(expected)}, not {_json_type(value)}"
        if "enum" in prop and value not in prop["enum"]:
            choices = ", ".join(repr(choice) for choice in prop["enum"])
            return f"argument '{name}' must be one of {choices}, not {value!r}"
    return None


def _article(json_type: str) -> str:
    return ("an " if json_type[0] in "aeiou" else "a ") + json_type


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
