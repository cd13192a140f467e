"""A load driver for ``gateway_load.py``, run as its own process so that its CPU is not the
measured server's: web-chat conversations through the web API, as a browser tab makes them.

Each conversation is made with ``POST /api/conversations`` and keeps one event stream open
(``GET /api/conversations/{id}/events``, Server-Sent Events), as the web chat's page does. A
message is ``POST /api/conversations/{id}/messages``; its latency is from just before the POST
to the ``turn_ended`` event on the stream; the conversation then sends its next message. One
warm-up message per conversation is sent before the measured window and not counted.

Protocol with the parent: the driver prints ``ready`` once its conversations exist, their
streams are open and warmed up, waits for a line on stdin, runs, and prints one JSON line:
``{"latencies": [seconds...], "started": t, "ended": t, "timeouts": n, "retries": n}``
(``time.monotonic()``, shared by the processes of one machine).

    VIGIL_BENCH_TOKEN=TOKEN python bench/gateway_load_parts/driver.py --base URL --conversations N --messages M
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
    """One conversation and its open event stream; ``ended`` gets one item per ``turn_ended``."""

    def __init__(self, client: httpx.AsyncClient, base: str) -> None:
        self.client, self.base = client, base
        self.id = ""
        self.ended: asyncio.Queue[float] = asyncio.Queue()
        self.reader: asyncio.Task[None] | None = None
        self.retries = 0

    async def open(self) -> None:
        for _ in range(50):
            try:
                response = await self.client.post(f"{self.base}/api/conversations")
                if response.status_code in (200, 201):
                    self.id = response.json()["id"]
                    break
            except httpx.HTTPError:
                pass
            self.retries += 1
            await asyncio.sleep(0.2)
        else:
            raise SystemExit(f"no conversation made at {self.base}")
        connected = asyncio.get_running_loop().create_future()
        self.reader = asyncio.create_task(self._read(connected))
        await asyncio.wait_for(connected, 30)

    async def _read(self, connected: asyncio.Future[None]) -> None:
        url = f"{self.base}/api/conversations/{self.id}/events"
        async with self.client.stream("GET", url, timeout=httpx.Timeout(30, read=None)) as response:
            if response.status_code != 200:
                connected.set_exception(SystemExit(f"GET {url}: {response.status_code}"))
                return
            async for line in response.aiter_lines():
                if not connected.done():
                    connected.set_result(None)
                if line.startswith("data:") and '"turn_ended"' in line:
                    if json.loads(line[5:]).get("type") == "turn_ended":
                        self.ended.put_nowait(time.monotonic())

    async def send(self, text: str) -> float | None:
        """Post ``text`` and wait for its turn to end: the seconds it took, ``None`` if no
        answer came within ``ANSWER_WAIT``."""
        body = {"text": text, "client_id": uuid.uuid4().hex}
        sent = time.monotonic()
        url = f"{self.base}/api/conversations/{self.id}/messages"
        while True:
            try:
                response = await self.client.post(url, json=body)
                if response.status_code == 202:
                    break
                if response.status_code not in (502, 503):
                    raise SystemExit(f"POST {url}: {response.status_code} {response.text[:200]}")
            except httpx.HTTPError:
                pass
            self.retries += 1
            if time.monotonic() - sent > ANSWER_WAIT:
                return None
            await asyncio.sleep(0.2)
        try:
            ended = await asyncio.wait_for(self.ended.get(), ANSWER_WAIT)
        except asyncio.TimeoutError:
            return None
        return ended - sent

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            try:
                await self.reader
            except (asyncio.CancelledError, httpx.HTTPError):
                pass


async def run(base: str, token: str, conversations: int, messages: int) -> dict:
    # A client per conversation, as each browser tab has its own connections (and httpx's pool
    # costs more CPU per request the more connections it holds: one shared pool of 100 spent
    # four times the CPU per message of 50 small ones).
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    clients = [httpx.AsyncClient(headers=headers, limits=limits, timeout=60, trust_env=False)
               for _ in range(conversations)]
    try:
        convs = [Conversation(client, base) for client in clients]
        await asyncio.gather(*(c.open() for c in convs))
        await asyncio.gather(*(c.send("warm-up") for c in convs))
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        latencies: list[float] = []
        timeouts = [0]

        async def talk(conversation: Conversation) -> None:
            for n in range(messages):
                took = await conversation.send(f"message {n} of {conversation.id}")
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
    return {"latencies": latencies, "started": started, "ended": ended, "timeouts": timeouts[0],
            "retries": sum(c.retries for c in convs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--conversations", type=int, required=True)
    parser.add_argument("--messages", type=int, required=True)
    args = parser.parse_args()
    result = asyncio.run(run(args.base, os.environ["VIGIL_BENCH_TOKEN"], args.conversations, args.messages))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
