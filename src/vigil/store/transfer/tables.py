"""The tables ``vigil store migrate`` copies, and the canonical form of a row that both
backends must agree on.

Every table of the session store exists in both backends with the same columns, except
``messages``: SQLite packs its rarely used columns into ``extra`` (see
``rows.PACKED_MESSAGE_COLUMNS``), PostgreSQL keeps a column each and derives its search words
from ``content`` (a generated column, so the full-text index is rebuilt by inserting the rows).
Ledger tables (``schema_migrations``) and SQLite's own (``messages_fts``, ``sqlite_sequence``)
are not copied: each backend keeps its own.

The canonical form of a row is the JSON text of ``{column: value}`` with JSON columns decoded
(so spacing cannot matter), times as numbers and messages decoded by each backend's own
reader; a table's digest sums the SHA-256 of its rows, so it does not depend on the order in
which either database returns them.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from vigil.store.records import MessageRecord
from vigil.store.rows import canonical_json

TEXT, REAL, INT, JSON = "text", "real", "int", "json"
"""Column kinds: how a value is put into canonical form."""

MARKER_KEY = "store:migrate"
"""The ``state_meta`` key in the target that records an unfinished migrate: where it came
from and how far each table got. Never copied, never counted; removed once verified."""


@dataclass(frozen=True, slots=True)
class Table:
    """One table to copy: its columns (name, kind) in the target's order, and ``identity``,
    the target column generated as an identity that the copy fills with the source's ids."""

    name: str
    columns: tuple[tuple[str, str], ...]
    identity: str | None = None
    column_names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "column_names", tuple(name for name, _ in self.columns))


def _t(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((n, TEXT) for n in names)


def _k(kind: str, *names: str) -> tuple[tuple[str, str], ...]:
    return tuple((n, kind) for n in names)


_COUNTS = _k(INT, "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
_ROUTE = _t("adapter", "chat", "thread", "user_key")

# In an order that satisfies the foreign keys: prompts before the sessions naming them,
# sessions before their messages and routes.
TABLES: tuple[Table, ...] = (
    Table("system_prompts", (*_t("hash", "text"), ("created_at", REAL))),
    Table(
        "sessions",
        (
            *_t("id", "source", "title", "parent_id", "end_reason"),
            *_k(REAL, "started_at", "ended_at", "updated_at"),
            ("model", TEXT),
            ("model_config", JSON),
            ("system_prompt_hash", TEXT),
            ("tool_names", JSON),
            ("message_count", INT),
            *_COUNTS,
            ("forked_from", TEXT),
        ),
    ),
    Table(
        "messages",
        (
            ("id", INT),
            *_t("session_id"),
            ("seq", INT),
            *_t("role", "content"),
            ("tool_calls", JSON),
            *_t("tool_call_id", "tool_name"),
            ("created_at", REAL),
            *_COUNTS,
            ("meta", JSON),
        ),
        identity="id",
    ),
    Table("state_meta", (("key", TEXT), ("value", JSON), ("updated_at", REAL))),
    Table("gateway_routes", (*_ROUTE, ("session_id", TEXT), *_k(REAL, "created_at", "updated_at"))),
    Table(
        "gateway_inbox",
        (
            ("id", INT),
            *_ROUTE,
            *_t("external_id", "text", "sender"),
            ("received_at", REAL),
            *_t("status", "session_id"),
            ("attempts", INT),
            *_k(REAL, "started_at", "finished_at"),
            ("error", TEXT),
            ("meta", JSON),
            ("deaths", INT),
        ),
        identity="id",
    ),
    Table(
        "gateway_outbox",
        (
            ("id", INT),
            *_ROUTE,
            *_t("kind", "text", "session_id"),
            ("inbox_id", INT),
            ("created_at", REAL),
            ("status", TEXT),
            ("attempts", INT),
            ("next_attempt_at", REAL),
            ("last_error", TEXT),
            *_k(REAL, "sent_at", "failed_at"),
            ("meta", JSON),
            ("claimed_by", TEXT),
            ("claim_until", REAL),
        ),
        identity="id",
    ),
    Table(
        "pairing_codes",
        (
            *_t("platform", "user_id", "display_name", "chat", "thread", "user_key", "code_hash", "nonce"),
            *_k(REAL, "created_at", "expires_at"),
        ),
    ),
    Table(
        "pairing_users",
        (
            *_t("platform", "user_id", "display_name"),
            ("approved_at", REAL),
            ("approved_by", TEXT),
            ("revoked_at", REAL),
            ("revoked_by", TEXT),
        ),
    ),
    Table("pairing_events", (("id", INT), *_t("kind", "platform", "user_id"), ("at", REAL)), identity="id"),
    Table("pairing_speakers", (*_t("adapter", "chat", "thread", "user_id"), *_k(REAL, "first_at", "last_at"))),
)
TABLE_NAMES: tuple[str, ...] = tuple(t.name for t in TABLES)
BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}


def _number(value: Any) -> Any:
    """A time as a JSON number; the infinities (which JSON lacks) as words."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else repr(number)


def _decoded(text: Any) -> Any:
    """A JSON column's value; text that is not JSON (damage) is compared as the text it is."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return {"undecodable": text}


def _canonical(value: dict[str, Any]) -> str:
    try:
        return canonical_json(value)
    except ValueError:  # a NaN in damaged JSON: still one text for one value
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_NORMAL = {
    TEXT: lambda v: v,
    INT: lambda v: v if v is None or type(v) is int else int(v),
    REAL: _number,
    JSON: _decoded,
}


def canonical_row(table: Table, row: Mapping[str, Any]) -> str:
    """The canonical form of a row of ``table`` (any table but ``messages``), given by column."""
    return _canonical({name: _NORMAL[kind](row[name]) for name, kind in table.columns})


def canonical_message(message: MessageRecord) -> str:
    """The canonical form of a message as a backend's own reader returned it."""
    usage = message.usage
    return _canonical(
        {
            "id": message.id,
            "session_id": message.session_id,
            "seq": message.seq,
            "role": message.role,
            "content": message.content,
            "tool_calls": [list(call) for call in message.tool_calls],
            "tool_call_id": message.tool_call_id,
            "tool_name": message.tool_name,
            "created_at": _number(message.created_at),
            "usage": [usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens],
            "meta": message.meta,
        }
    )


_MODULUS = 1 << 256


@dataclass(slots=True)
class Digest:
    """The row count and content hash of one table on one side: the sum of each row's
    SHA-256 modulo 2**256, which is the same whatever order the rows come in."""

    rows: int = 0
    _sum: int = 0

    def add(self, canonical: str) -> None:
        digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()
        self._sum = (self._sum + int.from_bytes(digest, "big")) % _MODULUS
        self.rows += 1

    @property
    def hexdigest(self) -> str:
        return f"{self._sum:064x}"
