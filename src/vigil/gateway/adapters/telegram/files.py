"""Files and photos sent to the bot: saved into the conversation's working directory (at
most ``gateway.upload_max_bytes``) and named in the user message, so the agent can read them.

A file that cannot be saved (too large, the download failed) is named in the message too, with
the reason, so the agent can tell the person instead of the message going unanswered.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from vigil.gateway.adapters.saved_files import open_new as _open_new, safe_name

if TYPE_CHECKING:
    from telegram import Bot, Message

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Attachment:
    file_id: str
    name: str
    size: int | None


class TooLarge(Exception):
    pass


def attachment_of(message: "Message") -> Attachment | None:
    """The file a message carries (a document, the largest size of a photo, audio, video or
    voice), or ``None``."""
    if message.document is not None:
        doc = message.document
        return Attachment(doc.file_id, doc.file_name or f"document-{message.message_id}", doc.file_size)
    if message.photo:
        photo = max(message.photo, key=lambda p: (p.file_size or 0, p.width * p.height))
        return Attachment(photo.file_id, f"photo-{message.message_id}.jpg", photo.file_size)
    for kind in ("audio", "video", "voice", "video_note", "animation"):
        media: Any = getattr(message, kind, None)
        if media is not None:
            name = getattr(media, "file_name", None) or f"{kind}-{message.message_id}"
            return Attachment(media.file_id, name, media.file_size)
    return None


async def save_attachment(bot: "Bot", attachment: Attachment, directory: Path, max_bytes: int) -> str:
    """Download ``attachment`` into ``directory``; the note to add to the user message."""
    name = safe_name(attachment.name)
    if attachment.size is not None and attachment.size > max_bytes:
        return f"[The user sent the file '{name}' ({attachment.size} bytes); it was not saved: larger than the limit of {max_bytes} bytes]"
    try:
        remote = await bot.get_file(attachment.file_id)
        if not remote.file_path:
            raise OSError("Telegram gave no download path")
        path, size = await _download(remote.file_path, directory, name, max_bytes)
    except TooLarge:
        return f"[The user sent the file '{name}'; it was not saved: larger than the limit of {max_bytes} bytes]"
    except Exception as exc:  # any failure: the person is told through the agent
        from vigil.gateway.adapters.telegram.redaction import REDACT

        reason = REDACT.scrub(str(exc)) or type(exc).__name__  # a download URL carries the token
        log.warning("telegram: cannot download %s: %s", name, reason)
        return f"[The user sent the file '{name}'; it could not be downloaded: {reason}]"
    return f"[The user sent a file, saved as {path} ({size} bytes)]"


async def _download(url: str, directory: Path, name: str, max_bytes: int) -> tuple[Path, int]:
    await asyncio.to_thread(directory.mkdir, 0o700, True, True)
    path, out = await asyncio.to_thread(_open_new, directory, name)
    size = 0
    try:
        async with httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT) as client:
            async with client.stream("GET", url) as response:
                response.raise_for_status()
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise TooLarge()
                    out.write(chunk)
    except BaseException:
        out.close()
        path.unlink(missing_ok=True)
        raise
    out.close()
    return path, size
