"""The PostgreSQL session store: the store itself (``store``), its connection pool and target
parsing (``conn``), the state-meta queries (``meta``), the schema (``migrations``), full-text
search (``search``) and the escaping of text PostgreSQL cannot hold (``text``)."""

from vigil.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
