"""``state_meta`` in PostgreSQL: JSON values under string keys, and compare-and-set claims.

Each function runs inside the caller's write or read transaction, through ``run`` (see
``Database.run``); values arrive and are compared as canonical JSON text.
"""

from __future__ import annotations

from vigil.store.postgres_conn import Run
from vigil.store.records import MetaEntry
from vigil.store.rows import canonical_json, meta_value


def get(run: Run, key: str) -> MetaEntry | None:
    """The entry under ``key``, or ``None``."""
    row = run("SELECT key, value, updated_at FROM {s}.state_meta WHERE key = %s", (key,)).fetchone()
    return None if row is None else MetaEntry(key, meta_value(row["value"], key), row["updated_at"])


def put(run: Run, key: str, encoded: str, now: float) -> None:
    """Insert or replace the value under ``key``."""
    run(
        "INSERT INTO {s}.state_meta (key, value, updated_at) VALUES (%s, %s, %s)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (key, encoded, now),
    )


def delete(run: Run, key: str) -> bool:
    """Remove ``key``; whether it existed."""
    return bool(run("DELETE FROM {s}.state_meta WHERE key = %s", (key,)).rowcount > 0)


def compare_and_set(run: Run, key: str, want: str | None, encoded: str | None, now: float) -> bool:
    """Replace the value under ``key`` by ``encoded`` if it is ``want`` (``None``: absent, or
    delete); whether the swap happened. Concurrent callers get exactly one winner."""
    if want is None and encoded is not None:
        # Claiming an absent key: of concurrent inserts, the first to commit gets the row and
        # the others wait for it and then do nothing.
        inserted = run(
            "INSERT INTO {s}.state_meta (key, value, updated_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (key) DO NOTHING",
            (key, encoded, now),
        ).rowcount
        return bool(inserted == 1)
    # FOR UPDATE: a concurrent swap of this key waits until this one commits, then finds
    # the new value.
    row = run("SELECT value FROM {s}.state_meta WHERE key = %s FOR UPDATE", (key,)).fetchone()
    # Re-encode what is stored: a value written by hand may differ in spacing.
    current = None if row is None else canonical_json(meta_value(row["value"], key))
    if current != want:
        return False
    if encoded is None:
        delete(run, key)
    else:
        put(run, key, encoded, now)
    return True


def with_prefix(run: Run, prefix: str) -> list[MetaEntry]:
    """Every entry whose key starts with ``prefix``, ordered by key (code points)."""
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = run(
        "SELECT key, value, updated_at FROM {s}.state_meta WHERE key LIKE %s ORDER BY key", (pattern,)
    ).fetchall()
    return [MetaEntry(r["key"], meta_value(r["value"], r["key"]), r["updated_at"]) for r in rows]
