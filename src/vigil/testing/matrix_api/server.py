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

from vigil.testing.matrix_api.api import build_app
from vigil.testing.matrix_api.state import SERVER_NAME, HomeserverState
from vigil.testing.serving import ThreadedServer

BOT = f"@vigil:{SERVER_NAME}"


class FakeMatrixServer(ThreadedServer):
    """See the module docstring. ``token`` is the bot account's access token; :attr:`url` is
    the homeserver URL (``matrix.homeserver``)."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, bot: str = BOT) -> None:
        self.state = HomeserverState()
        self.bot = bot
        self.token = self.state.register(bot, device_id="VIGILBOT", displayname="vigil")
        super().__init__(build_app(self.state, lambda: self.stopping), name="fake Matrix homeserver", host=host,
                         port=port)

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
