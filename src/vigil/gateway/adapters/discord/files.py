"""Files both ways. Attachments people send are saved into the conversation's working
directory (under ``gateway.upload_max_bytes``, fetched by discord.py from Discord's CDN only —
or from the host of ``discord.api_url`` in tests) and named in the message the agent reads; a
file that cannot be saved is named with the reason. Files the agent sends go up as attachments."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import discord

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.saved_files import NoFreeName, safe_name, save_new

log = logging.getLogger(__name__)

CDN_HOSTS = ("cdn.discordapp.com", "media.discordapp.net")


def trusted(url: str, api_url: str | None) -> bool:
    parts = urlsplit(url)
    if parts.hostname in CDN_HOSTS:
        return parts.scheme == "https"
    return api_url is not None and parts.hostname == urlsplit(api_url).hostname


async def save(attachment: Any, directory: Path, *, max_bytes: int, api_url: str | None) -> str:
    """Save one attachment; the line that tells the agent where it is (or why it is not)."""
    name = str(attachment.filename or "file")
    if not trusted(str(attachment.url), api_url):
        reason = "it is not on Discord's CDN"
    elif attachment.size > max_bytes:
        reason = f"it is larger than the limit of {max_bytes} bytes"
    else:
        try:
            data = await attachment.read()
            if len(data) > max_bytes:
                raise ValueError(f"it is larger than the limit of {max_bytes} bytes")
            path = await asyncio.to_thread(save_new, directory, safe_name(name), data)
        except (ValueError, NoFreeName) as exc:
            reason = str(exc)
        except (discord.HTTPException, OSError) as exc:
            reason = f"the download failed ({type(exc).__name__})"
        else:
            return f"[File received: {name!r}, saved as {path} ({len(data)} bytes).]"
    log.warning("a file sent on Discord was not saved: %s", reason)
    return f"[The file {name!r} was not saved: {reason}.]"


async def attach(attachments: list[Any], directory: Path, text: str, *, max_bytes: int, api_url: str | None) -> str:
    """``text`` with a line naming each attachment saved (or why it was not)."""
    lines = [await save(a, directory, max_bytes=max_bytes, api_url=api_url) for a in attachments]
    return "\n\n".join(part for part in (text, "\n".join(lines)) if part)


def upload(meta: dict[str, Any]) -> discord.File:
    """The attachment an outbox ``file`` entry sends; ``DeliveryError`` when it is gone."""
    raw = meta.get("path")
    if not isinstance(raw, str) or not raw:
        raise DeliveryError("a file entry without a path", retryable=False)
    path = Path(raw)
    if not path.is_absolute() or not path.is_file():
        raise DeliveryError(f"the file {raw} is not there any more", retryable=False)
    return discord.File(path, filename=safe_name(str(meta.get("name") or path.name)))
