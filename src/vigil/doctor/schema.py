"""A store's schema version against the migrations this vigil knows (both backends)."""

from __future__ import annotations

from typing import Any, Sequence

from vigil.doctor.result import CheckResult, ok, problem, warning

AREA = "store"
UPGRADE = "pip install --upgrade vigil   (or run the vigil that wrote it)"


def check_version(
    version: int, migrations: Sequence[Any], where: str, *, backup: str | None = None
) -> CheckResult:
    """``migrations``: the backend's ``MIGRATIONS`` (each with ``version`` and ``name``).

    Pending migrations are only reported: vigil applies them the next time it opens the store.
    """
    latest = migrations[-1].version if migrations else 0
    if version > latest:
        return problem(
            AREA,
            "schema",
            f"schema {version} was written by a newer vigil: this vigil is older than the store "
            f"(it knows up to schema {latest}) and refuses to open it",
            UPGRADE,
        )
    if version == latest:
        return ok(AREA, "schema", f"schema {version}, the one this vigil expects; no migration pending")
    pending = [m for m in migrations if m.version > version]
    names = "; ".join(f"{m.version}: {m.name}" for m in pending)
    if version == 0:
        return ok(AREA, "schema", f"empty: the first use creates the schema ({len(pending)} migrations)")
    then = f" back it up first if you like: {backup}" if backup else ""
    return warning(
        AREA,
        "schema",
        f"schema {version}, this vigil expects {latest}: {len(pending)} migration(s) pending ({names})",
        f"vigil applies them the next time it opens the store (any command that uses it);{then}",
    )
