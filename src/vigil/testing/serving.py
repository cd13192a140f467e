"""A fake server's life on real HTTP: :class:`ThreadedServer` serves an ASGI app with uvicorn on
a loopback port, in a background thread, so that the code under test talks to it over the
wire. ``port=0`` picks a free port; ``stop()`` is abrupt, as a server that vanishes (open
connections are reset and the port refuses connections), and ``start()`` again brings it back
on the same port.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from types import TracebackType
from typing import Any, Self

import uvicorn

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


class ThreadedServer:
    """An ASGI app on ``host:port`` (see the module docstring). A fake builds on it: it passes
    its app and a ``name`` for its thread and errors, and may set things up for each start in
    :meth:`bound`. Thread-safe to start and stop from the test's thread."""

    def __init__(self, app: Any, *, name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self._app = app
        self._name = name
        self._host = host
        self._port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stopping = False
        """Set while the server goes away, until the next start (a long poll may return)."""

    def start(self) -> Self:
        """Bind and serve in a background thread; returns once connections are accepted."""
        if self.running:
            return self
        sock = bind(self._host, self._port)
        self._port = sock.getsockname()[1]
        self.stopping = False
        self.bound()
        config = uvicorn.Config(self._app, log_config=None, lifespan="off", http="h11", ws="none",
                                loop="asyncio", timeout_graceful_shutdown=1)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=asyncio.run, args=(self._serve(server, sock),), name=self._name,
                                  daemon=True)
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self._server = self._thread = None
                sock.close()
                raise RuntimeError(f"the {self._name} did not start on {self._host}:{self._port}")
            time.sleep(0.001)
        return self

    def bound(self) -> None:
        """Called on each start once the port is bound, before it serves (the port is known)."""

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        self._loop = asyncio.get_running_loop()
        await server.serve(sockets=[sock])

    def stop(self) -> None:
        """Vanish now: in-flight responses are cut off and the port refuses connections."""
        server, thread, loop = self._server, self._thread, self._loop
        if server is None or thread is None:
            return
        self.stopping = True
        if loop is not None and loop.is_running():
            try:
                loop.call_soon_threadsafe(vanish, server)
            except RuntimeError:  # the loop closed in between
                pass
        server.should_exit = server.force_exit = True
        thread.join(STOP_TIMEOUT)
        self._server = self._thread = self._loop = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The bound port (0 before the first ``start()`` when a free port was asked for)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``0``: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # An explicit IPPROTO_TCP matters: asyncio only disables Nagle on accepted sockets whose
    # proto says TCP, and with Nagle every response pays a 40 ms delayed-ACK stall.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    # Lets a restarted server take its old port back while old connections sit in TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def vanish(server: uvicorn.Server) -> None:
    """Stop accepting and reset every open connection, before uvicorn's graceful shutdown
    gets a chance to wait for them."""
    for listener in getattr(server, "servers", []):
        listener.close()
    for connection in list(server.server_state.connections):
        transport = getattr(connection, "transport", None)
        if transport is not None:
            transport.abort()
