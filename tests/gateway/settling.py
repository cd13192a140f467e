"""A gateway with nothing left to do, read from its store: every inbox entry finished and every
outbox entry sent or given up. Once that holds no answer can still arrive (an answer is sent
only from a pending outbox entry, and an entry is only written by a turn that is running), so a
test that checks "answered once" waits for it instead of sleeping and hoping."""

from __future__ import annotations

from pathlib import Path

from vigil.store import SessionStore, SQLiteStore
from vigil.store.gateway.gateway_tables import PENDING, RUNNING
from vigil.testing.waiting import eventually, wait_for


def settled(store: SessionStore) -> bool:
    """Nothing pending or running in the inbox, nothing pending in the outbox."""
    inbox, outbox = store.gateway.inbox_counts(), store.gateway.outbox_counts()
    return inbox[PENDING] == inbox[RUNNING] == outbox[PENDING] == 0


def settled_at(state_db: Path) -> bool:
    """:func:`settled` for the SQLite store file of a gateway running elsewhere (another process,
    or in-process with its own connection), read through a connection of the test's own."""
    store = SQLiteStore(state_db)
    try:
        return settled(store)
    finally:
        store.close()


async def until_settled(store: SessionStore) -> None:
    await eventually(lambda: settled(store), what="the gateway to settle (inbox finished, outbox sent)")


def wait_until_settled(store: SessionStore) -> None:
    wait_for(lambda: settled(store), what="the gateway to settle (inbox finished, outbox sent)")
