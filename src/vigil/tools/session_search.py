"""The ``session_search`` tool: full-text search over past conversations in the session store."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from vigil.store.records import SearchHit
from vigil.tools.base import Tool, ToolContext, ToolFailure, ToolResult

DEFAULT_LIMIT = 10
MAX_LIMIT = 50
SNIPPET_CAP = 300


class SessionSearchTool(Tool):
    name = "session_search"
    description = (
        "Search past conversations (not the current one) for words, e.g. to recall what was "
        "decided or done before. Returns matching messages with their session id, title, date "
        "and a snippet, best matches first."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for; \"quoted phrases\", prefix* and the operators OR and NOT (in capitals) work too."},
            "limit": {
                "type": "integer",
                "description": f"Maximum number of matches (default {DEFAULT_LIMIT}, at most {MAX_LIMIT}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = args["query"].strip()
        if not query:
            raise ToolFailure("the query is empty; give some words to search for")
        if ctx.store is None:
            raise ToolFailure("session search is not available: this run has no session store")
        limit = max(1, min(args.get("limit") or DEFAULT_LIMIT, MAX_LIMIT))
        # The current session is already in the model's context, so its hits are noise;
        # ask for a few extra to make up for the ones filtered out.
        hits = await asyncio.to_thread(ctx.store.search, query, limit=limit + 20)
        hits = [hit for hit in hits if hit.session_id != ctx.session_id][:limit]
        if not hits:
            return ToolResult(f"no past conversations match {query!r}")
        zone = ZoneInfo(ctx.settings.timezone) if ctx.settings.timezone else None
        lines = [f"{len(hits)} match(es) for {query!r}:"]
        for number, hit in enumerate(hits, start=1):
            lines.append(_format_hit(number, hit, zone))
        return ToolResult("\n".join(lines))


def _format_hit(number: int, hit: SearchHit, zone: ZoneInfo | None) -> str:
    when = datetime.fromtimestamp(hit.created_at).astimezone(zone).strftime("%Y-%m-%d %H:%M")
    title = f'"{hit.session_title}"' if hit.session_title else "(untitled)"
    snippet = " ".join(hit.snippet.split())
    if len(snippet) > SNIPPET_CAP:
        snippet = snippet[: SNIPPET_CAP - 3] + "..."
    return f"{number}. session {hit.session_id} — {title} — {when} ({hit.role})\n   {snippet}"
