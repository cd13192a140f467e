"""The session store: the protocol, its records and errors, and ``open_store`` to pick a backend."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vigil.store.errors import (
    AmbiguousSession,
    SchemaTooNew,
    SessionNotFound,
    StoreError,
    StoreUnreadable,
)

if TYPE_CHECKING:
    from vigil.clock import Clock
    from vigil.store.base import UNSET, SessionStore
    from vigil.store.ids import prompt_hash
    from vigil.store.records import (
        ConversationHead,
        MessageRecord,
        MetaEntry,
        NewMessage,
        SearchHit,
        SessionRecord,
        ToolCall,
    )
    from vigil.store.sqlite import SQLiteStore

__all__ = [
    "UNSET",
    "AmbiguousSession",
    "ConversationHead",
    "MessageRecord",
    "MetaEntry",
    "NewMessage",
    "SchemaTooNew",
    "SearchHit",
    "SessionNotFound",
    "SessionRecord",
    "SQLiteStore",
    "SessionStore",
    "StoreError",
    "StoreUnreadable",
    "ToolCall",
    "open_store",
    "prompt_hash",
]

# The backends and records are imported on first use: the errors alone must not cost the
# CLI an import of the SQLite backend (or anything else) before a command needs the store.
_LAZY = {
    "UNSET": "vigil.store.base",
    "SessionStore": "vigil.store.base",
    "prompt_hash": "vigil.store.ids",
    "ConversationHead": "vigil.store.records",
    "MessageRecord": "vigil.store.records",
    "MetaEntry": "vigil.store.records",
    "NewMessage": "vigil.store.records",
    "SearchHit": "vigil.store.records",
    "SessionRecord": "vigil.store.records",
    "ToolCall": "vigil.store.records",
    "SQLiteStore": "vigil.store.sqlite",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(path_or_url: str | os.PathLike[str], *, clock: Clock | None = None) -> SessionStore:
    """Open the session store at a file path (SQLite) or a ``postgresql://`` URL.

    A string is read like the ``store.url`` setting: ``postgresql://...`` (or ``postgres://``),
    an absolute or ``~`` path, or ``sqlite:///absolute/path``; anything else (another scheme, a
    path relative to the current directory) is refused. A URL may pick the PostgreSQL schema
    with ``?schema=NAME`` (default ``vigil``).

    Raises ``StoreError`` (or a subclass) when the store cannot be opened; the message says why.
    """
    if isinstance(path_or_url, str):
        from vigil.config.store_location import store_location

        try:
            path_or_url = store_location(path_or_url)
        except ValueError as exc:
            raise StoreError(f"store.url: {exc}") from None
    if isinstance(path_or_url, str):
        try:
            from vigil.store.postgres import PostgresStore
        except ImportError as exc:  # psycopg is an optional dependency
            raise StoreError(
                f"the PostgreSQL session store needs psycopg ({exc}): install vigil[postgres]"
            ) from exc
        return PostgresStore(path_or_url, clock=clock)
    from vigil.store.sqlite import SQLiteStore

    return SQLiteStore(Path(path_or_url), clock=clock)
