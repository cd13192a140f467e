"""Small connection pools side by side: one endpoint's requests spread over httpx clients of at
most :data:`LANE_CONNECTIONS` connections each, the first with a free connection taking the next.

Why not one client: httpcore's pool (1.0.x) walks all its connections on every request and on
every response closed — a socket ``poll`` for each idle one, and for each a count over all of
them (quadratic) — and its keep-alive limit counts every connection instead of the idle ones,
so past ``max_keepalive_connections`` (20) a connection is closed as soon as it is idle and the
next call connects again. With 50 conversations streaming at once the pool was 17 % of the
gateway's Python time, and a streamed call cost 2.1 ms of CPU against 1.1 ms for one caller
alone (``bench/gateway_load.py --py-spy``; the calls alone, 50 at once on the fake model: 2.1
ms a call with one client, 1.2 ms with lanes of 8). pydantic's httpx2 fixes the pool, but it
costs more to import than a one-shot ``vigil chat -q`` may spend on the whole client.

A lane never holds more requests than connections, so no request queues inside httpx and the
number of calls at once stays unbounded, as it was with one client (its default limit of 100
aside); a lane keeps every connection it made alive, so a steady load reuses its connections.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

LANE_CONNECTIONS = 8
"""Connections (and so requests at once) one lane's pool holds."""


class Closable(Protocol):
    async def aclose(self) -> None: ...


Client = TypeVar("Client", bound=Closable)


class Lanes(Generic[Client]):
    """Clients made by ``make(connections)`` as they are needed (an ``httpx.AsyncClient``
    whose pool keeps that many connections, all of them alive), ``LANE_CONNECTIONS`` requests
    each."""

    def __init__(self, make: Callable[[int], Client]) -> None:
        self._make = make
        self._clients: list[Client] = []
        self._busy: list[int] = []

    def take(self) -> tuple[Client, Callable[[], None]]:
        """A client with a free connection, and what gives it back (once, when the response
        is closed; later calls do nothing)."""
        for index, busy in enumerate(self._busy):
            if busy < LANE_CONNECTIONS:
                break
        else:
            self._clients.append(self._make(LANE_CONNECTIONS))
            self._busy.append(0)
            index = len(self._clients) - 1
        self._busy[index] += 1
        returned = False

        def give_back() -> None:
            nonlocal returned
            if not returned:
                returned = True
                self._busy[index] -= 1

        return self._clients[index], give_back

    @property
    def in_use(self) -> int:
        """Requests under way over all lanes."""
        return sum(self._busy)

    @property
    def size(self) -> int:
        """Lanes made so far."""
        return len(self._clients)

    async def aclose(self) -> None:
        clients, self._clients, self._busy = self._clients, [], []
        for client in clients:
            await client.aclose()
