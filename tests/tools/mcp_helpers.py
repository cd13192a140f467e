"""Real MCP servers for the MCP tests, built with the official ``mcp`` SDK's own server classes.

* ``python tests/tools/mcp_helpers.py`` runs a stdio server whose tools misbehave on purpose:
  ``echo``, ``crash`` (the process exits), ``hang`` (never answers), ``fail`` (the tool raises),
  ``picture`` (an image), ``env`` (reads a variable) and ``read`` (reads a file).
* :class:`HttpServer` serves a streamable HTTP MCP server on a free loopback port, behind a
  bearer token, in a thread of the test process.

The ``mcp-server-time`` package from PyPI is the other real server the tests use.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
"""The ``mcp-server-time`` console script installed beside the test's Python."""


def flaky_entry(**flags: Any) -> dict[str, Any]:
    """A ``mcp.servers`` entry that starts the misbehaving stdio server."""
    return {"command": sys.executable, "args": [str(HERE)], **flags}


def time_entry(**flags: Any) -> dict[str, Any]:
    return {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], **flags}


class HttpServer:
    """A streamable HTTP MCP server (the SDK's ``MCPServer``) requiring ``Authorization: Bearer
    TOKEN``; ``refused`` counts the requests it turned away for a wrong or missing token."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.refused = 0
        # Listening before the server runs: a client's connection waits in the backlog until
        # uvicorn accepts it, so nothing has to wait for the start.
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.port = int(self._socket.getsockname()[1])
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> "HttpServer":
        import uvicorn
        from mcp.server.mcpserver import MCPServer

        mcp = MCPServer("notes")

        @mcp.tool()
        def add_note(text: str) -> str:
            """Keep a note.

            Later lines of the description say more."""
            return f"kept: {text}"

        app = mcp.streamable_http_app()
        expected = f"Bearer {self.token}".encode()

        async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
                self.refused += 1
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
            await app(scope, receive, send)

        config = uvicorn.Config(guarded, log_level="error", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="mcp-http", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        assert self._thread is not None
        self._thread.join(10)
        self._socket.close()


def _serve_flaky() -> None:
    import base64

    from mcp.server.mcpserver import MCPServer
    from mcp.types import ImageContent

    server = MCPServer("flaky")

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    @server.tool()
    def crash() -> str:
        """Exit the server at once."""
        print("flaky: crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)

    @server.tool()
    def hang() -> str:
        """Never answer."""
        time.sleep(3600)
        return "late"

    @server.tool()
    def fail() -> str:
        """Raise an error."""
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError("the disk is on fire")

    @server.tool()
    def picture() -> list:  # type: ignore[type-arg]  (evaluated by the SDK at run time)
        """Return a small image."""
        data = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 92).decode()
        return [ImageContent(type="image", data=data, mime_type="image/png")]

    @server.tool()
    def env(name: str) -> str:
        """Read an environment variable."""
        return os.environ.get(name, "<unset>")

    @server.tool()
    def read(path: str) -> str:
        """Read a file."""
        try:
            return Path(path).read_text()
        except OSError as exc:
            return f"cannot read: {exc.strerror}"

    server.run()


if __name__ == "__main__":
    _serve_flaky()
