"""``vigil usage --heartbeats``: per conversation, the heartbeat turns of the last day and
week and the tokens they used (uncached, cached, output), read from the stored history
(:mod:`vigil.schedule.heartbeat.cost`)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from vigil.cli.render import console, echo_json
from vigil.clock import SystemClock
from vigil.schedule.heartbeat.cost import DAY, WEEK, HeartbeatCost, cost_of
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.schedule.intervals import format_interval
from vigil.store import SessionStore


def heartbeat_usage(store: SessionStore, budget: int | None, as_json: bool, only: str | None = None) -> None:
    """Print the table (or JSON) for every conversation with heartbeat turns in the last week
    (``only``: the conversation of that session id)."""
    now = SystemClock().now()
    rows = _rows(store, now, only)
    if as_json:
        echo_json({"conversations": rows, "daily_token_budget": budget})
        return
    if not rows:
        console.print("No heartbeat turns in the last 7 days.", markup=False)
        return
    table = Table(box=None, pad_edge=False)
    table.add_column("conversation", no_wrap=True)
    table.add_column("heartbeat")
    table.add_column("last", no_wrap=True)
    for column in ("turns", "uncached", "cached", "output"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        for span, label in (("day", "24 h"), ("week", "7 days")):
            part = row[span]
            first = span == "day"
            table.add_row(
                row["conversation"] if first else "", escape(row["heartbeat"] or "-") if first else "", label,
                str(part["turns"]), f"{part['uncached_tokens']:,}", f"{part['cached_tokens']:,}",
                f"{part['output_tokens']:,}",
            )
    console.print(table)
    note = f"heartbeat.daily_token_budget: {budget:,} tokens per heartbeat in 24 hours" if budget else (
        "heartbeat.daily_token_budget is not set: no heartbeat is paused for its tokens"
    )
    console.print(note, style="dim", markup=False)


def _rows(store: SessionStore, now: float, only: str | None) -> list[dict[str, Any]]:
    heartbeats = {h.session_id: h for h in HeartbeatRepo(store).list()}
    rows = []
    for conversation in store.list_conversations():
        head = conversation.head
        if head.updated_at < now - WEEK:
            break  # most recently active first
        sessions = store.conversation_sessions(head.id)
        if only is not None and only not in {s.id for s in sessions}:
            continue
        day, week = HeartbeatCost(), HeartbeatCost()
        for session in sessions:
            if session.updated_at < now - WEEK:
                continue
            messages = store.get_messages(session.id)
            day, week = day + cost_of(messages, now - DAY), week + cost_of(messages, now - WEEK)
        if not week.turns:
            continue
        heartbeat = next((heartbeats[s.id] for s in sessions if s.id in heartbeats), None)
        rows.append({
            "conversation": head.id,
            "title": head.title,
            "heartbeat": None if heartbeat is None else f"every {format_interval(heartbeat.interval)}",
            "day": _cost(day),
            "week": _cost(week),
        })
    return rows


def _cost(cost: HeartbeatCost) -> dict[str, int]:
    usage = cost.usage
    return {
        "turns": cost.turns,
        "uncached_tokens": usage.input_tokens + usage.cache_write_tokens,
        "cached_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
        "tokens": cost.tokens,
    }
