"""Errors raised by every session store backend."""

from __future__ import annotations


class StoreError(Exception):
    """Base class for session store failures; the message is meant for the user."""


class StoreUnavailable(StoreError):
    """The store cannot serve the operation now, through no fault of the operation: a lost
    connection, a server restarting or failing over, a lock held too long. Nothing of the
    operation was stored; the same call may succeed later (the stores already retried it for a
    while before raising this)."""


class StoreUnwritable(StoreUnavailable):
    """The store can be read but not written: a full disk, a read-only file or file system.
    ``reason`` says which, in words a person can act on; nothing of the write was stored.
    It lasts until someone frees space or fixes the file, after which writes work again
    without a restart."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the session store cannot be written: {reason}")
        self.reason = reason


class SessionNotFound(StoreError):
    """No session has this id, or no session id starts with this prefix."""

    def __init__(self, ref: str) -> None:
        super().__init__(f"no session matches '{ref}' (see `vigil sessions list`)")
        self.ref = ref


class AmbiguousSession(StoreError):
    """More than one session id starts with the given prefix."""

    def __init__(self, ref: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:5]) + (" ..." if len(candidates) > 5 else "")
        super().__init__(
            f"session prefix '{ref}' is ambiguous: {len(candidates)} sessions match ({shown}); "
            "type more characters"
        )
        self.ref = ref
        self.candidates = candidates


class SchemaTooNew(StoreError):
    """The database was written by a newer vigil than this one."""


class StoreUnreadable(StoreError):
    """The database file exists but is not a usable vigil database."""


class DamagedRow(StoreError):
    """A stored row that cannot be read back as a record (a hand edit, a disk problem, a bug):
    the message names the table, the row's id and what is wrong with it."""

    def __init__(self, table: str, row_id: object, problem: str) -> None:
        super().__init__(f"{table} row {row_id}: {problem}; repair or delete this row")
        self.table = table
        self.row_id = row_id
