"""What heartbeat turns cost, read from the stored history.

A heartbeat turn is the injected heartbeat message (a user message with the heartbeat
header) and every message after it up to the next user message; its tokens are the usage
stored on its assistant messages. Nothing extra is recorded: the history is the account, so
``vigil usage --heartbeats`` and ``heartbeat.daily_token_budget`` agree with ``vigil usage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from vigil.schedule.heartbeat.text import is_heartbeat_message
from vigil.store import MessageRecord, SessionStore
from vigil.usage import Usage

DAY = 86_400.0
WEEK = 7 * DAY


@dataclass(frozen=True, slots=True)
class HeartbeatCost:
    """Heartbeat turns begun since some time, and the tokens their model calls used."""

    turns: int = 0
    usage: Usage = Usage()

    @property
    def tokens(self) -> int:
        """Every token of those calls: uncached and cached input, cache writes, output (what
        ``heartbeat.daily_token_budget`` counts)."""
        return self.usage.prompt_tokens + self.usage.output_tokens

    def __add__(self, other: "HeartbeatCost") -> "HeartbeatCost":
        return HeartbeatCost(self.turns + other.turns, self.usage + other.usage)


def cost_of(messages: Iterable[MessageRecord], since: float) -> HeartbeatCost:
    """The heartbeat turns among ``messages`` (one session, in order) begun at or after
    ``since``, and their tokens."""
    turns, usage = 0, Usage()
    counting = False
    for message in messages:
        if message.role == "user":
            counting = is_heartbeat_message(message.content) and message.created_at >= since
            turns += counting
        elif counting and message.role == "assistant":
            usage = usage + message.usage
    return HeartbeatCost(turns, usage)


def conversation_cost(store: SessionStore, session_id: str, since: float) -> HeartbeatCost:
    """The heartbeat cost since ``since`` of the conversation ``session_id`` belongs to (its
    compression ancestors and continuations included)."""
    total = HeartbeatCost()
    for session in store.conversation_sessions(session_id):
        if session.updated_at >= since:
            total = total + cost_of(store.get_messages(session.id), since)
    return total
