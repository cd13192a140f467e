"""One live connection to an MCP server, through the official ``mcp`` SDK.

The SDK's transports run in anyio task groups, which must be entered and left by one task; so
each connection has an owner task that opens it, lists the tools, waits until told to stop and
closes it (for a stdio server: stdin closed, then the process tree ended, every wait bounded).
Calls may come from any task of the same event loop, several at once; :mod:`.pool` keeps every
connection in one loop of its own.

A connection that fails (the server exits, a call times out, the transport breaks) is marked
lost and closed in the background: the call reports it, and the next one starts the server
again. A call is never retried on its own, since a tool may have changed something already.
The ``mcp`` SDK (and pydantic with it) is imported only here, when a server is first used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from vigil import __version__
from vigil.tools.mcp.launch import Launch

log = logging.getLogger(__name__)

_PAGES = 50
"""tools/list pages read at most (a server paging forever cannot hang a start)."""
_GRACE = 5.0
"""Seconds added to a call's own timeout before vigil stops waiting for the SDK to give up."""


_OWNERS: set[asyncio.Task[None]] = set()


class McpUnavailable(Exception):
    """The server cannot be used now: it did not start, stopped, hung, or is not configured.
    ``during_call``: it failed while a call was under way (which may have done something)."""

    def __init__(self, reason: str, *, during_call: bool = False) -> None:
        super().__init__(reason)
        self.during_call = during_call


class McpCallFailed(Exception):
    """The server refused the call with a protocol error (an unknown tool, invalid arguments)."""


@dataclass(frozen=True, slots=True)
class ListedTool:
    """A tool as the server lists it."""

    name: str
    description: str
    parameters: dict[str, Any]


class Connection:
    """A connection to the server ``launch`` describes; :meth:`start` opens it."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.name = launch.spec.name
        self.tools: list[ListedTool] = []
        self.started_in = 0.0
        self.closed = False
        self.lost_reason: str | None = None
        self._client: Any = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._log_start = 0

    async def start(self, timeout: float) -> list[ListedTool]:
        """Start the server and list its tools; ``McpUnavailable`` saying why it failed."""
        ready: asyncio.Future[list[ListedTool]] = asyncio.get_running_loop().create_future()
        began = time.monotonic()
        self._log_start = self.launch.log_size()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp server {self.name}")
        _OWNERS.add(self._task)  # the loop keeps only weak references to tasks
        self._task.add_done_callback(_OWNERS.discard)
        try:
            self.tools = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except asyncio.TimeoutError:
            self._end()
            raise McpUnavailable(f"it did not start and list its tools within {timeout:g} s") from None
        except BaseException:
            self._end()
            raise
        self.started_in = time.monotonic() - began
        return self.tools

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        """Call ``tool``; its ``CallToolResult``. ``McpUnavailable`` when the connection broke or
        the call took longer than ``timeout`` (the server is then restarted for the next call),
        ``McpCallFailed`` when the server refused the call."""
        client = self._client
        if client is None or self.closed:
            raise McpUnavailable(self.lost_reason or "the connection is closed")
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        hung = f"it did not answer within {timeout:g} s, so it counts as hung and is restarted for the next call"
        try:
            return await asyncio.wait_for(
                client.call_tool(tool, arguments, read_timeout_seconds=timeout), timeout + _GRACE
            )
        except asyncio.TimeoutError:
            raise McpUnavailable(self.lose(hung), during_call=True) from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise McpUnavailable(self.lose(hung), during_call=True) from None
            if exc.code == CONNECTION_CLOSED:
                raise McpUnavailable(self.lose(self._stopped()), during_call=True) from None
            raise McpCallFailed(self.launch.expanded.scrub(exc.message or f"error {exc.code}")) from None
        except ValidationError:
            raise McpCallFailed("its answer was not a valid MCP tool result") from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # a broken transport (HTTP errors, a closed pipe)
            raise McpUnavailable(self.lose(f"the connection broke: {self._reason(exc)}"), during_call=True) from None

    @property
    def finished(self) -> bool:
        """Whether the connection is closed and its server gone."""
        return self._task is not None and self._task.done()

    def lose(self, reason: str) -> str:
        """Mark the connection lost for ``reason`` and close it in the background."""
        if self.lost_reason is None:
            self.lost_reason = reason
            log.warning("MCP server %s: %s", self.name, reason)
        self._end()
        return reason

    async def close(self) -> None:
        """Stop the server (or hang up) and wait until it is gone."""
        self._end()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await self._task

    def _end(self) -> None:
        self.closed = True
        self._stop.set()
        if self._client is None and self._task is not None:
            # Still starting (a handshake that never comes back): only cancelling ends that.
            self._task.cancel()

    async def _own(self, ready: asyncio.Future[list[ListedTool]]) -> None:
        from mcp import Client
        from mcp_types import Implementation

        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(
                    transport, cache=None, client_info=Implementation(name="vigil", version=__version__)
                )
                await stack.enter_async_context(client)
                tools = await _list_tools(client)
                self._client = client
                if not ready.done():
                    ready.set_result(tools)
                await self._stop.wait()
        except BaseException as exc:
            started = ready.done()
            if not started:
                ready.set_exception(McpUnavailable(self._failed_start(exc)))
                ready.exception()  # retrieved: nobody may be waiting any more
            if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
                raise
            if started and not self.closed:
                self.lose(f"the connection ended: {self._reason(exc)}")
        finally:
            self._client = None
            self.closed = True

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        launch = self.launch
        if launch.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=launch.headers, timeout=httpx2.Timeout(30.0, read=300.0))
            )
            return streamable_http_client(launch.url, http_client=http)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        errlog = launch.open_log()
        if errlog is not None:
            stack.callback(errlog.close)
        params = StdioServerParameters(command=launch.argv[0], args=launch.argv[1:], env=launch.env, cwd=launch.cwd)
        return stdio_client(params, errlog=errlog) if errlog is not None else stdio_client(params)

    def _failed_start(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        if isinstance(leaf, FileNotFoundError):
            return f"the program {self.launch.spec.command} was not found"
        if isinstance(leaf, PermissionError):
            return f"the program {self.launch.spec.command} cannot be run: permission denied"
        return self._stopped() if "closed" in str(leaf).lower() else self._reason(exc)

    def _stopped(self) -> str:
        said = self.launch.log_tail(self._log_start)
        where = f" (see {self.launch.log_path})" if self.launch.log_path is not None else ""
        return f"it stopped{f': {said}' if said else ''}{where}"

    def _reason(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        text = " ".join(str(leaf).split()) or "no details"
        return self.launch.expanded.scrub(f"{type(leaf).__name__}: {text}")[:400]


async def _list_tools(client: Any) -> list[ListedTool]:
    tools: list[ListedTool] = []
    cursor = None
    for _ in range(_PAGES):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            schema = tool.input_schema
            if not isinstance(schema, dict):
                schema = schema.model_dump(by_alias=True, exclude_none=True)
            tools.append(ListedTool(tool.name, tool.description or "", schema))
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside the exception groups anyio wraps failures in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
