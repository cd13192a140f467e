"""Files a person sends into a conversation's working directory, whatever the platform: the
directory of the conversation a route leads to, a safe name from what the platform says, and a
new file that never replaces one already there."""

from __future__ import annotations

import asyncio
import os
import re
import unicodedata
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from vigil.gateway.adapters.base import GatewayPort
    from vigil.store.gateway.gateway_tables import RouteKey

MAX_NAME = 200
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029/\\:]+")  # C0 and C1 controls, line separators
_BIDI_CONTROLS = dict.fromkeys(map(ord, "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))


class NoFreeName(OSError):
    """Every ``name (n)`` is taken in the directory."""


async def conversation_directory(gateway: "GatewayPort", route: "RouteKey") -> Path:
    """The working directory of the conversation ``route`` leads to (a new conversation when
    it leads to none yet): where what the person sends is saved."""
    session_id = await asyncio.to_thread(gateway.store.gateway.route_get, route)
    if session_id is None:
        session_id = await gateway.open_conversation(route)
    return await asyncio.to_thread(gateway.workdir, session_id)


def safe_name(raw: str) -> str:
    """A file name with no directory part, no path separators, no control characters, no
    bidirectional controls (which make ``invoice<U+202E>txt.exe`` read as ``invoiceexe.txt``)
    and no leading dots; ``upload`` when nothing is left."""
    base = raw.translate(_BIDI_CONTROLS).replace("\\", "/").rsplit("/", 1)[-1]
    base = unicodedata.normalize("NFC", base)
    base = _UNSAFE.sub("_", base).strip().lstrip(".").strip()
    if len(base) > MAX_NAME:
        stem, dot, ext = base.rpartition(".")
        base = (stem[: MAX_NAME - len(ext) - 1] + "." + ext) if dot and len(ext) < 20 else base[:MAX_NAME]
    return base or "upload"


def open_new(directory: Path, name: str) -> tuple[Path, IO[bytes]]:
    """Create ``name`` in ``directory`` (0600, never through a symlink), or ``name (2)``,
    ``name (3)`` ... when taken; raises :class:`NoFreeName`."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    for n in range(1, 10_000):
        candidate = name if n == 1 else (f"{stem} ({n}).{ext}" if ext else f"{stem} ({n})")
        path = directory / candidate
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        return path, os.fdopen(fd, "wb")
    raise NoFreeName("too many files with this name in the working directory")


def save_new(directory: Path, name: str, data: bytes) -> Path:
    """Write ``data`` to a new file ``name`` in ``directory`` (created 0700 if missing) as
    :func:`open_new` names it; its path. ``name`` must be safe (:func:`safe_name`)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path, out = open_new(directory, name)
    with out:
        out.write(data)
    return path
