"""A quick count of sessions whose stored system prompt cannot be replayed (the same test as
``vigil sessions repair-prompts``: missing, empty or failing its hash), in plain read-only SQL
that both backends run."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from vigil.doctor.result import CheckResult, ok, skipped, warning
from vigil.store.ids import prompt_hash

AREA = "store"
NAME = "damaged prompts"
HASH_CAP = 5000
"""Distinct prompts re-hashed at most; beyond that only missing and empty ones are counted
(hashing them all would be a full read of the prompts)."""

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs one read statement (``{t}`` before each table name) and returns its rows."""

_HAS_PROMPT = "s.system_prompt_hash IS NOT NULL AND s.system_prompt_hash <> ''"
_MISSING_OR_EMPTY = (
    "SELECT COUNT(*) FROM {t}sessions s LEFT JOIN {t}system_prompts p ON p.hash = s.system_prompt_hash"
    f" WHERE {_HAS_PROMPT} AND (p.hash IS NULL OR trim(p.text) = '')"
)
_DISTINCT = f"SELECT COUNT(DISTINCT s.system_prompt_hash) FROM {{t}}sessions s WHERE {_HAS_PROMPT}"
_WITH_USERS = (
    "SELECT p.hash, p.text, (SELECT COUNT(*) FROM {t}sessions s WHERE s.system_prompt_hash = p.hash)"
    " FROM {t}system_prompts p WHERE p.hash IN (SELECT s.system_prompt_hash FROM {t}sessions s)"
)
FIX = "vigil sessions repair-prompts --dry-run   (then without --dry-run to rebuild them)"


def check_damaged_prompts(query: Query, tables: str = "", unescape: Callable[[str], str] = str) -> CheckResult:
    """``tables`` is put before each table name (a PostgreSQL schema, ``"vigil".``)."""

    def rows(statement: str) -> list[tuple[Any, ...]]:
        return query(statement.replace("{t}", tables), ())

    missing = int(rows(_MISSING_OR_EMPTY)[0][0] or 0)
    distinct = int(rows(_DISTINCT)[0][0] or 0)
    if distinct > HASH_CAP:
        if missing:
            return warning(AREA, NAME, f"{missing} session(s) with a missing or empty stored prompt", FIX)
        return skipped(
            AREA, NAME, f"{distinct:,} distinct prompts: too many to re-hash quickly; none is missing or empty"
        )
    mismatched = 0
    for digest, text, users in rows(_WITH_USERS):
        if isinstance(text, str) and text.strip() and prompt_hash(unescape(text)) != digest:
            mismatched += int(users or 0)
    damaged = missing + mismatched
    if damaged:
        return warning(
            AREA,
            NAME,
            f"{damaged} session(s) whose stored system prompt is missing, empty or fails its hash",
            FIX,
        )
    return ok(
        AREA, NAME, f"none among {distinct:,} stored prompt(s) (messages are not scanned: that is a full read)"
    )


def not_checked(version: int, latest: int) -> CheckResult:
    """What stands in for the count when the schema is not the one these statements know."""
    if version == 0:
        return ok(AREA, NAME, "none: the store holds no sessions yet")
    newer = "newer than" if version > latest else "behind"
    return skipped(AREA, NAME, f"not counted: the schema is {newer} the one this vigil knows")
