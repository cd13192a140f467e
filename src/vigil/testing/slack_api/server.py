"""``FakeSlackServer``: a local Slack workspace for vigil's tests and benchmarks.

A real HTTP server on loopback (uvicorn in a background thread, like
:mod:`vigil.testing.fake_model`) serving the Web API methods the Slack adapter uses
(:mod:`vigil.testing.slack_api.api`), with fault injection: ``state.fault(status=503, …)``
for 5xx answers, ``state.rate_limit(n)`` for 429s, and ``stop()``/``start()`` for a server
that is not there at all (connection refused, same port when it comes back). What users send
goes the other way, through :class:`vigil.testing.slack_api.events.EventsSender`.
"""

from __future__ import annotations

import secrets
from types import TracebackType
from typing import Any

from vigil.testing.serving import ThreadedServer
from vigil.testing.slack_api.api import build_app
from vigil.testing.slack_api.state import SlackState
from vigil.testing.slack_api.websocket import SocketModeServer


class FakeSlackServer(ThreadedServer):
    """A fake Slack Web API. ``api_url`` is what ``slack.api_url`` points at; ``bot_token``
    and ``signing_secret`` are what the adapter's environment variables must hold."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, bot_token: str | None = None,
                 signing_secret: str | None = None) -> None:
        self.bot_token = bot_token or "xoxb-test-" + secrets.token_hex(8)
        self.signing_secret = signing_secret or secrets.token_hex(16)
        self.state = SlackState(bot_token=self.bot_token)
        self._socket: SocketModeServer | None = None
        super().__init__(build_app(self.state, lambda: self.base_url), name="fake Slack server", host=host, port=port)

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

    def bound(self) -> None:
        self.state.base_url = self.base_url

    def close(self) -> None:
        """Stop everything, the Socket Mode server too."""
        self.stop()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return self.url

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
