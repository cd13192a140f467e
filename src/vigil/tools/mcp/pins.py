"""The MCP tools a session pins when it starts, kept byte for byte for every later turn.

A session's tool list is part of the cached request prefix, so it never changes after the
session starts (DESIGN.md): the names go into the session's ``tool_names`` like the built-in
ones, and the descriptions and schemas the model was shown go into the store as one JSON text,
content-addressed, whose hash the session's ``model_config`` keeps under :data:`MCP_TOOLS`.
Every turn reads the specs back from that text, never from the live server: a server that
changed its tools, was removed from config.yaml or is down still gives the session exactly
the tools it started with (calls to them then fail cleanly). Sessions with the same tools
share one stored text; a compression continuation inherits the hash with the model config.

The text is kept through the store's content-addressed prompt storage (``put_prompt``), the
one place the store keeps immutable texts by hash; it moves with ``vigil store`` transfers
like the system prompts do.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Mapping

from vigil.config.settings import Settings
from vigil.models.base import ToolSpec
from vigil.profiles import Profile
from vigil.store import SessionRecord, SessionStore, prompt_hash
from vigil.tools.mcp.client import ListedTool, McpUnavailable
from vigil.tools.mcp.config import ServerSpec, configured
from vigil.tools.mcp.naming import tool_name

log = logging.getLogger(__name__)

MCP_TOOLS = "mcp_tools"
"""The ``model_config`` key holding the hash of the session's pinned MCP tool specs."""
DESCRIPTION_CAP = 2048
SCHEMA_CAP = 65_536
"""Characters of a tool's JSON schema at most; a larger one is left out (and logged)."""
_KEPT = 256


@dataclass(frozen=True, slots=True)
class PinnedTool:
    """An MCP tool as a session pinned it: the model's name for it, the server and the
    server's own tool name, and the spec the model is shown."""

    name: str
    server: str
    tool: str
    spec: ToolSpec


_parsed: dict[str, dict[str, PinnedTool]] = {}


async def pin_new_session(store: SessionStore, profile: Profile, settings: Settings) -> tuple[list[str], str | None]:
    """The MCP tool names a new session pins and the hash of their stored specs (``None``
    when there are none). Tool lists come from the store when the server's configuration is
    unchanged since it last listed them; other servers are started (concurrently) to ask.
    A server that cannot be asked is left out of the session, with a log line."""
    specs = configured(settings)
    if not specs:
        return [], None
    from vigil.tools.mcp import pool

    listings = await asyncio.to_thread(pool.remembered_tools, store, specs)
    missing = [spec for name, spec in specs.items() if name not in listings]
    if missing:
        asked = await asyncio.gather(*(_ask(spec, profile, settings, store) for spec in missing))
        listings.update({spec.name: tools for spec, tools in zip(missing, asked) if tools is not None})
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name in specs:
        for tool in listings.get(name, []):
            entry = _entry(name, tool)
            if entry is not None and entry["name"] not in seen:
                seen.add(entry["name"])
                entries.append(entry)
    if not entries:
        return [], None
    text = json.dumps({"version": 1, "tools": entries}, ensure_ascii=False, separators=(",", ":"))
    digest = await asyncio.to_thread(store.put_prompt, text)
    _keep(digest, _parse(text))
    return [entry["name"] for entry in entries], digest


async def _ask(spec: ServerSpec, profile: Profile, settings: Settings, store: SessionStore) -> list[ListedTool] | None:
    from vigil.tools.mcp import pool

    try:
        return await pool.tools_of(spec, profile, settings, store)
    except McpUnavailable as exc:
        log.warning("MCP server %s is left out of the new session: %s", spec.name, exc)
        return None


def _entry(server: str, tool: ListedTool) -> dict[str, Any] | None:
    schema = tool.parameters
    if schema.get("type") != "object":
        log.warning("MCP tool %s of %s is left out: its input schema is not of type object", tool.name, server)
        return None
    if len(json.dumps(schema, ensure_ascii=False)) > SCHEMA_CAP:
        log.warning("MCP tool %s of %s is left out: its input schema is over %d characters", tool.name, server, SCHEMA_CAP)
        return None
    description = tool.description.strip()
    if not description:
        description = f"{tool.name} (a tool of the MCP server {server})"
    if len(description) > DESCRIPTION_CAP:
        description = description[: DESCRIPTION_CAP - 1] + "…"
    return {"name": tool_name(server, tool.name), "server": server, "tool": tool.name,
            "description": description, "parameters": schema}


async def pinned_tools(store: SessionStore, session: SessionRecord) -> Mapping[str, PinnedTool]:
    """The MCP tools ``session`` pinned, by the model's name for them (empty when none).
    A stored text that is missing or damaged gives none, with a log line: the session's
    other tools keep working."""
    digest = session.model_config.get(MCP_TOOLS)
    if not isinstance(digest, str) or not digest:
        return {}
    found = _parsed.get(digest)
    if found is not None:
        return found
    text = await asyncio.to_thread(store.get_prompt, digest)
    if not text or prompt_hash(text) != digest:
        log.warning("the MCP tool specs of session %s are %s", session.id, "missing" if not text else "damaged")
        found = {}
    else:
        try:
            found = _parse(text)
        except (ValueError, KeyError, TypeError):
            log.warning("the MCP tool specs of session %s cannot be read", session.id)
            found = {}
    _keep(digest, found)
    return found


def _parse(text: str) -> dict[str, PinnedTool]:
    data = json.loads(text)
    tools: dict[str, PinnedTool] = {}
    for entry in data["tools"]:
        spec = ToolSpec(name=str(entry["name"]), description=str(entry["description"]), parameters=dict(entry["parameters"]))
        tools[spec.name] = PinnedTool(spec.name, str(entry["server"]), str(entry["tool"]), spec)
    return tools


def _keep(digest: str, tools: dict[str, PinnedTool]) -> None:
    if len(_parsed) >= _KEPT:
        _parsed.pop(next(iter(_parsed)))
    _parsed[digest] = tools
