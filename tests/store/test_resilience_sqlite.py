"""The SQLite store when its file cannot be written for a while: a full disk or a read-only
file is ``StoreUnwritable`` with the reason, nothing is stored half-way, and writes work again
by themselves once the file can be written (connections SQLite opened read-only meanwhile are
replaced). Real file systems: a small tmpfs filled up, and the immutable flag (which binds
root too, unlike permissions). Both need root and skip, saying why, without it."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from vigil.store import NewMessage
from vigil.store.errors import StoreUnwritable
from vigil.store.sqlite import SQLiteStore

def _needs_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"needs root to {what}")


@contextmanager
def small_disk(where: Path, size: str = "16m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``where`` (created) until the end of the block."""
    _needs_root("mount a small file system")
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill_up(directory: Path) -> Path:
    """Fill the file system of ``directory`` with a file, returned (delete it to free the space)."""
    filler = directory / f"filler-{uuid.uuid4().hex[:8]}"
    with open(filler, "wb", buffering=0) as out:
        chunk = b"\0" * 65536
        try:
            while True:
                out.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    assert shutil.disk_usage(directory).free < 16 * 1024
    return filler


def empty_log(path: Path) -> None:
    """Checkpoint the database at ``path`` and cut its write-ahead log to nothing, so that the
    next write has to grow the log (a log with room left takes writes on a full disk)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def written_files(path: Path) -> list[Path]:
    """The database at ``path`` and its write-ahead log: the files a write goes to. Not the
    -shm, which SQLite maps into memory: an immutable one makes its next store to that memory
    a bus error, which no process survives (a file system remounted read-only would not,
    but none can be while the store has files open for writing)."""
    return [path, path.with_name(path.name + "-wal")]


class ImmutableFlag:
    """Sets and clears the immutable flag on ``files``; skips where there is no chattr or the
    file system has no such flag (tmpfs before Linux 6.0). Clear it in any case at the end:
    pytest cannot remove an immutable file."""

    def __init__(self, files: Sequence[Path]) -> None:
        _needs_root("set the immutable flag")
        if shutil.which("chattr") is None:
            pytest.skip("needs chattr (e2fsprogs) to make a file read-only for root")
        self.files = [str(file) for file in files]

    def set(self) -> None:
        done = subprocess.run(["chattr", "+i", *self.files], capture_output=True, text=True)
        if done.returncode != 0:
            self.clear()
            pytest.skip(f"this file system has no immutable flag ({done.stderr.strip()})")

    def clear(self) -> None:
        subprocess.run(["chattr", "-i", *self.files], capture_output=True)


def _contents(store: SQLiteStore, session_id: str) -> list[str]:
    return [m.content or "" for m in store.get_messages(session_id)]


def test_a_read_only_file_refuses_writes_until_it_is_writable_again(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    session = store.create_session(source="cli")
    store.append_message(session.id, NewMessage("user", "before"))
    other = ThreadPoolExecutor(1)  # one more thread: it opens its connection while the file is read-only
    flag = ImmutableFlag(written_files(store.path))
    try:
        flag.set()
        try:
            for write in (store.append_message, lambda *a: other.submit(store.append_message, *a).result()):
                with pytest.raises(StoreUnwritable) as refused:
                    write(session.id, NewMessage("user", "during"))
                assert str(refused.value).startswith(f"the session store cannot be written: read-only: {store.path}")
            with pytest.raises(StoreUnwritable, match="read-only"):
                store.check_writable()
            assert _contents(store, session.id) == ["before"]  # reading goes on
        finally:
            flag.clear()
        store.check_writable()  # a write passes again
        store.append_message(session.id, NewMessage("user", "after"))
        other.submit(store.append_message, session.id, NewMessage("user", "after, elsewhere")).result()
    finally:
        other.shutdown()
    assert _contents(store, session.id) == ["before", "after", "after, elsewhere"]
    store.close()


def test_a_full_disk_fails_the_writes_of_every_thread_and_stores_none_until_space_is_freed(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        store = SQLiteStore(disk / "state.db")
        session = store.create_session(source="cli")
        empty_log(store.path)
        filler = fill_up(disk)
        writers = 6
        start = threading.Barrier(writers)
        errors: list[BaseException] = []

        def write(n: int) -> None:
            start.wait()
            try:
                store.append_message(session.id, NewMessage("user", f"{n} " + "y" * 20_000))
            except StoreUnwritable as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(errors) == writers
        assert all(str(e).startswith("the session store cannot be written: disk full") for e in errors), errors
        with pytest.raises(StoreUnwritable, match="disk full"):
            store.check_writable()
        assert _contents(store, session.id) == []
        filler.unlink()
        store.check_writable()
        store.append_message(session.id, NewMessage("user", "after"))
        assert _contents(store, session.id) == ["after"]
        store.close()
