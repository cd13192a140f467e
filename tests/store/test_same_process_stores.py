"""Several stores on one SQLite file in one process (the gateway with a CLI command run
in-process, tests): opening and closing one must not take the others' locks away."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vigil.store import SQLiteStore


def test_a_second_store_opened_and_closed_leaves_the_first_one_working(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    first = SQLiteStore(db)
    try:
        first.set_meta("k", 1)
        second = SQLiteStore(db)  # checks the file again: it must not drop the first one's locks
        assert second.get_meta("k").value == 1
        second.close()
        # another process opening and closing the file checkpoints and removes the WAL if it
        # believes nobody else has the database open
        code = f"import sqlite3; c = sqlite3.connect({str(db)!r}); c.execute('select count(*) from state_meta').fetchall(); c.close()"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
        first.set_meta("k", 2)
        third = SQLiteStore(db)
        try:
            assert third.get_meta("k").value == 2
        finally:
            third.close()
        assert first.get_meta("k").value == 2
    finally:
        first.close()
    reopened = SQLiteStore(db)
    try:
        assert reopened.get_meta("k").value == 2
    finally:
        reopened.close()
