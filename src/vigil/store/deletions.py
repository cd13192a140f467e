"""What deleted sessions took with them, kept as one small counter in ``state_meta``.

Deleting a session removes its messages and their token counts, so totals computed from the
sessions that remain (``vigil usage``) would silently shrink. Every backend adds each deletion
to the entry under :data:`DELETED_KEY` in the deleting transaction, so a reader can say how
much its totals leave out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vigil.usage import Usage

DELETED_KEY = "store:deleted_sessions"
"""The ``state_meta`` key of the running :class:`Deleted` totals."""


@dataclass(frozen=True, slots=True)
class Deleted:
    """Sessions deleted so far (or by one call), their messages and the tokens they had used."""

    sessions: int = 0
    messages: int = 0
    usage: Usage = field(default_factory=Usage)

    def __add__(self, other: "Deleted") -> "Deleted":
        return Deleted(self.sessions + other.sessions, self.messages + other.messages, self.usage + other.usage)

    def to_json(self) -> dict[str, int]:
        return {"sessions": self.sessions, "messages": self.messages, **self.usage.as_dict()}

    @classmethod
    def from_json(cls, value: Any) -> "Deleted":
        """The totals stored as ``value``; anything unreadable counts as nothing deleted."""
        if not isinstance(value, dict):
            return cls()

        def count(name: str) -> int:
            number = value.get(name)
            return number if isinstance(number, int) and not isinstance(number, bool) and number >= 0 else 0

        usage = Usage(
            count("input_tokens"), count("cache_read_tokens"), count("cache_write_tokens"), count("output_tokens")
        )
        return cls(count("sessions"), count("messages"), usage)


def deleted_of_row(row: Any) -> Deleted:
    """The :class:`Deleted` totals of an aggregate row with the columns ``sessions``,
    ``messages`` and the four token counters (as summed over the deleted sessions)."""
    return Deleted(
        int(row["sessions"] or 0),
        int(row["messages"] or 0),
        Usage(
            int(row["input_tokens"] or 0),
            int(row["cache_read_tokens"] or 0),
            int(row["cache_write_tokens"] or 0),
            int(row["output_tokens"] or 0),
        ),
    )


TOTALS_OF_SESSIONS = (
    "COUNT(*) AS sessions, SUM(message_count) AS messages, SUM(input_tokens) AS input_tokens,"
    " SUM(cache_read_tokens) AS cache_read_tokens, SUM(cache_write_tokens) AS cache_write_tokens,"
    " SUM(output_tokens) AS output_tokens"
)
"""The select list that sums sessions rows into the columns :func:`deleted_of_row` reads."""
