"""``FakeSlackServer``: a local Slack workspace for vigil's tests and benchmarks.

A real HTTP server on loopback (uvicorn in a background thread, like
:mod:`vigil.testing.fake_model`) serving the Web API methods the Slack adapter uses
(:mod:`vigil.testing.slack_api.api`), with fault injection: ``state.fault(status=503, …)``
for 5xx answers, ``state.rate_limit(n)`` for 429s, and ``stop()``/``start()`` for a server
that is not there at all (connection refused, same port when it comes back). What users send
goes the other way, through :class:`vigil.testing.slack_api.events.EventsSender`.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from vigil.testing.fake_model import _bind, _vanish
from vigil.testing.slack_api.api import build_app
from vigil.testing.slack_api.websocket import SocketModeServer
from vigil.testing.slack_api.state import SlackState

_START_TIMEOUT = 10.0


class FakeSlackServer:
    """A fake Slack Web API. ``api_url`` is what ``slack.api_url`` points at; ``bot_token``
    and ``signing_secret`` are what the adapter's environment variables must hold."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, bot_token: str | None = None,
                 signing_secret: str | None = None) -> None:
        self.bot_token = bot_token or "xoxb-test-" + secrets.token_hex(8)
        self.signing_secret = signing_secret or secrets.token_hex(16)
        self.state = SlackState(bot_token=self.bot_token)
        self._host, self._port = host, port
        self._app = build_app(self.state, lambda: self.base_url)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._socket: SocketModeServer | None = None

    @property
    def app_token(self) -> str:
        """The app-level token (``xapp-…``) Socket Mode connects with."""
        return self.state.app_token

    def socket_mode(self) -> SocketModeServer:
        """The Socket Mode server (started on first use) ``apps.connections.open`` points at."""
        if self._socket is None:
            self._socket = SocketModeServer(self._host)
        self.state.socket_url = self._socket.url
        return self._socket

    def start(self) -> "FakeSlackServer":
        """Serve (again, on the same port after ``stop``); returns once it accepts."""
        if self._thread is not None and self._thread.is_alive():
            return self
        sock = _bind(self._host, self._port)
        self._port = sock.getsockname()[1]
        self.state.base_url = self.base_url
        config = uvicorn.Config(self._app, log_config=None, lifespan="off", http="h11", ws="none",
                                loop="asyncio", timeout_graceful_shutdown=1)
        server = uvicorn.Server(config)

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            await server.serve(sockets=[sock])

        thread = threading.Thread(target=asyncio.run, args=(serve(),), name="fake-slack", daemon=True)
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self._server = self._thread = None
                sock.close()
                raise RuntimeError("the fake Slack server did not start")
            time.sleep(0.001)
        return self

    def stop(self) -> None:
        """Disappear now: open connections are reset and the port refuses connections."""
        server, thread, loop = self._server, self._thread, self._loop
        if server is None or thread is None:
            return
        if loop is not None and loop.is_running():
            try:
                loop.call_soon_threadsafe(_vanish, server)
            except RuntimeError:
                pass
        server.should_exit = server.force_exit = True
        thread.join(10)
        self._server = self._thread = self._loop = None

    def close(self) -> None:
        """Stop everything, the Socket Mode server too."""
        self.stop()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> "FakeSlackServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    @property
    def api_url(self) -> str:
        """The Web API base URL (``slack.api_url``)."""
        return self.base_url + "/api"

    def share_file(self, name: str, content: bytes, *, mimetype: str = "text/plain") -> dict[str, Any]:
        """Host a file "shared" by a user; returns the file object a message event carries."""
        file_id = self.state.new_id("F")
        path = f"{self.state.team_id}-{file_id}/{name}"
        with self.state.lock:
            self.state.hosted[path] = content
        url = f"{self.base_url}/files-pri/{path}"
        return {"id": file_id, "name": name, "title": name, "mimetype": mimetype, "filetype": "text",
                "size": len(content), "url_private": url, "url_private_download": url + "?download=1",
                "mode": "hosted", "is_external": False}
