"""The gateway tables' rows and records, shared by both backends: the columns, the checks of
what goes in, and the records of what comes out.

Damaged data policy (as for messages, see ``rows.py``). A row whose ``meta`` is not a JSON
object or whose ``status`` is not one vigil writes cannot be acted on safely: sending or
answering it would guess. Reading it raises :class:`DamagedRow` naming the table, the row's
id and the column, so the operator can repair or delete that row; nothing is substituted.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

from vigil.store.checks import check_dict, check_limit
from vigil.store.errors import DamagedRow
from vigil.store.gateway.gateway_tables import (
    FINISHED_STATUSES,
    INBOX_STATUSES,
    OUTBOX_KINDS,
    OUTBOX_STATUSES,
    InboxEntry,
    NewOutbound,
    OutboxEntry,
    RouteKey,
)
from vigil.store.rows import Row, canonical_json

ROUTES = "gateway_routes"
INBOX = "gateway_inbox"
OUTBOX = "gateway_outbox"

ROUTE_COLUMNS = "adapter, chat, thread, user_key"
ROUTE_MATCH = "adapter = {p} AND chat = {p} AND thread = {p} AND user_key = {p}"
"""The WHERE clause of one route; ``{p}`` is the backend's parameter mark."""
INBOX_COLUMNS = (
    f"id, {ROUTE_COLUMNS}, external_id, text, sender, received_at, status, session_id, attempts,"
    " started_at, finished_at, error, meta, deaths"
)
OUTBOX_COLUMNS = (
    f"id, {ROUTE_COLUMNS}, kind, text, session_id, inbox_id, created_at, status, attempts,"
    " next_attempt_at, last_error, sent_at, failed_at, meta, claimed_by, claim_until"
)

RouteParams = tuple[str, str, str, str]
OutboundParams = tuple[str, str, str, str, str, str, "str | None", "int | None", str]
"""A checked :class:`NewOutbound`: route, kind, text, session, inbox entry, meta JSON."""


# -- what goes in -----------------------------------------------------------------------------
def route_params(key: RouteKey) -> RouteParams:
    """The four route columns of ``key``; ``TypeError``/``ValueError`` for a malformed key."""
    if not isinstance(key, RouteKey):
        raise TypeError(f"a route must be a RouteKey, not {type(key).__name__}")
    parts = (key.adapter, key.chat, key.thread, key.user)
    if not all(isinstance(part, str) for part in parts):
        raise TypeError(f"every part of a route must be a string: {key!r}")
    if not key.adapter:
        raise ValueError("a route needs an adapter name")
    return parts


def check_text(value: Any, name: str, *, empty: bool = True) -> str:
    """``value`` if it is a string (and, unless ``empty``, not an empty one)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    if not empty and not value:
        raise ValueError(f"{name} must not be empty")
    return value


def check_id(entry_id: Any) -> int:
    """``entry_id`` if it is an int (an entry's id)."""
    if type(entry_id) is not int:
        raise TypeError(f"an entry id must be an int, not {type(entry_id).__name__}")
    return entry_id


def meta_json(meta: dict[str, Any] | None) -> str:
    """The stored text of a ``meta`` dict (``TypeError``/``ValueError`` for one JSON cannot hold)."""
    return canonical_json(check_dict({} if meta is None else meta, "meta"))


def outbound_params(message: NewOutbound) -> OutboundParams:
    """The columns of a reply to queue, checked."""
    if not isinstance(message, NewOutbound):
        raise TypeError(f"an outbox message must be a NewOutbound, not {type(message).__name__}")
    if message.kind not in OUTBOX_KINDS:
        raise ValueError(f"unknown outbox kind {message.kind!r}; expected one of {list(OUTBOX_KINDS)}")
    if message.session_id is not None:
        check_text(message.session_id, "session_id", empty=False)
    if message.inbox_id is not None:
        check_id(message.inbox_id)
    return (
        *route_params(message.route),
        message.kind,
        check_text(message.text, "text"),
        message.session_id,
        message.inbox_id,
        meta_json(message.meta),
    )


def started_session(session_id: str) -> str | None:
    """The session an entry is started in; ``""`` (not known yet: the conversation makes its
    session with the first turn) is stored as ``None``."""
    return check_text(session_id, "session_id") or None


def finish_status(status: str) -> str:
    """``status`` if an inbox entry may finish with it."""
    if status not in FINISHED_STATUSES:
        raise ValueError(f"an inbox entry finishes as {' or '.join(FINISHED_STATUSES)}, not {status!r}")
    return status


def outbox_statuses(statuses: Sequence[str]) -> list[str]:
    """``statuses`` as a list, each a known outbox status (a bare string is refused)."""
    return _statuses(statuses, "outbox", OUTBOX_STATUSES)


def inbox_statuses(statuses: Sequence[str]) -> list[str]:
    """``statuses`` as a list, each a known inbox status (a bare string is refused)."""
    return _statuses(statuses, "inbox", INBOX_STATUSES)


def _statuses(statuses: Sequence[str], table: str, known: Sequence[str]) -> list[str]:
    if isinstance(statuses, str):
        raise TypeError("statuses must be a sequence of statuses, not a single string")
    listed = list(statuses)
    unknown = [s for s in listed if s not in known]
    if unknown:
        raise ValueError(f"unknown {table} status {unknown[0]!r}; expected some of {list(known)}")
    return listed


def claim_params(worker: str, now: float, limit: int, hold: float) -> tuple[str, int, float]:
    """The checked ``worker`` and ``limit`` of a claim, and until when it holds."""
    check_text(worker, "worker", empty=False)
    if type(limit) is not int:
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    check_limit(limit)
    if isinstance(hold, bool) or not isinstance(hold, (int, float)) or not isinstance(now, (int, float)):
        raise TypeError("a claim's now and hold must be numbers of seconds")
    if not math.isfinite(hold) or hold <= 0 or not math.isfinite(now):
        raise ValueError(f"a claim needs a finite time and a positive hold, not now={now!r}, hold={hold!r}")
    return worker, limit, float(now) + float(hold)


# -- what comes out -----------------------------------------------------------------------------
def route_of(row: Row) -> RouteKey:
    return RouteKey(row["adapter"], row["chat"], row["thread"], row["user_key"])


def inbox_from_row(row: Row) -> InboxEntry:
    """An :class:`InboxEntry`; :class:`DamagedRow` for a damaged row (see above)."""
    return InboxEntry(
        id=row["id"],
        route=route_of(row),
        external_id=row["external_id"],
        text=row["text"],
        sender=row["sender"],
        received_at=_time(row["received_at"]),
        status=_status(row, INBOX, INBOX_STATUSES),
        session_id=row["session_id"],
        attempts=row["attempts"],
        finished_at=_time(row["finished_at"]),
        error=row["error"],
        meta=_meta(row, INBOX),
        started_at=_time(row["started_at"]),
        deaths=row["deaths"],
    )


def outbox_from_row(row: Row) -> OutboxEntry:
    """An :class:`OutboxEntry`; :class:`DamagedRow` for a damaged row (see above)."""
    return OutboxEntry(
        id=row["id"],
        route=route_of(row),
        kind=row["kind"],
        text=row["text"],
        session_id=row["session_id"],
        inbox_id=row["inbox_id"],
        created_at=_time(row["created_at"]),
        status=_status(row, OUTBOX, OUTBOX_STATUSES),
        attempts=row["attempts"],
        next_attempt_at=_time(row["next_attempt_at"]),
        last_error=row["last_error"],
        sent_at=_time(row["sent_at"]),
        meta=_meta(row, OUTBOX),
        failed_at=_time(row["failed_at"]),
        claimed_by=row["claimed_by"],
        claim_until=_time(row["claim_until"]),
    )


def counts_of(rows: Sequence[Row], table: str, statuses: Sequence[str]) -> dict[str, int]:
    """Entries per status from rows of ``status, n, first`` (``first``: the lowest id with
    that status); every known status present, a status vigil does not write is damage."""
    counts = dict.fromkeys(statuses, 0)
    for row in rows:
        if row["status"] not in counts:
            raise DamagedRow(table, row["first"], f"column status holds unknown status {row['status']!r}")
        counts[row["status"]] = int(row["n"])
    return counts


def _time(value: Any) -> Any:
    # SQLite hands back a REAL that holds a whole number as an int when RETURNING it.
    return None if value is None else float(value)


def _status(row: Row, table: str, statuses: Sequence[str]) -> str:
    status: str = row["status"]
    if status not in statuses:
        raise DamagedRow(
            table, row["id"], f"column status holds unknown status {status!r} (expected one of {list(statuses)})"
        )
    return status


def _meta(row: Row, table: str) -> dict[str, Any]:
    raw = row["meta"]
    try:
        value = json.loads(raw)
        return check_dict(value, "meta")
    except (TypeError, ValueError) as exc:
        raise DamagedRow(
            table, row["id"], f"column meta holds damaged data ({exc.__class__.__name__}: {exc})"
        ) from exc
