"""The names the model sees for MCP tools: ``mcp__<server>__<tool>``, as Claude Code names them.

Providers accept function names of at most 64 characters from ``[A-Za-z0-9_-]``. A tool name
that does not fit is made to fit predictably, the same way every time: characters outside that
set become ``_``, and whenever anything had to change (a character replaced, the name cut to
length) the name ends in ``_`` and eight hex digits of a hash of the server's and the tool's real
names, so two tools never end up with one name. Server names cannot contain ``__`` nor end in
``_`` (:data:`vigil.config.mcp.SERVER_NAME`), so the prefix tells the servers apart.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_NAME = 64
_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")


def is_mcp_name(name: str) -> bool:
    """Whether ``name`` is the model's name of an MCP tool (no built-in tool starts so)."""
    return name.startswith(PREFIX)


def tool_name(server: str, tool: str) -> str:
    """The model's name for ``tool`` of ``server``: at most 64 characters of ``[A-Za-z0-9_-]``."""
    clean = _OUTSIDE.sub("_", tool)
    name = f"{PREFIX}{server}__{clean}"
    if clean == tool and tool and len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"
