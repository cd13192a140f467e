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


_CLOSE_UNDER_READERS = """
import sys, threading
from vigil.store import NewMessage, SQLiteStore, StoreError
store = SQLiteStore(sys.argv[1], durable=False)
session = store.create_session(source="cli")
for n in range(200):
    store.append_message(session.id, NewMessage("user", "x" * 200))
stop = threading.Event()
errors = []
def read():
    while not stop.is_set():
        try:
            store.get_messages(session.id)
            store.gateway.outbox_next_due()
        except StoreError:
            return
for _ in range(4):
    threading.Thread(target=read, daemon=True).start()
import random, time; time.sleep(random.Random(int(sys.argv[2])).random() * 0.05)
store.close()
stop.set()
print("closed cleanly")
"""


def test_closing_a_store_while_other_threads_read_it_does_not_crash_the_process(tmp_path: Path) -> None:
    # The crash (SIGSEGV in the sqlite3 module) was a race: about one run in ten hit it.
    for attempt in range(30):
        db = tmp_path / f"state-{attempt}.db"
        result = subprocess.run(
            [sys.executable, "-c", _CLOSE_UNDER_READERS, str(db), str(attempt)], capture_output=True, text=True,
            timeout=60,
        )
        assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
        assert "closed cleanly" in result.stdout
