"""``FakeMatrixServer``: a local Matrix homeserver for vigil's tests, on real HTTP.

It speaks the part of the client-server API that matrix-nio's ``AsyncClient`` uses for a bot
(:mod:`.api`): ``whoami``, ``/sync`` with ``since``/``timeout`` long polls and
``full_state``, sending events by transaction id (a repeated transaction gives the first
event's id back), ``join``/``leave``, typing, media upload and download, and the key and
to-device endpoints end-to-end encryption needs — built by reading matrix-nio's source and
the Matrix spec. A real homeserver (Synapse, Conduit) needs far more than the test budget
allows to install and start in every test, and federation, auth flows and room versions are
of no use here: the adapter is what is tested, over the wire nio really speaks.

The test plays the people through :attr:`state` (:class:`~.state.HomeserverState`): create
rooms, invite the bot, write, reply in threads, react, share files; and reads what the bot
sent, edits applied. ``stop()``/``start()`` make the server vanish and come back on the same
port; ``state.fail(...)`` injects error answers.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import TracebackType

import uvicorn

from vigil.testing.fake_model import _bind, _vanish
from vigil.testing.matrix_api.api import build_app
from vigil.testing.matrix_api.state import SERVER_NAME, HomeserverState

_START_TIMEOUT = 10.0
BOT = f"@vigil:{SERVER_NAME}"


class FakeMatrixServer:
    """See the module docstring. ``token`` is the bot account's access token."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, bot: str = BOT) -> None:
        self.state = HomeserverState()
        self.bot = bot
        self.token = self.state.register(bot, device_id="VIGILBOT", displayname="vigil")
        self._host, self._port = host, port
        self._stopping = False
        self._app = build_app(self.state, lambda: self._stopping)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> "FakeMatrixServer":
        """Serve (again, on the same port after ``stop``); returns once it accepts."""
        if self._thread is not None and self._thread.is_alive():
            return self
        sock = _bind(self._host, self._port)
        self._port = sock.getsockname()[1]
        self._stopping = False
        config = uvicorn.Config(self._app, log_config=None, lifespan="off", http="h11", ws="none",
                                loop="asyncio", timeout_graceful_shutdown=1)
        server = uvicorn.Server(config)

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            await server.serve(sockets=[sock])

        thread = threading.Thread(target=asyncio.run, args=(serve(),), name="fake-matrix", daemon=True)
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self._server = self._thread = None
                sock.close()
                raise RuntimeError("the fake Matrix homeserver did not start")
            time.sleep(0.001)
        return self

    def stop(self) -> None:
        """Vanish now: open connections are reset and the port refuses connections."""
        server, thread, loop = self._server, self._thread, self._loop
        if server is None or thread is None:
            return
        self._stopping = True
        if loop is not None and loop.is_running():
            try:
                loop.call_soon_threadsafe(_vanish, server)
            except RuntimeError:
                pass
        server.should_exit = server.force_exit = True
        thread.join(10)
        self._server = self._thread = self._loop = None

    def __enter__(self) -> "FakeMatrixServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The homeserver URL (``matrix.homeserver``)."""
        return f"http://{self._host}:{self._port}"

    def person(self, user_id: str) -> str:
        """Register a person (for a test that talks through a real client too); their token."""
        return self.state.register(user_id)

    def acknowledged(self, event_id: str) -> bool:
        """Whether the bot synced past ``event_id`` (its latest delivery, if it was replayed):
        the only acknowledgement a Matrix client gives."""
        with self.state.lock:
            positions = [position for room in self.state.rooms.values() for position, event in room.timeline
                         if event["event_id"] == event_id]
            return bool(positions) and self.state.confirmed(self.token) >= max(positions)
