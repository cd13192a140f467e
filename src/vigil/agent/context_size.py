"""How many tokens the next request of a conversation will weigh, before sending it.

The best number is the provider's own: the prompt and output tokens reported for the last model
response, which cover everything up to and including that response. Only what was added since
is estimated. Without such a report (a fresh or continuation session, or a provider that does
not report usage) the whole request is estimated. The estimate is deterministic: a quarter of
the character count, rounded up, per message, plus a small per-message overhead.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from vigil.agent.history import to_chat_message
from vigil.models.base import ChatMessage, ToolSpec
from vigil.store.records import MessageRecord
from vigil.usage import Usage

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
"""Tokens a provider spends on a message's role and framing, whatever its content."""


def estimate_text(text: str | None) -> int:
    """Estimated tokens of ``text``."""
    return math.ceil(len(text or "") / CHARS_PER_TOKEN)


def estimate_message(message: ChatMessage) -> int:
    """Estimated tokens of one history entry: content, tool call names and arguments."""
    calls = sum(estimate_text(call.name) + estimate_text(call.arguments) for call in message.tool_calls)
    return MESSAGE_OVERHEAD + estimate_text(message.content) + calls


def estimate_tools(specs: Sequence[ToolSpec]) -> int:
    """Estimated tokens of the tool definitions sent with every request."""
    return sum(
        estimate_text(spec.name)
        + estimate_text(spec.description)
        + estimate_text(json.dumps(spec.parameters, sort_keys=True))
        for spec in specs
    )


@dataclass
class SizeTracker:
    """Follows a session's history as it grows and estimates the size of its next request."""

    measured: int | None = None
    """Prompt + output tokens reported for the last model response, if any was reported."""
    since: list[ChatMessage] = field(default_factory=list)
    """History entries added after that response."""

    def add(self, message: ChatMessage, usage: Usage | None = None) -> None:
        """Account one appended history entry (with the usage of its response, if any)."""
        if message.role == "assistant" and usage is not None and usage.prompt_tokens > 0:
            self.measured = usage.prompt_tokens + usage.output_tokens
            self.since = []
        else:
            self.since.append(message)

    @classmethod
    def from_records(cls, records: Iterable[MessageRecord]) -> "SizeTracker":
        """The tracker for a history read back from the store."""
        tracker = cls()
        for record in records:
            message = to_chat_message(record)
            if message is not None:
                tracker.add(message, record.usage)
        return tracker

    def estimate(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        history: Sequence[ChatMessage],
        adding: Sequence[ChatMessage] = (),
    ) -> int:
        """Tokens of a request made of ``system``, ``tools``, ``history`` and then ``adding``."""
        if self.measured is None:
            base = estimate_text(system) + estimate_tools(tools)
            base += sum(estimate_message(m) for m in history)
        else:
            base = self.measured + sum(estimate_message(m) for m in self.since)
        return base + sum(estimate_message(m) for m in adding)
