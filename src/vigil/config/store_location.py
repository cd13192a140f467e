"""What ``store.url`` may name: a PostgreSQL URL or the absolute path of an SQLite file.

Shared by the config (checked when config.yaml loads or ``config set`` runs) and by
``vigil.store.open_store``, so both accept and refuse exactly the same strings.
"""

from __future__ import annotations

import re
from pathlib import Path

from vigil.masking import mask_secrets, printable

STORE_URL_FORMS = (
    "postgresql://USER@HOST/DB (or postgres://...), an absolute path such as "
    "/srv/vigil/state.db or ~/vigil/state.db, or sqlite:///absolute/path/state.db"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def store_location(url: str) -> str | Path:
    """Where ``url`` points: a ``postgresql://`` URL (returned as it is) or the absolute path
    of an SQLite file (``~`` expanded). ``ValueError`` naming the accepted forms for anything
    else: another scheme, or a path relative to the current directory."""
    if _CONTROL.search(url):
        raise ValueError(f"the store location must be one line without control characters; use {STORE_URL_FORMS}")
    lowered = url.lower()
    if lowered.startswith(("postgresql://", "postgres://")):
        return url
    if lowered.startswith("sqlite://"):
        path = url[len("sqlite://") :]
        if path.startswith("/") and len(path) > 1:
            return Path(path)
        raise ValueError(
            f"'{printable(mask_secrets(url))}' is not sqlite:///absolute/path; use {STORE_URL_FORMS}"
        )
    if "://" in url:
        raise ValueError(
            f"'{printable(mask_secrets(url))}' is not a supported store (only PostgreSQL and SQLite); "
            f"use {STORE_URL_FORMS}"
        )
    path = Path(url).expanduser() if url.startswith("~") else Path(url)
    if not path.is_absolute():
        raise ValueError(
            f"'{printable(url)}' is a relative path (it would depend on the current directory); "
            f"use {STORE_URL_FORMS}"
        )
    return path
