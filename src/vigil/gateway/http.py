"""The gateway's one HTTP server (uvicorn, in the gateway's event loop).

The gateway owns the process's signals, so uvicorn is kept from installing its own handlers.
The listening socket is bound before anything starts, so a port in use is a clear error at
start-up rather than a failure in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import socket
from typing import Any, Iterator, Sequence

log = logging.getLogger(__name__)


class PortUnavailable(Exception):
    """The address or port cannot be listened on; the message says what to do."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``PortUnavailable`` with the reason)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on connections whose socket says so, and
    # without it a keep-alive response written in two parts waited 40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(512)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortUnavailable(
                f"port {port} on {host} is already in use (another gateway or program?); "
                "choose another with --web-port N or gateway.web.port"
            ) from None
        raise PortUnavailable(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


class HttpServer:
    """Serves a starlette app on an already bound socket until :meth:`stop`."""

    def __init__(self, app: Any, sock: socket.socket) -> None:
        import uvicorn

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:  # the gateway handles signals itself
                yield

        self.sock = sock
        host, port = sock.getsockname()[:2]
        self.host, self.port = host, port
        self._server = _Server(
            uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=3)
        )
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self.sock]), name="http")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise PortUnavailable("the HTTP server stopped at start-up")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(task, 10)
        except (asyncio.TimeoutError, Exception) as exc:  # a stuck connection must not block shutdown
            log.warning("HTTP server did not stop cleanly: %r", exc)
            task.cancel()


def routes_app(routes: Sequence[Any]) -> Any:
    from starlette.applications import Starlette

    return Starlette(routes=list(routes))
