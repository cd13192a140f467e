"""The live MCP connections of this process: started on first use, shared, closed at exit.

One connection per configured server (by name and configuration) serves every conversation
of the process: in the gateway, all of them; in the REPL and ``-q``, the one being had, which
starts only the servers it calls. A server that failed to start is not tried again for
:data:`RETRY_AFTER` seconds, so a broken one does not cost every new conversation its start
timeout.

The connections live in an event loop of their own, in a daemon thread: the SDK's stdio
transport stops a server (stdin closed, a grace period, then the process tree killed) inside
an anyio shield that a plain ``task.cancel()`` still breaks, and ``asyncio.run`` cancels
every task of its loop when it ends, so servers owned by the caller's loop leaked whenever a
command, a test or the gateway finished while one was being stopped. In their own loop they
are stopped only by :func:`close_all` and at interpreter exit, each within the SDK's bounds.
Callers in any loop (or thread) await them through :func:`_there`.

Each time a server lists its tools, the list is kept in the store's ``state_meta``
(``mcp.tools.NAME``, with the configuration's fingerprint), so a new session can pin the tools
of a server without starting it (:mod:`vigil.tools.mcp.pins`).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
from typing import Any, Coroutine, Mapping, TypeVar

from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.store.base import SessionStore
from vigil.tools.mcp.client import Connection, ListedTool, McpUnavailable
from vigil.tools.mcp.config import MissingVariable, ServerSpec

log = logging.getLogger(__name__)

RETRY_AFTER = 30.0
"""Seconds after a failed start before the server is started again."""
CACHE_PREFIX = "mcp.tools."
EXIT_WAIT = 10.0
"""Seconds the interpreter's exit waits for the servers to stop."""

T = TypeVar("T")
Key = tuple[str, str]

# Touched only from coroutines running in the MCP loop.
_connections: dict[Key, Connection] = {}
_starting: dict[Key, "asyncio.Future[Connection]"] = {}
_failures: dict[Key, tuple[float, str]] = {}
live: set[Connection] = set()
"""Every open connection (the pool's and probes'), for the final clean-up."""

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_owner_pid = 0
_exit_registered = False


def _mcp_loop() -> asyncio.AbstractEventLoop:
    """The MCP connections' event loop, its thread started on first use (again after a fork)."""
    global _loop, _owner_pid, _exit_registered
    with _lock:
        if _loop is None or _owner_pid != os.getpid():
            _connections.clear()
            _starting.clear()
            _failures.clear()
            live.clear()
            _loop = asyncio.new_event_loop()
            _owner_pid = os.getpid()
            threading.Thread(target=_loop.run_forever, name="mcp connections", daemon=True).start()
            if not _exit_registered:
                atexit.register(_at_exit)
                _exit_registered = True
        return _loop


async def _there(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` in the MCP loop and wait for it here; cancelling the wait cancels it there."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, _mcp_loop()))


def _at_exit() -> None:
    loop = _loop
    if loop is None or _owner_pid != os.getpid() or not loop.is_running():
        return
    try:
        asyncio.run_coroutine_threadsafe(_close_everything(), loop).result(EXIT_WAIT)
    except Exception:  # exiting anyway: a server that outlives this sees its stdin closed
        log.warning("MCP servers were still stopping when vigil exited")
    loop.call_soon_threadsafe(loop.stop)


# -- what callers use -------------------------------------------------------------------------
async def tools_of(
    spec: ServerSpec, profile: Profile, settings: Settings, store: SessionStore | None = None
) -> list[ListedTool]:
    """The tools of ``spec``'s live connection, started if needed; ``McpUnavailable``."""
    connection, fresh = await _there(_connect(spec, profile, settings, dict(os.environ)))
    if fresh and store is not None:
        await asyncio.to_thread(remember_tools, store, spec, connection.tools)
    return connection.tools


async def call_tool(
    spec: ServerSpec,
    profile: Profile,
    settings: Settings,
    tool: str,
    arguments: dict[str, Any],
    store: SessionStore | None = None,
) -> Any:
    """Call ``tool`` of ``spec`` (starting it if needed); its ``CallToolResult``.
    ``McpUnavailable`` or ``McpCallFailed`` say what went wrong."""
    environ = dict(os.environ)

    async def run() -> tuple[Any, Connection, bool]:
        connection, fresh = await _connect(spec, profile, settings, environ)
        return await connection.call(tool, arguments, settings.mcp.call_timeout), connection, fresh

    result, connection, fresh = await _there(run())
    if fresh and store is not None:
        await asyncio.to_thread(remember_tools, store, spec, connection.tools)
    return result


async def in_mcp_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` where the connections live (for a probe's own connection)."""
    return await _there(coro)


async def close_all() -> None:
    """Close every connection of the process (their servers stop) and forget failed starts."""
    if _loop is None or _owner_pid != os.getpid():
        return
    await _there(_close_everything())


# -- in the MCP loop --------------------------------------------------------------------------
async def _connect(
    spec: ServerSpec, profile: Profile, settings: Settings, environ: Mapping[str, str]
) -> tuple[Connection, bool]:
    key = (spec.name, spec.fingerprint())
    live.difference_update([connection for connection in live if connection.finished])
    found = _connections.get(key)
    if found is not None and not found.closed:
        return found, False
    failed = _failures.get(key)
    if failed is not None and time.monotonic() - failed[0] < RETRY_AFTER:
        ago = time.monotonic() - failed[0]
        raise McpUnavailable(f"{failed[1]} ({ago:.0f} s ago; vigil tries again {RETRY_AFTER:g} s after a failed start)")
    starting = _starting.get(key)
    fresh = starting is None
    if starting is None:
        starting = _starting[key] = asyncio.ensure_future(_start(key, spec, profile, settings, environ))
        starting.add_done_callback(lambda _: _starting.pop(key, None))
    return await asyncio.shield(starting), fresh


async def _start(
    key: Key, spec: ServerSpec, profile: Profile, settings: Settings, environ: Mapping[str, str]
) -> Connection:
    try:
        connection = await open_connection(spec, profile, settings, environ, settings.mcp.start_timeout)
    except McpUnavailable as exc:
        _failures[key] = (time.monotonic(), str(exc))
        log.warning("MCP server %s could not be started: %s", spec.name, exc)
        raise
    _failures.pop(key, None)
    _connections[key] = connection  # a lost one it replaces is closing on its own
    log.info("MCP server %s started in %.2f s with %d tool(s)", spec.name, connection.started_in, len(connection.tools))
    return connection


async def open_connection(
    spec: ServerSpec, profile: Profile, settings: Settings, environ: Mapping[str, str], timeout: float
) -> Connection:
    """A new connection to ``spec``, started (in the MCP loop); ``McpUnavailable``."""
    from vigil.tools.mcp.launch import MissingProgram, prepare

    try:
        launch = await asyncio.to_thread(prepare, spec, profile, settings, environ)
    except (MissingVariable, MissingProgram) as exc:
        raise McpUnavailable(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise McpUnavailable(f"it cannot be prepared: {exc}") from None
    connection = Connection(launch)
    live.add(connection)
    try:
        await connection.start(timeout)
    except BaseException:
        await _closed(connection)
        raise
    return connection


async def _closed(connection: Connection) -> None:
    await connection.close()
    live.discard(connection)


async def _close_everything() -> None:
    connections = list(live)
    _connections.clear()
    _failures.clear()
    await asyncio.gather(*(_closed(connection) for connection in connections), return_exceptions=True)


# -- the tool lists kept in the store ---------------------------------------------------------
def remember_tools(store: SessionStore, spec: ServerSpec, tools: list[ListedTool]) -> None:
    """Keep ``tools`` as the latest list of ``spec`` (only when it changed: no write per start)."""
    value = {
        "fingerprint": spec.fingerprint(),
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools],
    }
    key = CACHE_PREFIX + spec.name
    try:
        entry = store.get_meta(key)
        if entry is None or entry.value != value:
            store.set_meta(key, value)
    except Exception:  # a cache: failing to keep it costs a server start later, nothing more
        log.exception("could not keep the tool list of MCP server %s", spec.name)


def remembered_tools(store: SessionStore, specs: Mapping[str, ServerSpec]) -> dict[str, list[ListedTool]]:
    """The kept tool lists of ``specs`` whose configuration is unchanged since they were listed."""
    try:
        entries = store.get_meta_many([CACHE_PREFIX + name for name in specs])
    except Exception:
        log.exception("could not read the kept MCP tool lists")
        return {}
    found: dict[str, list[ListedTool]] = {}
    for name, spec in specs.items():
        entry = entries.get(CACHE_PREFIX + name)
        tools = _listed(entry.value, spec.fingerprint()) if entry is not None else None
        if tools is not None:
            found[name] = tools
    return found


def forget_tools(store: SessionStore, name: str) -> None:
    """Drop the kept tool list of server ``name`` (it was removed)."""
    store.delete_meta(CACHE_PREFIX + name)


def _listed(value: Any, fingerprint: str) -> list[ListedTool] | None:
    """The tools in a kept entry, or ``None`` when it is stale or not of the expected shape."""
    if not isinstance(value, dict) or value.get("fingerprint") != fingerprint:
        return None
    tools = value.get("tools")
    if not isinstance(tools, list):
        return None
    listed: list[ListedTool] = []
    for tool in tools:
        if not isinstance(tool, dict):
            return None
        name, description, parameters = tool.get("name"), tool.get("description"), tool.get("parameters")
        if not isinstance(name, str) or not isinstance(description, str) or not isinstance(parameters, dict):
            return None
        listed.append(ListedTool(name, description, parameters))
    return listed
