"""Plain records that cross the session store boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from vigil.usage import Usage


class ToolCall(NamedTuple):
    """One tool invocation requested by the model (an immutable named tuple: histories hold
    many and are loaded on every cold turn)."""

    id: str
    name: str
    arguments: str  # the JSON text exactly as the model produced it

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ToolCall":
        id_, name, arguments = data["id"], data["name"], data.get("arguments", "")
        return _new_tuple(
            cls,
            (
                id_ if type(id_) is str else str(id_),
                name if type(name) is str else str(name),
                arguments if type(arguments) is str else str(arguments),
            ),
        )


_new_tuple = tuple.__new__


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message about to be appended to a session.

    Roles: ``user``, ``assistant`` (may carry ``tool_calls``), ``tool`` (a tool result, with
    ``tool_call_id`` and ``tool_name``), ``summary`` (a compression summary), ``note`` (shown
    to people, never sent to the model).
    """

    role: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    usage: Usage = Usage()
    meta: dict[str, Any] = field(default_factory=dict)


class MessageRecord(NamedTuple):
    """A stored message; ``seq`` is its 1-based position within its session.

    An immutable named tuple rather than a frozen dataclass: every cold turn loads a whole
    history, and a tuple is built in one step where a frozen dataclass pays one
    ``object.__setattr__`` per field (see ``rows.messages_from_rows``).
    """

    id: int
    session_id: str
    seq: int
    role: str
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    tool_call_id: str | None
    tool_name: str | None
    created_at: float
    usage: Usage
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A stored session: one conversation segment with its own pinned prompt and tools."""

    id: str
    source: str
    title: str | None
    parent_id: str | None
    end_reason: str | None
    started_at: float
    ended_at: float | None
    updated_at: float
    model: str | None
    model_config: dict[str, Any]
    system_prompt_hash: str | None
    tool_names: tuple[str, ...]
    message_count: int
    usage: Usage
    forked_from: str | None = None
    """The session this one was forked from (a ``/background`` task's conversation): it starts
    from that session's history as it was then, without copying it (``model_config["fork_seq"]``
    says how far). Not a continuation: ``parent_id`` links those."""

    @property
    def is_ended(self) -> bool:
        return self.ended_at is not None


@dataclass(frozen=True, slots=True)
class MetaEntry:
    """A ``state_meta`` row: a JSON value with the time it last changed."""

    key: str
    value: Any
    updated_at: float


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A full-text search match in a message."""

    session_id: str
    message_id: int
    role: str
    snippet: str
    created_at: float
    session_title: str | None


@dataclass(frozen=True, slots=True)
class ConversationHead:
    """A conversation as a user sees it: its root session and the newest continuation."""

    root_id: str
    head: SessionRecord
    segments: int


@dataclass(frozen=True, slots=True)
class MetaSwap:
    """One compare-and-set of a batch (see ``SessionStore.compare_and_set_many``).

    ``key`` goes from ``expected`` to ``new`` as in ``compare_and_set_meta`` (``None``: absent
    / delete); only if it does, every ``(key, value)`` of ``also`` is written too (a value of
    ``None`` deletes that key).
    """

    key: str
    expected: Any
    new: Any
    also: tuple[tuple[str, Any], ...] = ()

