"""Turning stored messages into the history a model sees.

The conversion is pure and deterministic: the same stored messages always give the same
history, so every turn's request begins with the bytes of the previous one.
"""

from __future__ import annotations

from typing import Iterable

from vigil.models.base import ChatMessage
from vigil.store.records import MessageRecord, NewMessage, ToolCall

INTERRUPTED_TOOL_RESULT = "[not run: the turn was interrupted before this tool call completed]"

CUT_OFF_MARKERS = {
    "connection": "[cut off: the connection to the model broke before this answer was complete]",
    "interrupted": "[cut off: the turn was interrupted before this answer was complete]",
}
"""Appended to a partial answer kept in the store, so that both the person reading the
session and the model on the next turn see that it is incomplete."""


def cut_off_answer(partial_text: str, why: str) -> NewMessage | None:
    """The assistant message that keeps a partial answer (``why``: a key of
    ``CUT_OFF_MARKERS``), or ``None`` when nothing worth keeping arrived."""
    if not partial_text.strip():
        return None
    return NewMessage(
        "assistant",
        f"{partial_text.rstrip()}\n\n{CUT_OFF_MARKERS[why]}",
        meta={"stop_reason": "interrupted", "cut_off": why},
    )


def unique_call_ids(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    """The calls of one model answer with distinct, non-empty ids.

    Some servers repeat an id (or send none) within one answer; each result must name exactly
    one call, so later duplicates get a deterministic suffix (``id_2``, ``id_3`` ...) that
    avoids every id the answer already uses. Unique ids are kept as they are.
    """
    calls = tuple(calls)
    taken = {call.id for call in calls if call.id}
    used: set[str] = set()
    unique: list[ToolCall] = []
    for position, call in enumerate(calls):
        base = call.id or f"call_{position}"
        candidate, number = base, 1
        while candidate in used or (candidate != call.id and candidate in taken):
            number += 1
            candidate = f"{base}_{number}"
        used.add(candidate)
        unique.append(call if candidate == call.id else call._replace(id=candidate))
    return tuple(unique)


def to_chat_message(record: MessageRecord | NewMessage) -> ChatMessage | None:
    """The model-facing form of a stored (or just appended) message; ``None`` for those the
    model never sees."""
    if record.role == "user":
        return ChatMessage("user", record.content or "")
    if record.role == "summary":
        return ChatMessage("user", record.content or "")
    if record.role == "assistant":
        return ChatMessage("assistant", record.content, tool_calls=record.tool_calls)
    if record.role == "tool":
        return ChatMessage(
            "tool", record.content or "", tool_call_id=record.tool_call_id, tool_name=record.tool_name
        )
    if record.role == "note" and record.meta.get("background"):
        # A /background task's note: posted between turns, so the model reads it and the
        # history still only grows at its end (other notes are for people alone).
        return ChatMessage("user", record.content or "")
    return None


def build_history(records: Iterable[MessageRecord]) -> list[ChatMessage]:
    """Stored messages → chat history, closing tool calls that never got a result.

    A crash or Ctrl-C between a tool call and its result would leave a call that providers
    reject; such a call gets a fixed placeholder result right after its assistant message.
    """
    history: list[ChatMessage] = []
    pending: dict[str, str] = {}
    for record in records:
        message = to_chat_message(record)
        if message is None:
            continue
        if message.role != "tool" and pending:
            history.extend(_placeholders(pending))
            pending = {}
        if message.role == "tool" and message.tool_call_id in pending:
            pending.pop(message.tool_call_id)
        elif message.role == "tool":
            continue  # a result whose call is not in the history cannot be sent
        history.append(message)
        for call in message.tool_calls:
            pending[call.id] = call.name
    if pending:
        history.extend(_placeholders(pending))
    return history


def _placeholders(pending: dict[str, str]) -> list[ChatMessage]:
    return [
        ChatMessage("tool", INTERRUPTED_TOOL_RESULT, tool_call_id=call_id, tool_name=name)
        for call_id, name in pending.items()
    ]
