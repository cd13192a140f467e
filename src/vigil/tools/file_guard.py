"""The file tools' side of the boundary: what the sandbox hides they do not read, and what it
keeps read-only they do not change, unless a person approves (see :mod:`vigil.tools.boundary`)."""

from __future__ import annotations

from pathlib import Path

from vigil.tools.base import ToolContext, ToolFailure, ToolResult, request_approval
from vigil.tools.boundary import Boundary, tool_boundary
from vigil.tools.sandbox import wanted


async def check_read(ctx: ToolContext, tool: str, path: Path) -> ToolResult | None:
    """``None`` when ``tool`` may read ``path``, else the refusal to return."""
    boundary = _boundary(ctx)
    if boundary is None or not boundary.hidden(path):
        return None
    return await request_approval(
        ctx, tool, f"read {path}, which is hidden from the agent (vigil's own files and the user's secrets are)"
    )


async def check_write(ctx: ToolContext, tool: str, path: Path) -> ToolResult | None:
    """``None`` when ``tool`` may change ``path``, else the refusal to return."""
    boundary = _boundary(ctx)
    if boundary is None or boundary.writable(path):
        return None
    if boundary.hidden(path):
        what = f"change {path}, which is hidden from the agent (vigil's own files and the user's secrets are)"
    else:
        what = f"change {path}, outside the workspace {boundary.workspace}"
    return await request_approval(ctx, tool, what)


def _boundary(ctx: ToolContext) -> Boundary | None:
    """The run's boundary, or ``None`` where ``tools.terminal.sandbox`` keeps none in this run."""
    if not wanted(ctx.settings.tools.terminal.sandbox, ctx.unattended):
        return None
    try:
        return tool_boundary(ctx)
    except ValueError as exc:
        raise ToolFailure(str(exc)) from None
