"""The SQLite session store: the store itself (``store``), its connections and file checks
(``conn``), group commit (``group``), the state-meta queries (``meta``) and the schema
(``migrations``)."""

from vigil.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
