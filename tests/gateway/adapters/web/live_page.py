"""The web chat as an open page sees one conversation, for the messaging part of the adapter
contract: its live event stream (``GET /api/conversations/{id}/events``) read over HTTP, and
what the page's script (``frontend/src/conversation.js``) draws from those events — the bot's
messages as :class:`tests.gateway.messaging_contract.Shown`.

A turn is one message that grows with each ``delta`` (every text it showed is a version, with
when it arrived); an ``approval_request`` is a card with Approve and Deny, disabled once
``approval_resolved`` says it was answered; a ``reply`` of kind ``file`` is a download link
(its bytes fetched as the person's click would); notices and command replies are messages of
their own. An outbox ``reply`` is the copy of an answer the page streamed already (this page is
open before anything is sent): it is not drawn twice.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.gateway.messaging_contract import Shown

APPROVE, DENY = "Approve", "Deny"
"""The labels of an approval card's buttons (``frontend/src/approval.js``)."""
OPEN_TIMEOUT = 20.0


def size_text(size: int) -> str:
    """A size as the page writes it (``formatSize`` in ``frontend/src/dom.js``)."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.{1 if size < 10 * 1024 else 0}f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def uploaded(caption: str, saved: dict[str, Any]) -> str:
    """The message the page sends with a file it uploaded (``send`` in ``frontend/src/app.js``)."""
    note = f"I uploaded {saved['name']} ({size_text(int(saved['size']))}) into the working directory."
    return "\n\n".join(part for part in (caption if caption.strip() else "", note) if part)


def draw(events: list[tuple[float, dict[str, Any]]]) -> list[tuple[Shown, str | None]]:
    """The bot's messages the page shows after ``events`` (each with when it arrived), oldest
    first, each with the download link of the file it carries (``None``: none)."""
    drawn: list[tuple[Shown, str | None]] = []
    turn: Shown | None = None
    cards: dict[str, Shown] = {}

    def add(message: Shown, url: str | None = None) -> Shown:
        drawn.append((message, url))
        return message

    for at, event in events:
        kind = event.get("type")
        if kind == "turn_began":
            turn = None
        elif kind == "delta":
            turn = turn or add(Shown(""))
            turn.text += str(event.get("text") or "")
            turn.versions.append(turn.text)
            turn.times.append(at)
        elif kind == "turn_ended":
            content = str(event.get("content") or "")
            if content and (turn is None or not turn.text.strip()):  # an answer that did not stream
                turn = turn or add(Shown(""))
                turn.text = content
                turn.versions.append(content)
                turn.times.append(at)
            turn = None
        elif kind == "approval_request":
            text = f"Waiting for your approval to run {event.get('tool')}\n{event.get('description') or ''}"
            cards[str(event.get("id"))] = add(Shown(text, [text], [at], [APPROVE, DENY], ref=str(event.get("id"))))
        elif kind == "approval_resolved" and str(event.get("id")) in cards:
            cards[str(event.get("id"))].buttons = []  # the page disables them
        elif kind == "command_reply" or (kind == "reply" and event.get("kind") == "notice"):
            text = str(event.get("text") or "")
            add(Shown(text, [text], [at]))
        elif kind == "reply" and event.get("kind") == "file" and event.get("url"):
            text = str(event.get("text") or "")
            add(Shown(text, [text], [at], file=(str(event.get("name")), b"")), str(event["url"]))
    return drawn


@dataclass
class LivePage:
    """One page with a conversation open: its event stream, reopened when it ended (as the
    page reconnects), and the events it got."""

    client: httpx.AsyncClient
    """Authenticated with the gateway's token; closed with the page."""
    session_id: str
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _files: dict[str, bytes] = field(default_factory=dict)

    async def ensure_open(self) -> None:
        """Open the stream unless it is open; back once the gateway has subscribed it."""
        if self._task is not None and not self._task.done():
            return
        connected = asyncio.Event()

        async def read() -> None:
            async with self.client.stream("GET", f"/api/conversations/{self.session_id}/events",
                                          timeout=httpx.Timeout(30, read=None)) as stream:
                assert stream.status_code == 200, await stream.aread()
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        self.events.append((time.monotonic(), json.loads(line[len("data: "):])))
                    connected.set()

        self._task = asyncio.create_task(read())
        waiting = asyncio.create_task(connected.wait())
        await asyncio.wait([self._task, waiting], timeout=OPEN_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if self._task.done():
            self._task.result()
        assert connected.is_set(), "the event stream did not open"

    async def messages(self) -> list[Shown]:
        """The bot's messages the page shows now, files downloaded as a click would."""
        shown = []
        for message, url in draw(self.events):
            if url is not None and message.file is not None:
                if url not in self._files:
                    response = await self.client.get(url)
                    assert response.status_code == 200, response.text
                    self._files[url] = response.content
                message.file = (message.file[0], self._files[url])
            shown.append(message)
        return shown

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.client.aclose()
