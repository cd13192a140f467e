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
from typing import Any, Iterable, Protocol, Sequence

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


SESSION_COLUMNS = (
    "id, source, title, parent_id, end_reason, started_at, ended_at, updated_at, model, "
    "model_config, system_prompt_hash, tool_names, message_count, "
    "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, forked_from"
)
"""The columns of the ``sessions`` table that :func:`session_from_row` reads, in both backends."""


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
        forked_from=row["forked_from"],
    )


MESSAGE_COLUMNS = (
    "id, session_id, seq, role, content, tool_calls, tool_call_id, tool_name, created_at, "
    "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, meta"
)
"""The columns of the PostgreSQL messages table (a column per field), in the order of
:class:`MessageRecord`. SQLite packs the rarely used ones into one (see
:data:`PACKED_MESSAGE_COLUMNS`)."""
MESSAGE_SELECT = (
    "id, seq, role, content, NULLIF(tool_calls, '[]'), tool_call_id, tool_name, created_at, "
    "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, NULLIF(meta, '{}')"
)
"""What :func:`messages_from_rows` reads of one session's messages, followed by one column of
the backend's own: :data:`MESSAGE_COLUMNS` without the session (the caller knows it) and
with the empty JSON values most rows hold turned into NULL by the database, which costs
nothing to hand over."""

NO_USAGE = Usage()
_new_record = tuple.__new__

PACKED_MESSAGE_COLUMNS = "id, session_id, seq, role, content, created_at, extra"
"""The columns of the SQLite messages table. ``extra`` is NULL for a message of nothing but
text, else the JSON array ``[tool_calls, tool_call_id, tool_name, usage, meta]``, each
``null`` where the message has none: ``tool_calls`` a list of ``[id, name, arguments]``,
``usage`` the four counters ``[input, cache_read, cache_write, output]``, ``meta`` an object.

Why: every history load reads every row of a session, and each column read costs about as
much in Python as a small decode; a fixed array unpacks in one step where an object costs a
look-up per field."""
PACKED_MESSAGE_SELECT = "id, seq, role, content, created_at, extra"
"""What :func:`messages_from_packed_rows` reads of one session's messages."""


def packed_extra(
    tool_calls: tuple[ToolCall, ...] | Any,
    tool_call_id: str | None,
    tool_name: str | None,
    counts: Sequence[Any],
    meta: dict[str, Any] | Any,
) -> str | None:
    """The ``extra`` column of a message (see :data:`PACKED_MESSAGE_COLUMNS`): ``None`` when
    it has nothing but text. ``counts`` are the four usage counters in the order of the list.

    A migration hands over what old columns held, decoded where they decode: values of the
    wrong shape (a damaged row) are kept as they are, so that loading the history reports
    them as before instead of dropping them.
    """
    # What SQLite's typed columns used to coerce (an int id, a bool count) is coerced here,
    # so that it reads back as before instead of as damage.
    if type(tool_calls) is tuple:
        calls: Any = [[str(part) for part in call] for call in tool_calls] or None
    else:
        calls = None if tool_calls == [] else tool_calls
    usage = [int(n) if type(n) is bool else n for n in counts] if any(counts) else None
    extra = [
        calls,
        None if tool_call_id is None else str(tool_call_id),
        None if tool_name is None else str(tool_name),
        usage,
        None if meta == {} else meta,
    ]
    return None if extra == _NOTHING else canonical_json(extra)


_NOTHING = [None] * 5


def messages_from_packed_rows(session_id: str, rows: Iterable[Sequence[Any]]) -> list[MessageRecord]:
    """``MessageRecord`` s of one session from plain row tuples selected as
    :data:`PACKED_MESSAGE_SELECT`.

    A damaged ``extra`` raises ``StoreError`` naming the session and the message: a history
    must be whole. This is the hot path of every cold turn: a row without ``extra`` costs one
    tuple and an empty dict; every ``extra`` is decoded and checked whole, inline (a Python
    call per row would cost as much as the decoding).
    """
    out: list[MessageRecord] = []
    append = out.append
    for id_, seq, role, content, created_at, extra in rows:
        if extra is None:
            append(
                _new_record(
                    MessageRecord,
                    (id_, session_id, seq, role, content, (), None, None, created_at, NO_USAGE, {}),
                )
            )
            continue
        try:
            try:
                value, end = _scan_once(extra, 0)
            except StopIteration:
                end = -1
            if end != len(extra):
                value = json.loads(extra)  # raises the decoder's own description of the damage
            if type(value) is not list or len(value) != 5:
                raise TypeError("expected a JSON list of five fields")
            calls, call_id, tool_name, counts, meta = value
            if calls is not None:
                calls = _checked_calls(calls)
            else:
                calls = ()
            if counts is None:
                usage = NO_USAGE
            elif type(counts) is list and len(counts) == 4:
                i, r, w, o = counts
                if not (type(i) is int and type(r) is int and type(w) is int and type(o) is int):
                    raise TypeError("usage: expected a JSON list of four integers")
                usage = _new_object(Usage)
                _set_i(usage, i)
                _set_r(usage, r)
                _set_w(usage, w)
                _set_o(usage, o)
            else:
                raise TypeError("usage: expected a JSON list of four integers")
            if meta is None:
                meta = {}
            elif type(meta) is not dict:
                raise TypeError("meta: expected a JSON object")
            if not (call_id is None or type(call_id) is str) or not (tool_name is None or type(tool_name) is str):
                raise TypeError("tool_call_id and tool_name must be strings")
        except (TypeError, ValueError) as exc:
            raise _damaged(session_id, seq, "extra", exc) from exc
        append(
            _new_record(
                MessageRecord,
                (id_, session_id, seq, role, content, calls, call_id, tool_name, created_at, usage, meta),
            )
        )
    return out


def _checked_calls(value: Any) -> tuple[ToolCall, ...]:
    if type(value) is list:
        calls = []
        for item in value:
            if type(item) is not list or len(item) != 3:
                break
            id_, name, arguments = item
            if type(id_) is not str or type(name) is not str or type(arguments) is not str:
                break
            calls.append(_new_record(ToolCall, item))
        else:
            return tuple(calls)
    raise TypeError("tool_calls: expected a JSON list of [id, name, arguments] strings")


def messages_from_rows(session_id: str, rows: Iterable[Sequence[Any]]) -> list[MessageRecord]:
    """``MessageRecord`` s of one session from plain row tuples selected as
    :data:`MESSAGE_SELECT` plus one more column, which is ignored (PostgreSQL uses it to
    flag rows with escaped text).

    Damaged JSON raises ``StoreError`` naming the session, the message and the column: a
    history must be whole. This is the hot path of every cold turn, so the columns most rows
    leave empty (no tool calls, no meta, no token counts) cost no decoding and no objects
    beyond an empty dict; every other value is decoded and checked.
    """
    out: list[MessageRecord] = []
    append = out.append
    for row in rows:
        id_, seq, role, content, calls, call_id, tool_name, created_at, i, r, w, o, meta, _ = row
        append(
            _new_record(
                MessageRecord,
                (
                    id_,
                    session_id,
                    seq,
                    role,
                    content,
                    () if calls is None else _tool_calls_of(calls, session_id, seq),
                    call_id,
                    tool_name,
                    created_at,
                    NO_USAGE if not (i or r or w or o) else _usage(i, r, w, o),
                    {} if meta is None else _meta_of(meta, session_id, seq),
                ),
            )
        )
    return out


def _tool_calls_of(raw: Any, session_id: str, seq: int) -> tuple[ToolCall, ...]:
    try:
        value = _loads(raw)
        if type(value) is not list:
            raise TypeError("expected a JSON list of objects")
        calls = []
        for item in value:
            if type(item) is not dict:
                raise TypeError("expected a JSON list of objects")
            calls.append(_tool_call(item))
        return tuple(calls)
    except (TypeError, ValueError, KeyError) as exc:
        raise _damaged(session_id, seq, "tool_calls", exc) from exc


def _meta_of(raw: Any, session_id: str, seq: int) -> dict[str, Any]:
    try:
        return _as_dict(_loads(raw))
    except (TypeError, ValueError) as exc:
        raise _damaged(session_id, seq, "meta", exc) from exc


def _damaged(session_id: str, seq: int, column: str, exc: Exception) -> StoreError:
    return StoreError(
        f"session {session_id} message {seq}: column {column} holds damaged data "
        f"({exc.__class__.__name__}: {exc}); repair or delete this session"
    )


_new_object = object.__new__
_set_counts = (
    Usage.input_tokens.__set__,  # type: ignore[attr-defined]
    Usage.cache_read_tokens.__set__,  # type: ignore[attr-defined]
    Usage.cache_write_tokens.__set__,  # type: ignore[attr-defined]
    Usage.output_tokens.__set__,  # type: ignore[attr-defined]
)


_set_i, _set_r, _set_w, _set_o = _set_counts


def _usage(i: int, r: int, w: int, o: int) -> Usage:
    """``Usage(i, r, w, o)`` at half the price: a frozen dataclass's ``__init__`` goes through
    ``object.__setattr__`` per field, the slots can be filled directly (nothing else happens
    in its ``__init__``)."""
    usage: Usage = _new_object(Usage)
    set_i, set_r, set_w, set_o = _set_counts
    set_i(usage, i)
    set_r(usage, r)
    set_w(usage, w)
    set_o(usage, o)
    return usage


_scan_once = json.JSONDecoder().scan_once


def _loads(text: Any) -> Any:
    """``json.loads(text)``, without its Python-level wrappers for the compact JSON the store
    writes itself; anything else (whitespace around it, damage) takes the general path,
    which gives the same value or raises the same error."""
    if type(text) is str:
        try:
            value, end = _scan_once(text, 0)
        except StopIteration:
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text)


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


_tool_call = ToolCall.from_dict
