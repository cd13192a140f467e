"""Files the agent sent to the web chat (outbox kind ``file``): the download link a page shows,
and the authenticated route that serves it, ``GET /api/files/{outbox_id}``.

A file is served only if an outbox entry of kind ``file`` for the web chat names it, and only
while it is still a regular file inside its conversation's working directory (where the
``send_file`` tool put it). It always downloads as an attachment of type
``application/octet-stream``: an HTML file the agent wrote must not run as a page of this
origin.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from vigil.gateway.adapters.web.state import WebState, error, guarded
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import PENDING, SENT, OutboxEntry

LOOKBACK = 2000
"""Outbox entries searched for a link this process has not seen (sent before a restart)."""


@dataclass(frozen=True, slots=True)
class SentFile:
    path: str
    name: str
    session_id: str | None


def link(outbox_id: int) -> str:
    return f"/api/files/{outbox_id}"


def sent_file(entry: OutboxEntry) -> SentFile | None:
    path, name = entry.meta.get("path"), entry.meta.get("name")
    if entry.kind != "file" or entry.route.adapter != "web" or not isinstance(path, str):
        return None
    return SentFile(path, name if isinstance(name, str) and name else Path(path).name, entry.session_id)


class SentFiles:
    """The files sent to the web chat, by outbox id (remembered at send, else looked up)."""

    def __init__(self, state: WebState) -> None:
        self.state = state
        self._known: dict[int, SentFile] = {}

    def remember(self, entry: OutboxEntry) -> SentFile | None:
        found = sent_file(entry)
        if found is not None:
            self._known[entry.id] = found
        return found

    def _lookup(self, outbox_id: int) -> SentFile | None:
        known, gateway = self._known.get(outbox_id), self.state.gateway  # None once stopping
        if known is not None or gateway is None:
            return known
        for entry in gateway.store.gateway.outbox_list(statuses=(SENT, PENDING), limit=LOOKBACK):
            if entry.id == outbox_id:
                return self.remember(entry)
        return None

    def _servable(self, found: SentFile) -> Path | None:
        gateway = self.state.gateway
        path = Path(found.path)
        try:
            real = path.resolve(strict=True)
            if gateway is not None and found.session_id is not None:
                if not real.is_relative_to(gateway.workdir(found.session_id).resolve()):
                    return None
        except (OSError, StoreError):  # gone, or its conversation was deleted
            return None
        return real if real.is_file() else None

    async def download(self, request: Request) -> Response:
        outbox_id = request.path_params["outbox_id"]
        found = await asyncio.to_thread(self._lookup, outbox_id)
        if found is None:
            return error(404, "no file was sent to the web chat with this id")
        real = await asyncio.to_thread(self._servable, found)
        if real is None:
            return error(410, f"{found.name} is no longer in the conversation's working directory")
        return FileResponse(
            real, filename=found.name, media_type="application/octet-stream",
            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
        )


def file_routes(state: WebState, files: SentFiles) -> list[Route]:
    return [Route("/api/files/{outbox_id:int}", guarded(state, files.download), methods=["GET"])]
