"""The session store the profile uses, checked by its backend (never migrated, never written)."""

from __future__ import annotations

from pathlib import Path

from vigil.doctor.result import NEEDS_CONFIG, CheckResult, Subject, skipped
from vigil.store.records import MetaEntry
from vigil.config.store_location import store_location


def location(subject: Subject) -> str | Path | None:
    """The store's ``postgresql://`` URL or SQLite path (``None`` without settings)."""
    if subject.settings is None:
        return None
    url = subject.settings.store.url
    return store_location(url) if url else subject.profile.state_db


def check_store(subject: Subject) -> list[CheckResult]:
    where = location(subject)
    if where is None:
        return [skipped("store", "session store", NEEDS_CONFIG)]
    if isinstance(where, Path):
        from vigil.doctor.sqlite import check_sqlite

        return check_sqlite(where)
    from vigil.doctor.postgres import check_postgres

    return check_postgres(where)


def list_meta(subject: Subject, prefix: str) -> list[MetaEntry]:
    """The ``state_meta`` entries under ``prefix``, read without opening the store; only a
    PostgreSQL store has any doctor lists (the records of several gateway workers)."""
    where = location(subject)
    if where is None or isinstance(where, Path):
        return []
    from vigil.doctor.postgres import list_meta as postgres_list

    return postgres_list(where, prefix)


def read_meta(subject: Subject, key: str) -> MetaEntry | None:
    """A ``state_meta`` entry read without opening (and so migrating) the store."""
    where = location(subject)
    if where is None:
        return None
    if isinstance(where, Path):
        from vigil.doctor.sqlite import read_meta as sqlite_meta

        return sqlite_meta(where, key)
    from vigil.doctor.postgres import read_meta as postgres_meta

    return postgres_meta(where, key)
