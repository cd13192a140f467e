"""``state_meta`` in PostgreSQL: JSON values under string keys, and compare-and-set claims.

Each function runs inside the caller's write or read transaction, through ``run`` (see
``Database.run``); values arrive and are compared as canonical JSON text.
"""

from __future__ import annotations

from vigil.store.meta_batch import EncodedSwap
from vigil.store.postgres.conn import Run
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


def get_many(run: Run, keys: list[str]) -> dict[str, MetaEntry]:
    """The entries under ``keys`` that exist, by key."""
    rows = run("SELECT key, value, updated_at FROM {s}.state_meta WHERE key = ANY(%s)", (keys,)).fetchall()
    return {r["key"]: MetaEntry(r["key"], meta_value(r["value"], r["key"]), r["updated_at"]) for r in rows}


def compare_and_set_many(run: Run, batch: list[EncodedSwap], now: float) -> list[bool]:
    """Every swap of ``batch`` (distinct keys) as :func:`compare_and_set` would do it, in a
    handful of statements whatever the size of the batch."""
    # Lock every row to be compared, in key order, so that two batches over the same keys
    # queue behind each other instead of deadlocking; absent keys are claimed by inserting.
    present = sorted(swap.key for swap in batch if swap.want is not None)
    current: dict[str, str] = {}
    if present:
        rows = run(
            "SELECT key, value FROM {s}.state_meta WHERE key = ANY(%s) ORDER BY key FOR UPDATE", (present,)
        ).fetchall()
        wanted = {swap.key: swap.want for swap in batch}
        current = {
            r["key"]: r["value"] if r["value"] == wanted[r["key"]] else canonical_json(meta_value(r["value"], r["key"]))
            for r in rows
        }
    claims = [swap for swap in batch if swap.want is None and swap.new is not None]
    inserted: set[str] = set()
    if claims:
        rows = run(
            "INSERT INTO {s}.state_meta (key, value, updated_at)"
            " SELECT k, v, %s FROM unnest(%s::text[], %s::text[]) AS t(k, v)"
            " ON CONFLICT (key) DO NOTHING RETURNING key",
            (now, [swap.key for swap in claims], [swap.new for swap in claims]),
        ).fetchall()
        inserted = {r["key"] for r in rows}
    absent_checks = [swap.key for swap in batch if swap.want is None and swap.new is None]
    existing: set[str] = set()
    if absent_checks:
        rows = run("SELECT key FROM {s}.state_meta WHERE key = ANY(%s)", (absent_checks,)).fetchall()
        existing = {r["key"] for r in rows}

    done: list[bool] = []
    puts: dict[str, str] = {}
    deletes: list[str] = []
    for swap in batch:
        if swap.want is None:
            swapped = swap.key in inserted if swap.new is not None else swap.key not in existing
        else:
            swapped = current.get(swap.key) == swap.want
            if swapped:
                if swap.new is None:
                    deletes.append(swap.key)
                else:
                    puts[swap.key] = swap.new
        if swapped:
            for key, value in swap.also:
                if value is None:
                    deletes.append(key)
                else:
                    puts[key] = value
        done.append(swapped)
    if puts:
        run(
            "INSERT INTO {s}.state_meta (key, value, updated_at)"
            " SELECT k, v, %s FROM unnest(%s::text[], %s::text[]) AS t(k, v)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (now, list(puts), list(puts.values())),
        )
    if deletes:
        run("DELETE FROM {s}.state_meta WHERE key = ANY(%s)", (deletes,))
    return done
