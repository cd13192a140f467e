"""Collapsing parent chains of sessions into conversations, the way a person thinks of them.

Compression ends a session and continues the conversation in a child session, so one
conversation is a chain root -> child -> ... -> head. Backend-neutral: works on rows (anything
indexable by ``id``, ``parent_id``, ``forked_from``, ``end_reason`` and ``updated_at``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from vigil.store.rows import Row

COMPRESSION = "compression"
"""The end reason that makes a session's child its continuation. A child of a session that
did not end this way (a compression that crashed half way) is a conversation of its own."""


@dataclass(frozen=True, slots=True)
class Chain:
    """One conversation: its root session id, its newest session's row, and its length."""

    root_id: str
    head: Row
    segments: int


def collapse(rows_oldest_first: Sequence[Row]) -> list[Chain]:
    """Every conversation once, most recently active first.

    ``rows_oldest_first`` must be every session, ordered by start (the order that decides which
    of several continuations is the newest: the last one). The head is reached from the root
    by following, at each step, the newest child. A conversation's activity is the latest
    ``updated_at`` along its chain; ties go to the chain whose head started last.
    """
    position = {row["id"]: i for i, row in enumerate(rows_oldest_first)}
    compressed = {row["id"] for row in rows_oldest_first if row["end_reason"] == COMPRESSION}
    newest_child: dict[str, Row] = {}
    for row in rows_oldest_first:  # a later child overwrites an earlier one
        if row["parent_id"] in compressed:
            newest_child[row["parent_id"]] = row
    ranked = []
    for root in rows_oldest_first:
        if root["parent_id"] in compressed:
            continue  # a continuation, not a root (an unknown or live parent makes a root)
        if root["forked_from"] in position:
            continue  # a side session of a conversation, not one of its own
        head, segments, active = root, 1, root["updated_at"]
        seen = {root["id"]}
        while (child := newest_child.get(head["id"])) is not None and child["id"] not in seen:
            seen.add(child["id"])
            head, segments = child, segments + 1
            active = max(active, head["updated_at"])
        ranked.append(((active, position[head["id"]]), Chain(root["id"], head, segments)))
    ranked.sort(key=lambda item: item[0], reverse=True)
    return [chain for _, chain in ranked]
