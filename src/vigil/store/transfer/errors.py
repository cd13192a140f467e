"""What can stop ``vigil store migrate``, each with a message a person can act on."""

from __future__ import annotations

from vigil.store.errors import StoreError


class MigrateError(StoreError):
    """The migrate cannot start or go on (a bad source or target); nothing more was written."""


class TargetNotEmpty(MigrateError):
    """The target already holds a vigil store (or another source's unfinished migrate) and
    ``--force`` was not given; nothing was written."""
