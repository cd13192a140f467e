"""One endpoint's requests spread over httpx clients of one kept-alive connection each (lanes),
made as they are needed: a request takes the lane given back last (its connection the likeliest
to be open still), or a new one when every lane is busy.

Why not one client with a pool: httpcore's pool (1.0.x) walks all its connections on every
request and on every response closed — a socket ``poll`` and an attribute lookup for each idle
one, and for each a count over all of them (quadratic) — and its keep-alive limit counts every
connection instead of the idle ones, so past ``max_keepalive_connections`` (20) a connection is
closed as soon as it is idle and the next call connects again. With 50 conversations streaming
at once the pool was 17 % of the gateway's Python time (``bench/gateway_load.py --py-spy``).
Measured there, 50 conversations, gateway CPU a message (runs interleaved, same load): one
client 8.4-12.9 ms; pools of 8 connections side by side 6.5-9.7 ms; lanes of one connection,
with no pool walk left at all, 4.8-6.8 ms against 5.8-8.1 ms for lanes of 8. pydantic's httpx2
fixes the pool, but it costs more to import than a one-shot ``vigil chat -q`` may spend on the
whole client.

The number of calls at once stays unbounded (one client's default limit was 100); every lane
keeps its connection alive, so a steady load reuses its connections.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Closable(Protocol):
    async def aclose(self) -> None: ...


Client = TypeVar("Client", bound=Closable)


class Lanes(Generic[Client]):
    """Clients made by ``make()`` as they are needed (an ``httpx.AsyncClient`` whose pool
    keeps one connection, alive), one request at a time each."""

    def __init__(self, make: Callable[[], Client]) -> None:
        self._make = make
        self._clients: list[Client] = []
        self._idle: list[int] = []
        """Lanes free now, the one given back last at the end."""

    def take(self) -> tuple[Client, Callable[[], None]]:
        """A free client, and what gives it back (once, when the response is closed; later
        calls do nothing)."""
        if self._idle:
            index = self._idle.pop()
        else:
            self._clients.append(self._make())
            index = len(self._clients) - 1
        clients = self._clients
        returned = False

        def give_back() -> None:
            nonlocal returned
            if not returned and clients is self._clients:  # not after aclose
                returned = True
                self._idle.append(index)

        return clients[index], give_back

    @property
    def in_use(self) -> int:
        """Requests under way."""
        return len(self._clients) - len(self._idle)

    @property
    def size(self) -> int:
        """Lanes made so far."""
        return len(self._clients)

    async def aclose(self) -> None:
        clients, self._clients, self._idle = self._clients, [], []
        for client in clients:
            await client.aclose()
