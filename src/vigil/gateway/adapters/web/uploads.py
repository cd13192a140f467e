"""File uploads into a conversation's working directory, streamed to disk under a size cap.

The request body (``multipart/form-data`` with one ``file`` field) is parsed as it arrives, so
a large upload never sits in memory; past the cap the partial file is removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, AsyncIterator

from python_multipart.multipart import MultipartParser, parse_options_header

from vigil.gateway.adapters.saved_files import NoFreeName, open_new, safe_name

FIELD = "file"

class UploadError(Exception):
    """A refused upload: ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class SavedFile:
    name: str
    path: Path
    size: int


def _open_new(directory: Path, name: str) -> tuple[Path, IO[bytes]]:
    try:
        return open_new(directory, name)
    except NoFreeName as exc:
        raise UploadError(str(exc), 409) from None


class _FileReceiver:
    """The callbacks of the streaming parser: the first ``file`` part goes to disk."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.path: Path | None = None
        self.size = 0
        self.done = False
        self._out: IO[bytes] | None = None
        self._headers: dict[bytes, bytes] = {}
        self._field = b""
        self._value = b""

    def on_part_begin(self) -> None:
        self._headers = {}

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def on_header_end(self) -> None:
        self._headers[self._field.lower()] = self._value
        self._field = self._value = b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        if options.get(b"name") != FIELD.encode() or b"filename" not in options or self.path is not None:
            return
        raw = options[b"filename"].decode("utf-8", "replace")
        self.path, self._out = _open_new(self.directory, safe_name(raw))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._out is None:
            return
        self.size += end - start
        if self.size > self.max_bytes:
            raise UploadError(f"the file is larger than the limit of {self.max_bytes} bytes", 413)
        self._out.write(data[start:end])

    def on_part_end(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
            self.done = True

    def abort(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)


async def save_upload(
    content_type: str, body: AsyncIterator[bytes], directory: Path, *, max_bytes: int
) -> SavedFile:
    """Stream the ``file`` field of a multipart body into ``directory``. Raises
    :class:`UploadError` (nothing left on disk) for a bad body, no file, or one over ``max_bytes``."""
    kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise UploadError("send the file as multipart/form-data with a 'file' field")
    receiver = _FileReceiver(directory, max_bytes)
    callbacks = {name: getattr(receiver, name) for name in (
        "on_part_begin", "on_part_data", "on_part_end", "on_header_field", "on_header_value",
        "on_header_end", "on_headers_finished",
    )}
    parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
    try:
        async for chunk in body:
            parser.write(chunk)
        parser.finalize()
        if not receiver.done or receiver.path is None:
            raise UploadError("the request has no complete 'file' field")
    except UploadError:
        receiver.abort()
        raise
    except Exception as exc:  # the parser's own errors: a malformed body
        receiver.abort()
        raise UploadError(f"malformed multipart body: {exc}") from None
    except BaseException:  # the client went away mid-upload
        receiver.abort()
        raise
    return SavedFile(receiver.path.name, receiver.path, receiver.size)
