"""One outbox entry onto Matrix.

Every kind goes to the route's room, in the route's thread if it has one. A turn's answer
(``reply``, ``heartbeat``) finishes the preview that streamed it, by an edit, where there is
one (after a restart, the one the store recorded for it: the answer is never shown twice);
the rest of a long answer follows as new messages. Answers of the conversation (replies,
heartbeats, cron) are ``m.text``; what vigil itself says (pairing codes, command output,
notices) is ``m.notice``, which bots do not answer. ``file`` uploads ``meta.path``.

Each event is sent with a transaction id made of the entry's id, its creation time and the
piece's number: an entry retried after a crash or a lost answer sends the same transactions,
which the homeserver recognises, so nothing shows twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.matrix import files
from vigil.gateway.adapters.matrix.content import edit, in_thread, message
from vigil.gateway.adapters.splitting import split_text
from vigil.platforms.matrix import MATRIX
from vigil.store.gateway.gateway_tables import OutboxEntry

if TYPE_CHECKING:
    from vigil.gateway.adapters.matrix.adapter import MatrixAdapter
    from vigil.gateway.adapters.matrix.client import Homeserver

LIMIT = MATRIX.capabilities.max_message_chars or 12_000
"""Characters of Markdown in one message (Matrix refuses events over 65,536 bytes: a piece
this long stays well under that with its HTML beside it)."""
STREAMED_KINDS = frozenset({"reply", "heartbeat"})
CONVERSATION_KINDS = frozenset({"reply", "heartbeat", "cron"})


def txn(entry: OutboxEntry, part: str) -> str:
    return f"vigil-{entry.id}-{int(entry.created_at * 1000)}-{part}"


async def deliver(adapter: "MatrixAdapter", client: "Homeserver", entry: OutboxEntry) -> None:
    """Send ``entry``; raises ``DeliveryError`` (retryable or not) when the homeserver refuses."""
    room, thread = entry.route.chat, entry.route.thread
    if not room.startswith("!"):
        raise DeliveryError(f"'{room}' is not a Matrix room id", retryable=False)
    if room not in client.nio.rooms:
        raise DeliveryError(f"the agent is not in the room {room} (invite it first)", retryable=False)
    if entry.kind == "file":
        raw = entry.meta.get("path")
        path = Path(raw) if isinstance(raw, str) and raw else None
        if path is None or not path.is_absolute() or not path.is_file():
            raise DeliveryError(f"the file {raw} is not there any more", retryable=False)
        encrypt = client.encrypts and room in client.nio.encrypted_rooms
        content = await files.upload(client, path, str(entry.meta.get("name") or path.name), encrypt=encrypt)
        await client.send(room, in_thread(content, thread), txn=txn(entry, "file"))
        if entry.text:
            await client.send(room, in_thread(message(entry.text), thread), txn=txn(entry, "caption"))
        return
    msgtype = "m.text" if entry.kind in CONVERSATION_KINDS else "m.notice"
    pieces = split_text(entry.text or "", LIMIT, code_blocks=True, trim=True) or ["(no text)"]
    preview = adapter.claimed.get(entry.id)
    if preview is None and entry.kind in STREAMED_KINDS:
        stream = await adapter.streams.claim(entry.route, entry.text)
        if stream is not None and stream.message is not None:
            preview = (str(stream.message), stream.durable)
        else:
            found = await adapter.previews.find(entry)  # streamed before a restart
            if found is not None and isinstance(found.message, str):
                preview = (found.message, found)
        if preview is not None:
            adapter.claimed[entry.id] = preview
    try:
        for index, piece in enumerate(pieces):
            content = message(piece, msgtype=msgtype)
            if index == 0 and preview is not None:
                await client.send(room, edit(preview[0], content), txn=txn(entry, "edit"))
            else:
                await client.send(room, in_thread(content, thread), txn=txn(entry, str(index)))
    except DeliveryError as exc:
        if not exc.retryable:
            _done(adapter, entry)
        raise
    _done(adapter, entry)


def _done(adapter: "MatrixAdapter", entry: OutboxEntry) -> None:
    preview = adapter.claimed.pop(entry.id, None)
    if preview is not None:
        adapter.previews.done(preview[1])
