"""Nothing acknowledged is lost: writer processes killed with SIGKILL in the middle of a burst
of group-committed appends, of batched cron claims or of gateway inbox entries leave every
write they acknowledged in the store, and no cron occurrence is claimed twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.schedule.cron.conftest import START
from vigil.clock import FakeClock
from vigil.schedule.cron.jobs import JobSpec, new_job
from vigil.schedule.cron.repo import CronRepo
from vigil.schedule.cron.runs import stamp_of
from vigil.store.gateway.gateway_tables import PENDING, RouteKey
from vigil.store.sqlite import SQLiteStore

DEADLINE = 120.0  # only a guard against a hang; nothing here is timed
ROOT = Path(__file__).resolve().parents[2]


def start_worker(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.store.durability_workers", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline() == "ready\n", worker.stderr.read() if worker.stderr else ""
    return worker


def read_until_killed(worker: subprocess.Popen[str], kill_after: int) -> list[list[str]]:
    """Complete lines the worker printed, killing it with SIGKILL after ``kill_after`` of
    them (a line cut off by the kill was never acknowledged)."""
    assert worker.stdout is not None
    lines: list[list[str]] = []
    try:
        while len(lines) < kill_after:
            line = worker.stdout.readline()
            assert line.endswith("\n"), worker.stderr.read() if worker.stderr else "the worker ended"
            lines.append(line.split())
        os.kill(worker.pid, signal.SIGKILL)
        rest = worker.stdout.read()
        lines += [line.split() for line in rest.splitlines(keepends=True) if line.endswith("\n")]
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait(timeout=DEADLINE)
    assert worker.returncode == -signal.SIGKILL
    return lines


def test_killed_writer_loses_no_acknowledged_append(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStore(path)
    sessions = [store.create_session(source=f"gateway-{n}").id for n in range(8)]
    store.close()

    lines = read_until_killed(start_worker("append", str(path), *sessions), kill_after=400)

    acknowledged = [(sid, int(seq), content) for kind, sid, seq, content in lines if kind == "ack"]
    assert len(acknowledged) >= 400
    store = SQLiteStore(path)
    stored = {sid: store.get_messages(sid) for sid in sessions}
    for sid, seq, content in acknowledged:
        assert stored[sid][seq - 1].content == content
    for sid, messages in stored.items():  # no gaps, nothing half-written
        assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
        assert [m.content for m in messages] == [f"{sid}-{n}" for n in range(len(messages))]
        assert store.get_session(sid).message_count == len(messages)
    store.close()


def test_killed_claimer_loses_no_claim_and_none_is_claimed_twice(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStore(path)
    repo = CronRepo(store, FakeClock(START))
    jobs = [f"j{n:03d}" for n in range(150)]
    for name in jobs:
        repo.add(new_job(name, JobSpec("* * * * *", "p", "UTC"), now=START, default_tz="UTC", skills_dir=None))
    store.close()

    first = read_until_killed(start_worker("claim", str(path), "first", str(START), "0", *jobs), kill_after=500)
    by_first = {(name, stamp) for kind, name, stamp in first if kind == "claim"}
    minutes_seen = len({stamp for _, stamp in by_first})
    assert len(by_first) >= 500 and minutes_seen >= 4

    # A second process goes over the same minutes and one more: it claims only what the
    # first never acknowledged.
    second = start_worker("claim", str(path), "second", str(START), str(minutes_seen + 1), *jobs)
    out, err = second.communicate(timeout=DEADLINE)
    assert second.returncode == 0, err
    lines = [line.split() for line in out.splitlines()]
    assert lines[-1] == ["done"] and not [line for line in lines if line[0] == "error"]
    by_second = {(name, stamp) for kind, name, stamp in lines[:-1] if kind == "claim"}
    assert not by_first & by_second

    store = SQLiteStore(path)
    repo = CronRepo(store, FakeClock(START))
    records = {(r.job, r.stamp): r for r in repo.runs.list()}
    for key in by_first:
        assert records[key].owner == "first"
    for key in by_second:
        assert records[key].owner == "second" and records[key].status == "ok"
    # Every occurrence up to the second's last minute was handled exactly once, by one of
    # them: a claim the kill cut off before its acknowledgement may be in the store (it
    # committed) but then the second did not take it again.
    last = max(stamp for _, stamp in by_second)
    handled = {key: r for key, r in records.items() if r.stamp <= last}
    per_minute = Counter(r.stamp for r in handled.values())
    minutes = len(per_minute)
    assert sorted(per_minute) == [stamp_of(START + 60 * m) for m in range(1, minutes + 1)]
    assert set(per_minute.values()) == {len(jobs)}
    assert {key for key, r in handled.items() if r.owner == "second"} == by_second
    assert {r.owner for r in handled.values()} == {"first", "second"}
    store.close()


def test_killed_gateway_loses_no_acknowledged_inbox_entry(tmp_path: Path) -> None:
    """The gateway acknowledges a platform once ``inbox_accept`` returned: whatever it
    acknowledged before a SIGKILL is in the inbox afterwards, pending, and a redelivery of it
    is recognised as one."""
    path = tmp_path / "state.db"
    SQLiteStore(path).close()

    lines = read_until_killed(start_worker("accept", str(path), "4"), kill_after=400)

    acknowledged = {external_id: int(entry_id) for kind, external_id, entry_id in lines if kind == "ack"}
    assert len(acknowledged) >= 400
    store = SQLiteStore(path)
    tables = store.gateway
    for external_id, entry_id in acknowledged.items():
        entry = tables.inbox_get(entry_id)
        assert entry is not None and entry.external_id == external_id
        assert (entry.text, entry.status) == (f"text of {external_id}", PENDING)
        chat = f"chat-{external_id[1:].partition('-')[0]}"
        again, new = tables.inbox_accept(RouteKey("web", chat), external_id, "redelivered", received_at=0.0)
        assert (again, new) == (entry, False)
    unfinished = tables.inbox_unfinished()
    assert {e.external_id for e in unfinished} >= set(acknowledged)
    for n in range(4):  # each receiver's entries are whole and in order, with no gaps
        mine = [e.external_id for e in unfinished if e.route.chat == f"chat-{n}"]
        assert mine == [f"t{n}-{i}" for i in range(len(mine))]
    store.close()
