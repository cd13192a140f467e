"""The pairing tables' transactions, written once for both backends.

Each backend runs these functions inside one write transaction, giving them ``x``: execute one
statement (``?`` marks parameters, ``{s}.`` prefixes table names) and return its rows, which
are read by column name. SQLite serialises its writers already (``BEGIN IMMEDIATE``); the
PostgreSQL backend takes an advisory lock first, so the count-then-insert of a code request
cannot be split by another process there either.

Damaged data policy (as for the gateway tables): a row whose times are not numbers or whose
text columns are not text cannot be acted on safely (is the code expired? was the user
revoked?). Reading it raises :class:`DamagedRow` naming the table, the row and the column.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from vigil.store.errors import DamagedRow
from vigil.store.gateway.pairing_tables import (
    APPROVED,
    DENIED,
    EXISTING,
    EXPIRED,
    FULL,
    ISSUED,
    KEEP_SECONDS,
    LIMITED,
    LOCKED,
    WRONG,
    CodeDecision,
    CodeRequest,
    Limits,
    PairedUser,
    PendingCode,
)

Exec = Callable[[str, Sequence[Any]], list[Any]]

CODES = "pairing_codes"
USERS = "pairing_users"
CODE_COLUMNS = (
    "platform, user_id, display_name, chat, thread, user_key, code_hash, nonce, created_at, expires_at"
)
USER_COLUMNS = "platform, user_id, display_name, approved_at, approved_by, revoked_at, revoked_by"
REQUEST = "request"
WRONG_CODE = "wrong_code"

MAX_ID = 256
"""Longest platform name or user id stored (platform ids are far shorter)."""
MAX_NAME = 200


# -- what goes in -----------------------------------------------------------------------------
def check_key(platform: Any, user_id: Any) -> tuple[str, str]:
    """``(platform, user_id)`` if both are non-empty strings without control characters."""
    return _id(platform, "platform"), _id(user_id, "user id")


def _id(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    if not value or len(value) > MAX_ID or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{name} must be 1 to {MAX_ID} printable characters")
    return value


def check_hash(code_hash: Any) -> str:
    if not isinstance(code_hash, str) or len(code_hash) != 64 or any(c not in "0123456789abcdef" for c in code_hash):
        raise ValueError("a code hash is 64 lower-case hex digits")
    return code_hash


def clean_name(name: Any) -> str:
    """A display name as stored: text, control characters dropped, at most ``MAX_NAME``."""
    if not isinstance(name, str):
        raise TypeError(f"a display name must be a string, not {type(name).__name__}")
    return "".join(c for c in name if ord(c) >= 32 and ord(c) != 127)[:MAX_NAME]


def check_text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    return value


# -- the transactions -------------------------------------------------------------------------
def request_code(
    x: Exec,
    platform: str,
    user_id: str,
    *,
    display_name: str,
    chat: str,
    thread: str,
    user_key: str,
    code_hash: str,
    nonce: str,
    now: float,
    limits: Limits,
) -> CodeRequest:
    _forget_old(x, now, limits)
    since = now - limits.request_window
    requests = _count(x, REQUEST, platform, user_id, since) + 1
    if requests <= limits.max_requests + 1:
        x("INSERT INTO {s}.pairing_events (kind, platform, user_id, at) VALUES (?, ?, ?, ?)",
          (REQUEST, platform, user_id, now))
    if requests > limits.max_requests:
        return CodeRequest(LIMITED, requests)
    rows = x(f"SELECT {CODE_COLUMNS} FROM {{s}}.pairing_codes WHERE platform = ? AND user_id = ?", (platform, user_id))
    if rows:
        existing = code_from_row(rows[0])
        if existing.expires_at > now:
            return CodeRequest(EXISTING, requests, existing)
    pending = x("SELECT COUNT(*) AS n FROM {s}.pairing_codes WHERE platform = ? AND expires_at > ?", (platform, now))
    if int(pending[0]["n"]) >= limits.max_pending:
        return CodeRequest(FULL, requests)
    x("DELETE FROM {s}.pairing_codes WHERE platform = ? AND user_id = ?", (platform, user_id))
    stored = x(
        f"INSERT INTO {{s}}.pairing_codes ({CODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {CODE_COLUMNS}",
        (platform, user_id, display_name, chat, thread, user_key, code_hash, nonce, now, now + limits.code_ttl),
    )
    return CodeRequest(ISSUED, requests, code_from_row(stored[0]))


def decide(x: Exec, code_hash: str, *, approve: bool, by: str, now: float, limits: Limits) -> CodeDecision:
    """Approve (pair) or deny the code with ``code_hash``, unless approvals are locked."""
    state = lock_state(x, now, limits)
    if state.outcome == LOCKED:
        return state
    rows = x(f"SELECT {CODE_COLUMNS} FROM {{s}}.pairing_codes WHERE code_hash = ?", (code_hash,))
    if not rows:
        x("INSERT INTO {s}.pairing_events (kind, platform, user_id, at) VALUES (?, '', '', ?)", (WRONG_CODE, now))
        after = lock_state(x, now, limits)
        return CodeDecision(WRONG, wrong=after.wrong, locked_until=after.locked_until)
    code = code_from_row(rows[0])
    if code.expires_at <= now:
        return CodeDecision(EXPIRED, code=code, wrong=state.wrong)
    x("DELETE FROM {s}.pairing_codes WHERE platform = ? AND user_id = ?", (code.platform, code.user_id))
    if not approve:
        return CodeDecision(DENIED, code=code, wrong=state.wrong)
    paired = x(
        f"INSERT INTO {{s}}.pairing_users ({USER_COLUMNS}) VALUES (?, ?, ?, ?, ?, NULL, NULL)"
        " ON CONFLICT (platform, user_id) DO UPDATE SET display_name = excluded.display_name,"
        " approved_at = excluded.approved_at, approved_by = excluded.approved_by, revoked_at = NULL,"
        f" revoked_by = NULL RETURNING {USER_COLUMNS}",
        (code.platform, code.user_id, code.display_name, now, by),
    )
    return CodeDecision(APPROVED, code=code, user=user_from_row(paired[0]), wrong=state.wrong)


def lock_state(x: Exec, now: float, limits: Limits) -> CodeDecision:
    """``locked`` until the oldest of the window's last ``max_wrong`` wrong codes leaves it."""
    rows = x(
        "SELECT id, at FROM {s}.pairing_events WHERE kind = ? AND at > ? ORDER BY at DESC",
        (WRONG_CODE, now - limits.wrong_window),
    )
    times = [_event_time(row) for row in rows]
    if len(times) >= limits.max_wrong:
        return CodeDecision(LOCKED, wrong=len(times), locked_until=times[limits.max_wrong - 1] + limits.wrong_window)
    return CodeDecision(APPROVED, wrong=len(times))


def revoke(x: Exec, platform: str, user_id: str, *, by: str, now: float) -> PairedUser | None:
    """Writes only when there is an active pairing to revoke."""
    rows = x(f"SELECT {USER_COLUMNS} FROM {{s}}.pairing_users WHERE platform = ? AND user_id = ?", (platform, user_id))
    if not rows:
        return None
    current = user_from_row(rows[0])
    if not current.active:
        return current
    x("DELETE FROM {s}.pairing_codes WHERE platform = ? AND user_id = ?", (platform, user_id))
    rows = x(
        f"UPDATE {{s}}.pairing_users SET revoked_at = ?, revoked_by = ? WHERE platform = ? AND user_id = ?"
        f" RETURNING {USER_COLUMNS}",
        (now, by, platform, user_id),
    )
    return user_from_row(rows[0])


def _forget_old(x: Exec, now: float, limits: Limits) -> None:
    x("DELETE FROM {s}.pairing_codes WHERE expires_at < ?", (now - KEEP_SECONDS,))
    oldest = now - max(limits.request_window, limits.wrong_window) - KEEP_SECONDS
    x("DELETE FROM {s}.pairing_events WHERE at < ?", (oldest,))


def _count(x: Exec, kind: str, platform: str, user_id: str, since: float) -> int:
    rows = x(
        "SELECT COUNT(*) AS n FROM {s}.pairing_events WHERE kind = ? AND platform = ? AND user_id = ? AND at > ?",
        (kind, platform, user_id, since),
    )
    return int(rows[0]["n"])


# -- what comes out -----------------------------------------------------------------------------
def code_from_row(row: Any) -> PendingCode:
    """A :class:`PendingCode`; :class:`DamagedRow` for a damaged row (see above)."""
    where = f"{row['platform']}/{row['user_id']}"
    return PendingCode(
        platform=_stored_text(row, "platform", CODES, where),
        user_id=_stored_text(row, "user_id", CODES, where),
        display_name=_stored_text(row, "display_name", CODES, where),
        chat=_stored_text(row, "chat", CODES, where),
        thread=_stored_text(row, "thread", CODES, where),
        user_key=_stored_text(row, "user_key", CODES, where),
        code_hash=_stored_text(row, "code_hash", CODES, where),
        nonce=_stored_text(row, "nonce", CODES, where),
        created_at=_stored_time(row, "created_at", CODES, where),
        expires_at=_stored_time(row, "expires_at", CODES, where),
    )


def user_from_row(row: Any) -> PairedUser:
    """A :class:`PairedUser`; :class:`DamagedRow` for a damaged row (see above)."""
    where = f"{row['platform']}/{row['user_id']}"
    revoked_at = row["revoked_at"]
    return PairedUser(
        platform=_stored_text(row, "platform", USERS, where),
        user_id=_stored_text(row, "user_id", USERS, where),
        display_name=_stored_text(row, "display_name", USERS, where),
        approved_at=_stored_time(row, "approved_at", USERS, where),
        approved_by=_stored_text(row, "approved_by", USERS, where),
        revoked_at=None if revoked_at is None else _stored_time(row, "revoked_at", USERS, where),
        revoked_by=None if row["revoked_by"] is None else _stored_text(row, "revoked_by", USERS, where),
    )


def _stored_text(row: Any, column: str, table: str, where: str) -> str:
    value = row[column]
    if not isinstance(value, str):
        raise DamagedRow(table, where, f"column {column} holds {type(value).__name__} {value!r:.40}, not text")
    return value


def _stored_time(row: Any, column: str, table: str, where: str) -> float:
    value = row[column]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise DamagedRow(table, where, f"column {column} holds {value!r:.40}, not a time")
    return float(value)


def _event_time(row: Any) -> float:
    return _stored_time(row, "at", "pairing_events", str(row["id"]))
