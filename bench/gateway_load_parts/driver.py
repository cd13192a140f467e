"""A load driver for ``gateway_load.py``, run as its own process so that its CPU is not the
measured server's: web-chat conversations through the web API, as a browser tab makes them.

Each conversation is made with ``POST /api/conversations`` and keeps an event stream open
(``GET /api/conversations/{id}/events``, Server-Sent Events) on every server it talks to, as the
web chat's page keeps one. A message is ``POST /api/conversations/{id}/messages``; its latency
is from just before the POST to the ``turn_ended`` of its turn (the turn whose ``turn_began``
carried its text) on the stream of the server it was posted to; the conversation then sends its
next message. With several ``--base`` (gateways sharing one store), conversation ``i`` is made
on base ``i`` (round-robin, counting from ``--first``) and its message ``n`` goes to the ``n``-th
base from that one, so most messages land on a worker that does not run their conversation.
One warm-up message per conversation is sent before the measured window and not counted.

Protocol with the parent: the driver prints ``ready`` once its conversations exist, their
streams are open and warmed up, waits for a line on stdin, runs, and prints one JSON line:
``{"latencies": [seconds...], "receipts": [inbox ids, the warm-ups' included], "started": t,
"ended": t, "timeouts": n, "retries": n}`` (``time.monotonic()``, shared by the processes of one machine).

    VIGIL_BENCH_TOKEN=TOKEN python bench/gateway_load_parts/driver.py --base URL [--base URL2 ...]
        --conversations N --messages M [--first I]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid

import httpx

ANSWER_WAIT = 120.0
"""Seconds a conversation waits for one answer before counting it and sending the next."""


class Conversation:
    """One conversation and its open event streams, one per base: ``ended[base]`` gets
    ``(text of the turn, when)`` for each ``turn_ended`` seen there."""

    def __init__(self, client: httpx.AsyncClient, bases: list[str]) -> None:
        self.client, self.bases = client, bases
        self.id = ""
        self.ended: dict[str, asyncio.Queue[tuple[str, float]]] = {base: asyncio.Queue() for base in bases}
        self.readers: list[asyncio.Task[None]] = []
        self.retries = 0
        self.receipts: list[int] = []

    async def open(self) -> None:
        for _ in range(50):
            try:
                response = await self.client.post(f"{self.bases[0]}/api/conversations")
                if response.status_code in (200, 201):
                    self.id = response.json()["id"]
                    break
            except httpx.HTTPError:
                pass
            self.retries += 1
            await asyncio.sleep(0.2)
        else:
            raise SystemExit(f"no conversation made at {self.bases[0]}")
        loop = asyncio.get_running_loop()
        for base in self.bases:
            connected = loop.create_future()
            self.readers.append(asyncio.create_task(self._read(base, connected)))
            await asyncio.wait_for(connected, 30)

    async def _read(self, base: str, connected: asyncio.Future[None]) -> None:
        url = f"{base}/api/conversations/{self.id}/events"
        queue, text = self.ended[base], ""
        async with self.client.stream("GET", url, timeout=httpx.Timeout(30, read=None)) as response:
            if response.status_code != 200:
                connected.set_exception(SystemExit(f"GET {url}: {response.status_code}"))
                return
            async for line in response.aiter_lines():
                if not connected.done():
                    connected.set_result(None)
                if not line.startswith("data:") or '"turn_' not in line:
                    continue
                event = json.loads(line[5:])
                if event.get("type") == "turn_began":
                    text = str(event.get("text") or "")
                elif event.get("type") == "turn_ended":
                    queue.put_nowait((text, time.monotonic()))

    async def send(self, text: str, base: str) -> float | None:
        """Post ``text`` to ``base`` and wait for its turn to end there: the seconds it took,
        ``None`` if no answer came within ``ANSWER_WAIT``."""
        body = {"text": text, "client_id": uuid.uuid4().hex}  # the same client_id on a retry
        sent = time.monotonic()
        url = f"{base}/api/conversations/{self.id}/messages"
        while True:
            try:
                response = await self.client.post(url, json=body)
                if response.status_code == 202:
                    self.receipts.append(response.json()["inbox_id"])
                    break
                if response.status_code not in (502, 503):
                    raise SystemExit(f"POST {url}: {response.status_code} {response.text[:200]}")
            except httpx.HTTPError:
                pass
            self.retries += 1
            if time.monotonic() - sent > ANSWER_WAIT:
                return None
            await asyncio.sleep(0.2)
        queue = self.ended[base]
        try:
            while True:
                turn, ended = await asyncio.wait_for(queue.get(), ANSWER_WAIT - (time.monotonic() - sent))
                if turn == text:
                    return ended - sent
        except (asyncio.TimeoutError, ValueError):
            return None

    async def close(self) -> None:
        for reader in self.readers:
            reader.cancel()
            try:
                await reader
            except (asyncio.CancelledError, httpx.HTTPError):
                pass


async def run(bases: list[str], token: str, conversations: int, messages: int, first: int) -> dict:
    # A client per conversation, as each browser tab has its own connections (and httpx's pool
    # costs more CPU per request the more connections it holds: one shared pool of 100 spent
    # four times the CPU per message of 50 small ones).
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=2 * len(bases) + 2, max_keepalive_connections=2 * len(bases) + 2)
    clients = [httpx.AsyncClient(headers=headers, limits=limits, timeout=60, trust_env=False)
               for _ in range(conversations)]
    rotations = [bases[(first + i) % len(bases):] + bases[:(first + i) % len(bases)] for i in range(conversations)]
    try:
        convs = [Conversation(client, rotation) for client, rotation in zip(clients, rotations)]
        await asyncio.gather(*(c.open() for c in convs))
        await asyncio.gather(*(c.send(f"warm-up of {c.id}", c.bases[0]) for c in convs))
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        latencies: list[float] = []
        timeouts = [0]

        async def talk(conversation: Conversation) -> None:
            for n in range(messages):
                base = conversation.bases[n % len(conversation.bases)]
                took = await conversation.send(f"message {n} of {conversation.id}", base)
                if took is None:
                    timeouts[0] += 1
                else:
                    latencies.append(took)

        started = time.monotonic()
        await asyncio.gather(*(talk(c) for c in convs))
        ended = time.monotonic()
        await asyncio.gather(*(c.close() for c in convs))
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))
    return {"latencies": latencies, "receipts": [r for c in convs for r in c.receipts], "started": started,
            "ended": ended, "timeouts": timeouts[0], "retries": sum(c.retries for c in convs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", action="append", required=True, help="a server's URL (repeatable)")
    parser.add_argument("--conversations", type=int, required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--first", type=int, default=0, help="the index of the first conversation (round-robin)")
    args = parser.parse_args()
    result = asyncio.run(run(args.base, os.environ["VIGIL_BENCH_TOKEN"], args.conversations, args.messages,
                             args.first))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
