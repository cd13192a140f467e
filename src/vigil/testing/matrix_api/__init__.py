"""A local Matrix homeserver for vigil's tests (:class:`FakeMatrixServer`, real HTTP on
loopback): the client-server API matrix-nio speaks (:mod:`.api`, :mod:`.sync`), the rooms,
accounts and media it keeps with the people's side for tests to play (:mod:`.state`), and the
keys and to-device messages of end-to-end encryption (:mod:`.keys`)."""

from vigil.testing.matrix_api.server import BOT, FakeMatrixServer
from vigil.testing.matrix_api.state import SERVER_NAME, HomeserverState

__all__ = ["BOT", "FakeMatrixServer", "HomeserverState", "SERVER_NAME"]
