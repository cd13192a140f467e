"""What became of every message the gateway accepted, read from its store itself (the SQLite
file, or the PostgreSQL schema the gateways share), per adapter: answered (the inbox says so),
lost (no final answer in the conversation), duplicated answers (more than one) and duplicated
replies (more than one reply in the outbox), and replies still waiting in the outbox."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

KEYS = ("accepted", "answered", "lost", "duplicated answers", "duplicated replies", "undelivered")

Rows = tuple[list[tuple[int, str, str]], Iterable[tuple[int, str]], Iterable[tuple[str, bool, dict[str, Any]]]]
"""Inbox (id, adapter, status); reply outbox entries (inbox id, status); messages in conversation
order (role, has tool calls, meta)."""


def audit(db: Path) -> dict[str, dict[str, int]]:
    """Counts by adapter name (see the module docstring); ``{}`` before the store exists."""
    if not db.exists():
        return {}
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        inbox = connection.execute("SELECT id, adapter, status FROM gateway_inbox").fetchall()
        replies = connection.execute(
            "SELECT inbox_id, status FROM gateway_outbox WHERE inbox_id IS NOT NULL AND kind = 'reply'").fetchall()
        messages = []
        # extra: [tool_calls, tool_call_id, tool_name, usage, meta] or NULL (see store.rows).
        for role, extra in connection.execute("SELECT role, extra FROM messages ORDER BY session_id, seq"):
            calls, _, _, _, meta = json.loads(extra) if extra else (None,) * 5
            messages.append((role, bool(calls), meta or {}))
    except sqlite3.OperationalError:  # the gateway has not made its tables yet
        return {}
    finally:
        connection.close()
    return count((inbox, replies, messages))


def audit_postgres(url: str) -> dict[str, dict[str, int]]:
    """The same counts from the PostgreSQL schema ``url`` names (``?schema=``); ``{}`` before
    the gateways made their tables."""
    import psycopg

    from vigil.store.postgres.conn import parse_target

    target = parse_target(url)
    s = f'"{target.schema}"'
    with psycopg.connect(target.conninfo, autocommit=True) as connection:
        try:
            with connection.transaction():  # one snapshot for the three reads
                connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                inbox = connection.execute(f"SELECT id, adapter, status FROM {s}.gateway_inbox").fetchall()
                replies = connection.execute(
                    f"SELECT inbox_id, status FROM {s}.gateway_outbox "
                    "WHERE inbox_id IS NOT NULL AND kind = 'reply'").fetchall()
                rows = connection.execute(
                    f"SELECT role, tool_calls, meta FROM {s}.messages ORDER BY session_id, seq").fetchall()
        except psycopg.errors.UndefinedTable:
            return {}
    messages = [(role, bool(json.loads(calls or "[]")), json.loads(meta or "{}")) for role, calls, meta in rows]
    return count((inbox, replies, messages))


def count(rows: Rows) -> dict[str, dict[str, int]]:
    """The counts by adapter from the rows of either store (see ``Rows``)."""
    inbox, reply_rows, messages = rows
    replies: Counter[int] = Counter()
    undelivered: Counter[int] = Counter()
    for inbox_id, status in reply_rows:
        replies[inbox_id] += 1
        if status == "pending":
            undelivered[inbox_id] += 1
    answers: Counter[int] = Counter()
    current: int | None = None
    for role, calls, data in messages:
        if role == "user":
            current = data.get("inbox")
        elif role == "assistant" and current is not None and not calls and not data.get("cut_off"):
            answers[current] += 1
            current = None
    counts: dict[str, dict[str, int]] = {}
    for entry, adapter, status in inbox:
        row = counts.setdefault(adapter, dict.fromkeys(KEYS, 0))
        row["accepted"] += 1
        row["answered"] += status == "answered"
        row["lost"] += answers[entry] == 0
        row["duplicated answers"] += answers[entry] > 1
        row["duplicated replies"] += replies[entry] > 1
        row["undelivered"] += undelivered[entry] > 0
    return counts


def total(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    return {key: sum(row[key] for row in counts.values()) for key in KEYS}


def finished(counts: dict[str, dict[str, int]]) -> bool:
    """Every accepted message answered, none lost."""
    both = total(counts)
    return both["answered"] >= both["accepted"] and both["lost"] == 0
