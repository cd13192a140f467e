"""Exporting a session's transcript as JSON Lines or Markdown."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from datetime import datetime, timezone
from typing import Any, Iterator

from vigil.store import MessageRecord, SessionRecord, SessionStore


def session_to_dict(session: SessionRecord) -> dict[str, Any]:
    """A session's metadata as plain JSON-able data."""
    return {
        "id": session.id,
        "source": session.source,
        "title": session.title,
        "parent_id": session.parent_id,
        "forked_from": session.forked_from,
        "end_reason": session.end_reason,
        "started_at": _iso(session.started_at),
        "ended_at": _iso(session.ended_at),
        "updated_at": _iso(session.updated_at),
        "model": session.model,
        "model_config": session.model_config,
        "system_prompt_hash": session.system_prompt_hash,
        "tool_names": list(session.tool_names),
        "message_count": session.message_count,
        "usage": session.usage.as_dict(),
    }


def message_to_dict(message: MessageRecord) -> dict[str, Any]:
    """A message as plain JSON-able data."""
    data: dict[str, Any] = {
        "seq": message.seq,
        "role": message.role,
        "content": message.content,
        "created_at": _iso(message.created_at),
    }
    if message.tool_calls:
        data["tool_calls"] = [call.as_dict() for call in message.tool_calls]
    if message.tool_call_id:
        data["tool_call_id"] = message.tool_call_id
        data["tool_name"] = message.tool_name
    if any(message.usage.as_dict().values()):
        data["usage"] = message.usage.as_dict()
    return data


def export_jsonl(store: SessionStore, session_ids: list[str]) -> Iterator[str]:
    """One line per session header and per message, in order."""
    for session_id in session_ids:
        session = store.get_session(session_id)
        yield json.dumps({"type": "session", **session_to_dict(session)}, ensure_ascii=False)
        for message in store.get_messages(session_id):
            yield json.dumps(
                {"type": "message", "session_id": session_id, **message_to_dict(message)},
                ensure_ascii=False,
            )


def export_markdown(store: SessionStore, session_ids: list[str]) -> Iterator[str]:
    """A readable transcript: a heading per session, a section per message."""
    for session_id in session_ids:
        session = store.get_session(session_id)
        yield f"# {session.title or 'Session ' + session.id}\n"
        yield f"- id: `{session.id}`"
        yield f"- started: {_iso(session.started_at)}"
        if session.parent_id:
            yield f"- continues: `{session.parent_id}`"
        if session.end_reason:
            yield f"- ended: {_iso(session.ended_at)} ({session.end_reason})"
        yield ""
        for message in store.get_messages(session_id):
            yield from _markdown_message(message)


def _markdown_message(message: MessageRecord) -> Iterator[str]:
    heading = {"user": "User", "assistant": "Assistant", "tool": "Tool result", "summary": "Summary"}
    title = heading.get(message.role, message.role.title())
    if message.role == "tool" and message.tool_name:
        title += f" ({message.tool_name})"
    yield f"## {title}\n"
    if message.content:
        yield message.content + "\n"
    for call in message.tool_calls:
        yield f"Tool call `{call.name}`:\n\n```json\n{call.arguments}\n```\n"


def write_private(path: "os.PathLike[str] | str", text: str) -> None:
    """Write an export readable only by its owner (mode 0600): transcripts are private.

    The text goes to a private temporary file next to the target, which then replaces it in
    one step: an existing file never keeps its old, wider mode, and a failed write leaves it
    as it was. A symlink is followed (the file it names is replaced); an existing target that
    is not a regular file (a directory, a FIFO, a device) is refused with ``OSError``.
    """
    target = os.path.realpath(os.fspath(path))
    if os.path.lexists(target) and not stat.S_ISREG(os.stat(target).st_mode):
        raise OSError(errno.EINVAL, "it exists and is not a regular file", target)
    directory = os.path.dirname(target)
    fd, temporary = tempfile.mkstemp(prefix=".vigil-export-", suffix=".tmp", dir=directory or ".")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")
