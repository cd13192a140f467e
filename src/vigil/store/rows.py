"""Stored rows to records and back: the JSON encoding of columns and what to do with bad ones.

Shared by every backend: a row is anything indexable by column name (``sqlite3.Row``, a
psycopg dict row) using the column names of the schema.

Damaged data policy. A JSON column that does not decode to the expected shape is a damaged
row (a hand edit, a disk problem, a bug). Reads that feed the agent a single session or its
messages (``strict``) raise ``StoreError`` naming the session, the column and what to do,
because silently substituting an empty config or tool list would change how the
conversation behaves. List views (``lenient``) show the session with that field empty and
log a warning, so that ``vigil sessions list`` still works and the damaged session can be
found, inspected and deleted.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from vigil.store.errors import StoreError
from vigil.store.records import MessageRecord, SessionRecord, ToolCall
from vigil.usage import Usage

log = logging.getLogger(__name__)


class Row(Protocol):
    """A stored row: its columns by name."""

    def __getitem__(self, column: str, /) -> Any: ...


def canonical_json(value: Any) -> str:
    """The one JSON text of ``value``: sorted keys, no spaces, no NaN (``ValueError``)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def usage_of(row: Row) -> Usage:
    """The token counters of a session or message row."""
    return Usage(
        input_tokens=row["input_tokens"],
        cache_read_tokens=row["cache_read_tokens"],
        cache_write_tokens=row["cache_write_tokens"],
        output_tokens=row["output_tokens"],
    )


def session_from_row(row: Row, *, lenient: bool = False) -> SessionRecord:
    """A ``SessionRecord``; damaged JSON raises ``StoreError`` unless ``lenient`` (see above)."""
    where = f"session {row['id']}"
    model_config = _decode(row, "model_config", where, lenient, _as_dict, {})
    tool_names = _decode(row, "tool_names", where, lenient, _as_names, ())
    return SessionRecord(
        id=row["id"],
        source=row["source"],
        title=row["title"],
        parent_id=row["parent_id"],
        end_reason=row["end_reason"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        updated_at=row["updated_at"],
        model=row["model"],
        model_config=model_config,
        system_prompt_hash=row["system_prompt_hash"],
        tool_names=tool_names,
        message_count=row["message_count"],
        usage=usage_of(row),
    )


def message_from_row(row: Row) -> MessageRecord:
    """A ``MessageRecord``; damaged JSON raises ``StoreError``: a history must be whole."""
    where = f"session {row['session_id']} message {row['seq']}"
    return MessageRecord(
        id=row["id"],
        session_id=row["session_id"],
        seq=row["seq"],
        role=row["role"],
        content=row["content"],
        tool_calls=_decode(row, "tool_calls", where, False, _as_tool_calls, ()),
        tool_call_id=row["tool_call_id"],
        tool_name=row["tool_name"],
        created_at=row["created_at"],
        usage=usage_of(row),
        meta=_decode(row, "meta", where, False, _as_dict, {}),
    )


def meta_value(raw: str, key: str) -> Any:
    """The decoded value of a ``state_meta`` row."""
    try:
        return json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"state_meta key '{key}' holds damaged JSON ({exc}); delete or overwrite the key"
        ) from exc


def _decode(row: Row, column: str, where: str, lenient: bool, shape: Any, empty: Any) -> Any:
    try:
        return shape(json.loads(row[column]))
    except (TypeError, ValueError, KeyError) as exc:
        problem = f"{where}: column {column} holds damaged data ({exc.__class__.__name__}: {exc})"
        if lenient:
            log.warning("%s; showing it as empty", problem)
            return empty
        raise StoreError(f"{problem}; repair or delete this session") from exc


def _as_dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, found {type(value).__name__}")
    return value


def _as_names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("expected a JSON list of strings")
    return tuple(value)


def _as_tool_calls(value: Any) -> tuple[ToolCall, ...]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise TypeError("expected a JSON list of objects")
    return tuple(ToolCall.from_dict(v) for v in value)
