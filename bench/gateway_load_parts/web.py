"""The web side of ``gateway_load.py``: a conversation made through the web API that posts its
messages one after another, each answer awaited on the event stream of the gateway it was
posted to (or, with ``wait_answers`` off, posts without waiting and retries a POST that failed
with the same ``client_id``, its idempotency key, until a gateway takes it)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field

import httpx

from gateway_load_parts import telegram as tg

ANSWER_WAIT = 120.0
"""Seconds a user waits for one answer before counting it and writing on."""
PHASE_DEADLINE = 900.0
"""Seconds a phase may take to settle after its clients finished."""


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    accepted: list[int] = field(default_factory=lambda: [0])
    """Messages taken so far, web and Telegram (a list: the Telegram users count into it too)."""
    retries: int = 0
    timeouts: int = 0
    """Web answers not seen on the event stream (within ``ANSWER_WAIT`` seconds, or it broke)."""
    started: float = 0.0
    ended: float = 0.0
    web_ended: float = 0.0
    telegram: tg.Side = field(default_factory=tg.Side)
    killed: float = 0.0
    doubles: int | None = None
    """Telegram: answers shown before the kill and again by the restarted gateway."""
    receipts: list[int] = field(default_factory=list)
    """The inbox ids the web POSTs were given (one per accepted web message)."""


async def post_until_taken(client: httpx.AsyncClient, url: str, body: dict, phase: Phase) -> dict:
    deadline = time.monotonic() + PHASE_DEADLINE
    while time.monotonic() < deadline:
        try:
            response = await client.post(url, json=body)
            if response.status_code == 202:
                return response.json()
            if response.status_code not in (502, 503):
                raise SystemExit(f"POST {url}: {response.status_code} {response.text[:200]}")
        except httpx.HTTPError:
            pass
        phase.retries += 1
        await asyncio.sleep(0.2)
    raise SystemExit(f"POST {url}: not taken in {PHASE_DEADLINE:.0f} s")


async def open_stream(client: httpx.AsyncClient, url: str, phase: Phase) -> httpx.Response:
    """The event stream at ``url``, its headers read. Opening it again after a transport error
    is safe (nothing was posted yet); the usual one is a kept-alive connection the server
    closed as the request went out on it."""
    deadline = time.monotonic() + PHASE_DEADLINE
    while True:
        try:
            return await client.send(client.build_request("GET", url, timeout=ANSWER_WAIT), stream=True)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
        phase.retries += 1
        await asyncio.sleep(0.2)


async def web_conversation(client: httpx.AsyncClient, bases: list[str], messages: int, phase: Phase,
                           wait_answers: bool) -> None:
    """One conversation, made on ``bases[0]``; message ``n`` goes to ``bases[n % len(bases)]``
    and its answer is awaited on that gateway's event stream."""
    deadline = time.monotonic() + PHASE_DEADLINE
    while True:
        try:
            response = await client.post(f"{bases[0]}/api/conversations")
            if response.status_code in (200, 201):
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the gateway made no web conversation")
        await asyncio.sleep(0.2)
    session_id = response.json()["id"]
    for n in range(messages):
        base = bases[n % len(bases)]
        body = {"text": f"message {n} of {session_id}", "client_id": uuid.uuid4().hex}
        if not wait_answers:
            receipt = await post_until_taken(client, f"{base}/api/conversations/{session_id}/messages", body, phase)
            phase.receipts.append(receipt["inbox_id"])
            phase.accepted[0] += 1
            continue
        events = await open_stream(client, f"{base}/api/conversations/{session_id}/events", phase)
        try:
            sent = time.perf_counter()
            receipt = await post_until_taken(client, f"{base}/api/conversations/{session_id}/messages", body, phase)
            phase.receipts.append(receipt["inbox_id"])
            phase.accepted[0] += 1
            try:
                async for line in events.aiter_lines():
                    if line.startswith("data:") and json.loads(line[5:]).get("type") == "turn_ended":
                        phase.latencies.append(time.perf_counter() - sent)
                        break
            except httpx.TransportError:  # a read timeout, or the stream broke: the answer went unseen
                phase.timeouts += 1
        finally:
            await events.aclose()
    phase.web_ended = max(phase.web_ended, time.perf_counter())
