"""Trying servers out: start, list the tools, stop (``vigil mcp list/test``, ``vigil doctor``).

A probe has a connection of its own, never one of the pool's, so it works the same in a
process that runs conversations and in one that does not. What it lists is kept in the store
when one is given, for new sessions to pin without starting the server.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.store.base import SessionStore
from vigil.tools.mcp.client import ListedTool, McpUnavailable
from vigil.tools.mcp.config import ServerSpec
from vigil.tools.mcp.naming import tool_name


@dataclass(frozen=True, slots=True)
class Probe:
    """How one server answered: its tools, or why it could not be started."""

    spec: ServerSpec
    tools: list[ListedTool] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    sandboxed: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "name": spec.name,
            "transport": spec.transport,
            **({"command": spec.command, "args": list(spec.args), "env": sorted(dict(spec.env)),
                "sandbox": spec.sandbox} if spec.transport == "stdio" else
               {"url": spec.describe(), "headers": sorted(dict(spec.headers))}),
            "unattended": spec.unattended,
            "trusted": spec.trusted,
            "state": "ok" if self.ok else "failed",
            "error": self.error,
            "start_seconds": round(self.seconds, 3) if self.ok else None,
            "sandboxed": self.sandboxed,
            "tools": [
                {"name": tool.name, "model_name": tool_name(spec.name, tool.name), "description": first_line(tool.description)}
                for tool in self.tools
            ],
        }


def first_line(text: str, width: int = 200) -> str:
    """The first non-blank line of a description, at most ``width`` characters."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


async def probe(
    spec: ServerSpec,
    profile: Profile,
    settings: Settings,
    store: SessionStore | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Probe:
    """Start ``spec``, list its tools and stop it."""
    from vigil.tools.mcp import pool

    found = await pool.in_mcp_loop(
        _probe(spec, profile, settings, dict(os.environ if environ is None else environ),
               settings.mcp.start_timeout if timeout is None else timeout)
    )
    if found.ok and store is not None:
        await asyncio.to_thread(pool.remember_tools, store, spec, found.tools)
    return found


async def _probe(spec: ServerSpec, profile: Profile, settings: Settings, environ: dict[str, str], timeout: float) -> Probe:
    from vigil.tools.mcp import pool

    try:
        connection = await pool.open_connection(spec, profile, settings, environ, timeout)
    except McpUnavailable as exc:
        return Probe(spec, error=str(exc))
    await connection.close()
    pool.live.discard(connection)
    return Probe(spec, connection.tools, None, connection.started_in, connection.launch.sandboxed)


async def probe_all(
    specs: Sequence[ServerSpec],
    profile: Profile,
    settings: Settings,
    store: SessionStore | None = None,
    timeout: float | None = None,
) -> list[Probe]:
    """:func:`probe` every server at once; results in the order of ``specs``."""
    return list(await asyncio.gather(*(probe(spec, profile, settings, store, timeout=timeout) for spec in specs)))
