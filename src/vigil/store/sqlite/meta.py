"""``state_meta`` in SQLite: JSON values under string keys, and compare-and-set claims.

Each function runs inside the caller's transaction on ``conn`` (a read, or one of the group
commit's write transactions); values arrive and are compared as canonical JSON text.
"""

from __future__ import annotations

import sqlite3

from vigil.store.meta_batch import EncodedSwap
from vigil.store.records import MetaEntry
from vigil.store.rows import canonical_json, meta_value

_KEYS_PER_QUERY = 500  # well below SQLite's limit on the number of parameters
_PUT = (
    "INSERT INTO state_meta (key, value, updated_at) VALUES (?, ?, ?)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
)


def get(conn: sqlite3.Connection, key: str) -> MetaEntry | None:
    """The entry under ``key``, or ``None``."""
    row = conn.execute("SELECT value, updated_at FROM state_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else MetaEntry(key, meta_value(row[0], key), row[1])


def put(conn: sqlite3.Connection, key: str, encoded: str, now: float) -> None:
    """Insert or replace the value under ``key``."""
    conn.execute(_PUT, (key, encoded, now))


def delete(conn: sqlite3.Connection, key: str) -> bool:
    """Remove ``key``; whether it existed."""
    return conn.execute("DELETE FROM state_meta WHERE key = ?", (key,)).rowcount > 0


def compare_and_set(conn: sqlite3.Connection, key: str, want: str | None, encoded: str | None, now: float) -> bool:
    """Replace the value under ``key`` by ``encoded`` if it is ``want`` (``None``: absent, or
    delete); whether the swap happened. The write transaction makes it atomic."""
    row = conn.execute("SELECT value FROM state_meta WHERE key = ?", (key,)).fetchone()
    if _current(None if row is None else row[0], want, key) != want:
        return False
    if encoded is None:
        delete(conn, key)
    else:
        put(conn, key, encoded, now)
    return True


def get_many(conn: sqlite3.Connection, keys: list[str]) -> dict[str, MetaEntry]:
    """The entries under ``keys`` (distinct) that exist, by key."""
    found: dict[str, MetaEntry] = {}
    for chunk in _chunks(keys):
        rows = conn.execute(
            f"SELECT key, value, updated_at FROM state_meta WHERE key IN ({', '.join('?' * len(chunk))})", chunk
        )
        for key, value, updated_at in rows:
            found[key] = MetaEntry(key, meta_value(value, key), updated_at)
    return found


def compare_and_set_many(conn: sqlite3.Connection, batch: list[EncodedSwap], now: float) -> list[bool]:
    """Every swap of ``batch`` as :func:`compare_and_set` would do it. The keys are distinct,
    so each swap is decided from one read of them all, and the writes go in two statements."""
    stored: dict[str, str] = {}
    for chunk in _chunks([swap.key for swap in batch]):
        rows = conn.execute(f"SELECT key, value FROM state_meta WHERE key IN ({', '.join('?' * len(chunk))})", chunk)
        stored.update((key, value) for key, value in rows)
    done, puts, deletes = [], [], []
    for swap in batch:
        swapped = _current(stored.get(swap.key), swap.want, swap.key) == swap.want
        if swapped:
            for key, value in ((swap.key, swap.new), *swap.also):
                if value is None:
                    deletes.append((key,))
                else:
                    puts.append((key, value, now))
        done.append(swapped)
    conn.executemany("DELETE FROM state_meta WHERE key = ?", deletes)
    conn.executemany(_PUT, puts)
    return done


def with_prefix(conn: sqlite3.Connection, prefix: str) -> list[MetaEntry]:
    """Every entry whose key starts with ``prefix``, ordered by key."""
    upper = _prefix_upper_bound(prefix)
    below, params = ("AND key < ?", (prefix, upper)) if upper is not None else ("", (prefix,))
    rows = conn.execute(
        f"SELECT key, value, updated_at FROM state_meta WHERE key >= ? {below} ORDER BY key", params
    ).fetchall()
    return [MetaEntry(key, meta_value(value, key), updated_at) for key, value, updated_at in rows]


def _current(stored: str | None, want: str | None, key: str) -> str | None:
    """The stored text in canonical form, for comparing with ``want``. What vigil wrote is
    canonical already; a value written by hand or by older code may differ in spacing."""
    if stored is None or stored == want:
        return stored
    return canonical_json(meta_value(stored, key))


def _chunks(keys: list[str]) -> list[list[str]]:
    return [keys[start : start + _KEYS_PER_QUERY] for start in range(0, len(keys), _KEYS_PER_QUERY)]


def _prefix_upper_bound(prefix: str) -> str | None:
    """An exclusive upper bound for the strings starting with ``prefix`` (None: there is none).

    SQLite compares TEXT as UTF-8 bytes, which orders like code points, so bumping the last
    character that can be bumped gives the bound.
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            bumped = last + 1
            if 0xD800 <= bumped <= 0xDFFF:  # surrogates cannot be stored; skip past them
                bumped = 0xE000
            return "".join(chars) + chr(bumped)
    return None
