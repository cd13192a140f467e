"""The SQLite store, looked at without changing it: the file, its schema version, WAL mode,
permissions, free disk space and damaged prompts.

Opening the store the ordinary way would migrate it, so the file is read here directly. A
connection with ``mode=ro`` still creates the ``-wal`` and ``-shm`` files beside a WAL
database when they are missing (and leaves them), so they are used only when already there
(a process has the store open); otherwise the file has been checkpointed whole and is read
as ``immutable``, which creates nothing.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import stat
from contextlib import closing
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

from vigil.doctor.prompts import check_damaged_prompts, not_checked
from vigil.doctor.result import CheckResult, ok, problem, warning
from vigil.safe_files import UnsafeFile, read_bytes
from vigil.store.records import MetaEntry

AREA = "store"
BUSY_SECONDS = 2.0
"""How long a read waits for a lock another process holds (a writer checkpointing)."""
LOW_DISK = 1 << 30
VERY_LOW_DISK = 100 << 20
_HEADER = b"SQLite format 3\x00"


def check_sqlite(path: Path) -> list[CheckResult]:
    """Every SQLite check, in order; later ones are skipped when the file cannot be read."""
    shown = shlex.quote(str(path))
    space = _disk_space(path)
    try:
        head = read_bytes(path, 100)
    except UnsafeFile as exc:
        return [problem(AREA, "session database", str(exc), f"move it aside: mv {shown} {shown}.broken"), space]
    if head is None:
        folder = _nearest_existing(path.parent)
        if not os.access(folder, os.W_OK | os.X_OK):
            return [
                problem(AREA, "session database", f"{path} does not exist and {folder} is not writable"),
                space,
            ]
        return [
            ok(AREA, "session database", f"{path} does not exist yet: the first command that needs it creates it"),
            space,
        ]
    if head.size == 0:
        return [
            ok(AREA, "session database", f"{path} is empty: the first command that needs it creates the schema"),
            space,
        ]
    refused = _refusal(path, head.data, head.size)
    if refused is not None:
        return [
            problem(
                AREA, "session database", refused, f"move it aside or restore a backup: mv {shown} {shown}.broken"
            ),
            space,
        ]
    try:
        with closing(connect_read_only(path)) as conn:
            inside = _inside(conn, path)
    except sqlite3.Error as exc:
        return [
            problem(
                AREA,
                "session database",
                f"{path} cannot be read: {exc}",
                f"restore it from a backup, or move it aside: mv {shown} {shown}.broken",
            ),
            space,
        ]
    opens = ok(AREA, "session database", f"{path} opens ({head.size:,} bytes)")
    return [opens, _wal_mode(head.data), *inside, _permissions(path), space]


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write to ``path`` nor create anything beside it."""
    sidecars = all(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
    mode = "mode=ro" if sidecars else "mode=ro&immutable=1"
    conn = sqlite3.connect(f"file:{quote(str(path))}?{mode}", uri=True, timeout=BUSY_SECONDS, isolation_level=None)
    conn.execute("PRAGMA query_only = ON")
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    """The applied migration level, as the store reads it (read-only)."""
    from vigil.store.sqlite.migrations import applied_version

    return applied_version(conn)


def read_meta(path: Path, key: str) -> MetaEntry | None:
    """The ``state_meta`` entry under ``key``, or ``None`` (also for a store not created yet)."""
    from vigil.store.sqlite import meta

    if not path.is_file():
        return None
    with closing(connect_read_only(path)) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'state_meta'").fetchone():
            return None
        return meta.get(conn, key)


def _inside(conn: sqlite3.Connection, path: Path) -> list[CheckResult]:
    from vigil.doctor.schema import check_version

    version = schema_version(conn)
    if (
        version == 0
        and conn.execute("SELECT 1 FROM sqlite_master WHERE name NOT LIKE 'sqlite%' LIMIT 1").fetchone()
    ):
        return [
            problem(
                AREA,
                "schema",
                f"{path} is an SQLite database of some other program, not a vigil session database",
                "point store.url elsewhere, or move the file aside",
            )
        ]
    from vigil.store.sqlite.migrations import MIGRATIONS

    result = check_version(
        version, MIGRATIONS, str(path), backup=f"cp {shlex.quote(str(path))} {shlex.quote(str(path))}.bak"
    )
    found = [result]
    if version == MIGRATIONS[-1].version:
        found.append(check_damaged_prompts(lambda sql, params: _rows(conn, sql, params)))
    else:
        found.append(not_checked(version, MIGRATIONS[-1].version))
    return found


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(sql, tuple(params)).fetchall()


def _refusal(path: Path, data: bytes, size: int) -> str | None:
    """Why ``path`` is not a database the store would open, or ``None``."""
    if not data:
        return f"{path} cannot be read"
    if data[: len(_HEADER)] != _HEADER:
        return f"{path} is not an SQLite file"
    page = int.from_bytes(data[16:18], "big") if len(data) >= 18 else 0
    page = 65536 if page == 1 else page
    if len(data) < 100 or not (512 <= page <= 65536 and page & (page - 1) == 0) or size % page:
        return f"{path} is damaged: {size:,} bytes is not a whole number of database pages"
    return None


def _wal_mode(header: bytes) -> CheckResult:
    # Bytes 18 and 19 (write and read format) are 2 in WAL mode, which persists in the file.
    if len(header) >= 20 and header[18] == 2 and header[19] == 2:
        return ok(AREA, "WAL mode", "on (readers and the writer do not block each other)")
    return warning(
        AREA,
        "WAL mode",
        "off: the store turns it on the next time vigil opens it",
        "run any vigil command that uses the store, e.g. `vigil sessions list`",
    )


def _permissions(path: Path) -> CheckResult:
    loose = []
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            info = file.stat()
        except FileNotFoundError:
            continue
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            loose.append((file, mode))
        if info.st_uid != os.getuid():
            return warning(
                AREA,
                "permissions",
                f"{file} belongs to another user (uid {info.st_uid})",
                f"run vigil as that user, or: sudo chown {os.getuid()} {shlex.quote(str(file))}",
            )
    if not os.access(path, os.R_OK | os.W_OK):
        return problem(
            AREA,
            "permissions",
            f"{path} is not readable and writable by this user",
            f"chmod 600 {shlex.quote(str(path))}",
        )
    if loose:
        names = ", ".join(f"{f.name} ({m:04o})" for f, m in loose)
        return warning(
            AREA,
            "permissions",
            f"readable by other users: {names} (it holds every conversation)",
            "chmod 600 " + " ".join(shlex.quote(str(f)) for f, _ in loose),
        )
    return ok(AREA, "permissions", "private to this user (0600)")


def _disk_space(path: Path) -> CheckResult:
    folder = _nearest_existing(path.parent)
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        return warning(AREA, "disk space", f"cannot tell the free space at {folder}: {exc.strerror or exc}")
    shown = _size(free)
    if free < VERY_LOW_DISK:
        return problem(
            AREA,
            "disk space",
            f"only {shown} free at {folder}: writes will soon fail",
            f"free some space: du -sh {shlex.quote(str(folder))}/* | sort -h | tail",
        )
    if free < LOW_DISK:
        return warning(AREA, "disk space", f"{shown} free at {folder}", "free some space before it runs out")
    return ok(AREA, "disk space", f"{shown} free at {folder}")


def _nearest_existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"
