"""Files attached to a received mail: saved into the conversation's working directory (each
at most ``gateway.upload_max_bytes``) and named in the message, so the agent can read them.

Only an allowed sender's files are saved (anyone else makes the gateway write nothing). A file
that cannot be saved is named with the reason, so the agent can tell the person.

The other way, the file a ``send_file`` outbox entry names is read to go out attached to a mail
(:func:`outgoing`); one that is gone fails the entry for good.
"""

from __future__ import annotations

import asyncio
import logging
from email.message import EmailMessage
from pathlib import Path

from vigil.gateway.adapters.base import DeliveryError, GatewayPort
from vigil.gateway.adapters.saved_files import conversation_directory, safe_name, save_new
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

log = logging.getLogger(__name__)

MAX_FILES = 20
"""Attachments of one mail that are saved (the rest are named as not saved)."""


def files_of(mail: EmailMessage) -> list[tuple[str, bytes]]:
    """``(name, content)`` of each attachment (inline images with a file name included)."""
    found: list[tuple[str, bytes]] = []
    for index, part in enumerate(mail.iter_attachments(), 1):
        try:
            content = part.get_payload(decode=True)
        except Exception:
            content = None
        if isinstance(content, bytes):
            found.append((part.get_filename() or f"attachment-{index}", content))
    return found


async def save_files(gateway: GatewayPort, route: RouteKey, files: list[tuple[str, bytes]]) -> str:
    """Save ``files`` for the conversation of ``route`` (opened if new); the notes to add to the
    message, one line each."""
    directory = await conversation_directory(gateway, route)
    limit = gateway.settings.gateway.upload_max_bytes
    notes: list[str] = []
    for index, (raw_name, content) in enumerate(files):
        name = safe_name(raw_name)
        if index >= MAX_FILES:
            notes.append(f"[The user attached the file '{name}'; it was not saved: more than {MAX_FILES} files]")
        elif len(content) > limit:
            notes.append(f"[The user attached the file '{name}' ({len(content)} bytes); it was not saved: "
                         f"larger than the limit of {limit} bytes]")
        else:
            try:
                path = await asyncio.to_thread(save_new, directory, name, content)
            except OSError as exc:
                log.warning("email: cannot save %s: %s", name, exc)
                notes.append(f"[The user attached the file '{name}'; it could not be saved: {exc}]")
                continue
            notes.append(f"[The user attached a file, saved as {path} ({len(content)} bytes)]")
    return "\n".join(notes)


def outgoing(entry: OutboxEntry) -> tuple[str, bytes]:
    """The name and content of the file an outbox entry of kind ``file`` sends (blocking: read
    in a thread); :class:`DeliveryError`, not to be retried, when it is not there any more."""
    raw = entry.meta.get("path")
    path = Path(raw) if isinstance(raw, str) and raw else None
    if path is None or not path.is_absolute() or not path.is_file():
        raise DeliveryError(f"the file {raw} is not there any more", retryable=False)
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise DeliveryError(f"the file {path.name} cannot be read: {exc}", retryable=False) from None
    return safe_name(str(entry.meta.get("name") or path.name)), content
