"""One call of a pinned MCP tool: who may call it, the approval, the call, and what the model
reads back. Nothing here raises for a failed call: every failure is an error result for the
model and a log line, and the turn goes on.

Approval: MCP tools may change the world (open issues, send mail), so in an attended channel
the first call of each tool of a server not marked ``trusted`` asks the person, once per tool
and conversation for as long as this process runs (a declined call is asked again next time).
Unattended runs (cron jobs, heartbeats, ``-q`` without a terminal), where no one can be asked,
call only servers added with ``--unattended`` and refuse the rest.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from vigil.masking import printable
from vigil.tools.base import ToolContext, ToolResult, request_approval
from vigil.tools.mcp.client import McpCallFailed, McpUnavailable
from vigil.tools.mcp.config import configured
from vigil.tools.mcp.pins import PinnedTool

log = logging.getLogger(__name__)

_approved: set[tuple[str | None, str]] = set()
_APPROVED_CAP = 10_000


async def run_mcp_call(pin: PinnedTool, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Call ``pin`` with ``args`` (a JSON object) for the run ``ctx`` describes."""
    spec = configured(ctx.settings).get(pin.server)
    if spec is None:
        return _failed(
            pin,
            f"the MCP server '{pin.server}' is no longer configured (mcp.servers in config.yaml), so "
            f"{pin.tool} cannot be called; this conversation keeps the tools it started with. "
            "Nothing was called",
        )
    if ctx.approve is None and not spec.unattended:
        return ToolResult(
            f"refused: {pin.name} is a tool of the MCP server '{pin.server}', which may only be used when "
            "someone can approve its calls (it was not added with --unattended), and this is an unattended "
            "run (a cron job, a heartbeat, or vigil chat -q without a terminal); nothing was called",
            is_error=True,
        )
    if not spec.trusted and ctx.approve is not None and (ctx.session_id, pin.name) not in _approved:
        shown = printable(json.dumps(args, ensure_ascii=False), 300)
        refusal = await request_approval(
            ctx, pin.name,
            f"call {pin.tool} of the MCP server '{pin.server}' with {shown} (asked once per tool in a "
            "conversation; mark the server trusted to never ask)",
        )
        if refusal is not None:
            return refusal
        if len(_approved) >= _APPROVED_CAP:
            _approved.clear()
        _approved.add((ctx.session_id, pin.name))
    from vigil.tools.mcp import pool
    from vigil.tools.mcp.results import render

    try:
        result = await pool.call_tool(spec, ctx.profile, ctx.settings, pin.tool, args, ctx.store)
    except McpUnavailable as exc:
        if exc.during_call:
            return _failed(pin, f"the MCP server '{pin.server}' failed during the call of {pin.tool}: {exc}")
        return _failed(pin, f"the MCP server '{pin.server}' is unavailable: {exc}; {pin.tool} was not called")
    except McpCallFailed as exc:
        return _failed(pin, f"the MCP server '{pin.server}' refused the call of {pin.tool}: {exc}")
    return render(result)


def _failed(pin: PinnedTool, message: str) -> ToolResult:
    log.warning("MCP tool %s: %s", pin.name, message)
    return ToolResult(message, is_error=True)
