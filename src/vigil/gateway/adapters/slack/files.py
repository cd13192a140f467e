"""Files people share with the app, saved into the conversation's working directory.

Each file is fetched from its ``url_private_download`` with the bot token, streamed to disk
under the gateway's upload size cap (``gateway.upload_max_bytes``), and named in the user
message so the agent can read it. The token goes only to Slack's own hosts (or the host of a
configured ``slack.api_url``); a file that cannot be saved is named with the reason instead.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import httpx

from vigil.gateway.adapters.saved_files import NoFreeName, open_new, safe_name

log = logging.getLogger(__name__)

TIMEOUT = 20.0


class FileRefused(Exception):
    """A shared file that was not saved (the message says why)."""


def trusted_host(url: str, api_url: str | None) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "slack.com" or host.endswith((".slack.com", ".slack-edge.com")):
        return urlsplit(url).scheme == "https"
    return api_url is not None and host == urlsplit(api_url).hostname


def _create(directory: Path, name: str) -> tuple[Path, IO[bytes]]:
    try:
        return open_new(directory, name)
    except NoFreeName as exc:
        raise FileRefused(str(exc)) from None


async def download(file: dict[str, Any], directory: Path, *, token: str, max_bytes: int,
                   api_url: str | None) -> tuple[Path, int]:
    """Save one shared file into ``directory``; its path and size. Raises ``FileRefused``."""
    url = file.get("url_private_download") or file.get("url_private")
    if not isinstance(url, str) or not trusted_host(url, api_url):
        raise FileRefused("it has no download address on Slack")
    size = file.get("size")
    if isinstance(size, int) and size > max_bytes:
        raise FileRefused(f"it is larger than the limit of {max_bytes} bytes")
    path, out = _create(directory, safe_name(str(file.get("name") or "file")))
    written = 0
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as client:
            async with client.stream("GET", url, headers={"Authorization": f"Bearer {token}"}) as response:
                if response.status_code != 200:
                    raise FileRefused(f"Slack answered HTTP {response.status_code}")
                async for chunk in response.aiter_bytes():
                    written += len(chunk)
                    if written > max_bytes:
                        raise FileRefused(f"it is larger than the limit of {max_bytes} bytes")
                    out.write(chunk)
    except (FileRefused, httpx.HTTPError, OSError) as exc:
        out.close()
        path.unlink(missing_ok=True)
        if isinstance(exc, FileRefused):
            raise
        raise FileRefused(f"the download failed ({type(exc).__name__})") from None
    out.close()
    return path, written


async def attach(files: list[dict[str, Any]], directory: Path, text: str, *, token: str,
                 max_bytes: int, api_url: str | None) -> str:
    """``text`` with a line naming each file saved (or why it was not)."""
    lines = []
    for file in files:
        name = str(file.get("name") or "file")
        try:
            path, size = await download(file, directory, token=token, max_bytes=max_bytes, api_url=api_url)
        except FileRefused as exc:
            log.warning("a file shared on Slack was not saved: %s", exc)
            lines.append(f"[The file {name!r} was not saved: {exc}.]")
            continue
        lines.append(f"[File received: {name!r}, saved as {path} ({size} bytes).]")
    return "\n\n".join(part for part in (text, "\n".join(lines)) if part)
