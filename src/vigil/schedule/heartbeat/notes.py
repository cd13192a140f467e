"""Notes a heartbeat leaves in its conversation when vigil ends or pauses it by itself.

A note is a stored message of role ``note``: the history shows it (the web chat, ``vigil
sessions show``, the REPL's recap) but the model never sees it, so the prompt prefix stays
byte-identical. Each process that ends or pauses a heartbeat writes one note and hands the
same text to its front end (:attr:`HeartbeatScheduler.on_note`).
"""

from __future__ import annotations

from vigil.schedule.heartbeat.cost import HeartbeatCost
from vigil.schedule.heartbeat.record import Heartbeat
from vigil.schedule.intervals import format_interval
from vigil.store import NewMessage, SessionStore

NOTE = "note"
ENDED = "ended"
OVER_BUDGET = "over_budget"


def ended_text(heartbeat: Heartbeat) -> str:
    """The note of a heartbeat whose ``--for``/``--until`` came."""
    return (
        f"♥ Heartbeat ended (every {format_interval(heartbeat.interval)}, fired "
        f"{_times(heartbeat.fire_count)}): it was set to run until then, so it is cleared. "
        f"Prompt: {_short(heartbeat.prompt)}"
    )


def over_budget_text(heartbeat: Heartbeat, cost: HeartbeatCost, budget: int) -> str:
    """The note of a heartbeat paused for going over ``heartbeat.daily_token_budget``."""
    return (
        f"♥ Heartbeat paused (every {format_interval(heartbeat.interval)}): its turns used "
        f"{cost.tokens:,} tokens in the last 24 hours ({cost.turns} turns), over the daily budget "
        f"of {budget:,} (heartbeat.daily_token_budget). /heartbeat resume starts it again; it "
        "pauses again at its next fire while the last 24 hours stay over the budget."
    )


def write_note(store: SessionStore, session_id: str, text: str, kind: str, now: float) -> None:
    """Append the note to the conversation (role ``note``; the model never sees it)."""
    store.append_message(session_id, NewMessage(NOTE, text, meta={"heartbeat": kind}), created_at=now)


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _short(text: str, width: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
