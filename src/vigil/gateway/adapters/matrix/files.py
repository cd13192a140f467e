"""Files both ways: a file a person shares (``m.file``, ``m.image`` …) is downloaded from the
homeserver's media repository into the conversation's working directory (decrypted first when
it came encrypted), and ``send_file`` uploads one and posts it (encrypted in an encrypted
room). The note added to the person's message says where the file was saved, or why not."""

from __future__ import annotations

import asyncio
import io
import logging
import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.saved_files import safe_name, save_new

if TYPE_CHECKING:
    from vigil.gateway.adapters.matrix.client import Homeserver

log = logging.getLogger(__name__)


async def save(client: "Homeserver", shared: dict[str, Any], directory: Path, max_bytes: int) -> str:
    """Download ``shared`` (see :func:`.inbound.file_of`) into ``directory``; the note for
    the person's message."""
    name = safe_name(str(shared.get("name") or "file"))
    size = shared.get("size")
    if isinstance(size, int) and size > max_bytes:
        return f"[The user sent the file '{name}' ({size} bytes); it was not saved: larger than the limit of {max_bytes} bytes]"
    try:
        answer = await client.call(client.nio.download(mxc=shared["url"]))
        data = answer.body if isinstance(answer.body, bytes) else await asyncio.to_thread(Path(answer.body).read_bytes)
        if shared.get("key"):
            from nio.crypto.attachments import decrypt_attachment

            data = decrypt_attachment(data, shared["key"]["k"], shared["hashes"]["sha256"], shared["iv"])
        if len(data) > max_bytes:
            return f"[The user sent the file '{name}'; it was not saved: larger than the limit of {max_bytes} bytes]"
        path = await asyncio.to_thread(save_new, directory, name, data)
    except (DeliveryError, OSError, KeyError, ValueError) as exc:
        log.warning("matrix: cannot download %s: %s", name, exc)
        return f"[The user sent the file '{name}'; it could not be downloaded: {exc}]"
    return f"[The user sent a file, saved as {path} ({len(data)} bytes)]"


async def upload(client: "Homeserver", path: Path, name: str, *, encrypt: bool) -> dict[str, Any]:
    """Upload the file at ``path``; the content of the message posting it."""
    data = await asyncio.to_thread(path.read_bytes)
    mimetype = mimetypes.guess_type(name)[0] or "application/octet-stream"
    answer, keys = await client.call(_upload(client, data, mimetype, name, encrypt))
    msgtype = "m.image" if mimetype.startswith("image/") else "m.file"
    content: dict[str, Any] = {"msgtype": msgtype, "body": name, "filename": name,
                               "info": {"mimetype": mimetype, "size": len(data)}}
    if keys:
        content["file"] = {"url": answer.content_uri, **keys}
    else:
        content["url"] = answer.content_uri
    return content


async def _upload(client: "Homeserver", data: bytes, mimetype: str, name: str, encrypt: bool) -> Any:
    """nio's upload as one awaitable whose error response :meth:`Homeserver.call` sees."""
    answer, keys = await client.nio.upload(io.BytesIO(data), content_type=mimetype, filename=name, encrypt=encrypt,
                                           filesize=len(data))
    from nio import ErrorResponse

    if isinstance(answer, ErrorResponse):
        return answer
    return answer, keys
