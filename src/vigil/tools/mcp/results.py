"""An MCP tool result as the model reads it: one text.

Text blocks are given as they are. Structured content is given as JSON when no text came with
it (servers usually send both, the text being the JSON already). Images and audio cannot be
handed on as tool results by every provider, so each becomes a note saying what it was;
resources become their text, or a note for binary ones. ``is_error`` results stay errors.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from vigil.tools.base import ToolResult


def render(result: Any) -> ToolResult:
    """``result`` (an ``mcp`` ``CallToolResult``) as a :class:`ToolResult`."""
    parts: list[str] = []
    texts = 0
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(str(block.text))
            texts += 1
        elif kind in ("image", "audio"):
            parts.append(
                f"[{kind} ({block.mime_type}, {_size(block.data)}) returned by the tool; "
                f"vigil does not pass {kind}s on to the model]"
            )
        elif kind == "resource":
            parts.append(_resource(block.resource))
            texts += hasattr(block.resource, "text")
        elif kind == "resource_link":
            name = getattr(block, "name", "") or ""
            parts.append(f"[resource link: {block.uri}{f' ({name})' if name else ''}]")
        else:
            parts.append(f"[a {kind or 'nameless'} content block vigil does not know]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not texts:
        parts.insert(0, json.dumps(structured, ensure_ascii=False, indent=2))
    is_error = bool(getattr(result, "is_error", False))
    text = "\n".join(parts).strip("\n")
    if not text:
        text = "the tool reported an error without saying what" if is_error else "(the tool returned nothing)"
    return ToolResult(text, is_error)


def _resource(resource: Any) -> str:
    uri = getattr(resource, "uri", "")
    if hasattr(resource, "text"):
        return str(resource.text)
    mime = getattr(resource, "mime_type", None) or "binary"
    return f"[resource {uri} ({mime}, {_size(getattr(resource, 'blob', ''))}); binary content is not shown]"


def _size(data: str) -> str:
    try:
        size = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        size = len(data)
    return f"{size:,} bytes"
