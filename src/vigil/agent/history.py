"""Turning stored messages into the history a model sees.

The conversion is pure and deterministic: the same stored messages always give the same
history, so every turn's request begins with the bytes of the previous one.
"""

from __future__ import annotations

from typing import Iterable

from vigil.models.base import ChatMessage
from vigil.store.records import MessageRecord, NewMessage

INTERRUPTED_TOOL_RESULT = "[not run: the turn was interrupted before this tool call completed]"


def to_chat_message(record: MessageRecord | NewMessage) -> ChatMessage | None:
    """The model-facing form of a stored (or just appended) message; ``None`` for roles the
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
