"""Several gateways on one store, in one process: the worker registry, liveness of processes on
other hosts judged from it, the recovery a survivor runs, the adapter lease, the shared lock,
and `vigil gateway status` listing workers. A "worker on another host" is a record in the store
as that worker would write it; the code judging it is the real one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.cli.helpers import run_cli
from vigil.clock import FakeClock
from vigil.gateway.cluster.adapter_lease import AdapterLease
from vigil.gateway.adapters.telegram.polling import StoredOffset
from vigil.gateway.lock import GatewayRunning, acquire
from vigil.gateway.status import StatusKeeper, WorkerIdentity
from vigil.gateway.cluster.workers import WorkerWatch, is_shared, read_workers
from vigil.profiles import get_profile
from vigil.schedule.cron.jobs import JobSpec, new_job
from vigil.schedule.cron.repo import CronRepo
from vigil.schedule.heartbeat.lease import holder_key
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.schedule.liveness import Liveness, worker_key
from vigil.store import SQLiteStore, open_store
from tests.store import conftest as pg_fixtures

postgres_server, pg_schema, pg_url = pg_fixtures.postgres_server, pg_fixtures.pg_schema, pg_fixtures.pg_url

START = 1_800_000_000.0
SID = "aaaaaaaaaaaa"
FAR = "far-away-host"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "state.db", clock=clock)
    yield s
    s.close()


def far_worker(store: SQLiteStore, worker_id: str, *, pid: int = 4242, updated_at: float, lease: float = 30.0,
               state: str = "running") -> str:
    """Write the registry record a worker on another machine keeps; returns its owner name."""
    owner = f"{FAR}:{pid}:{worker_id[:8]}"
    store.set_meta(worker_key(worker_id), {
        "pid": pid, "host": FAR, "started_at": updated_at, "updated_at": updated_at, "interval": lease / 3,
        "url": None, "adapters": [], "live_conversations": 0, "armed_heartbeats": 0, "next_cron_run": None,
        "version": "x", "state": state, "worker_id": worker_id, "owner": owner, "lease": lease,
    })
    return owner


def later(clock: FakeClock, seconds: float) -> None:
    clock.set_sync(clock.now() + seconds)


def fresh_liveness(store: SQLiteStore, clock: FakeClock) -> Liveness:
    return Liveness(store, clock, snapshot_seconds=0)


# -- liveness --------------------------------------------------------------------------------

def test_a_process_elsewhere_lives_while_its_worker_record_is_fresh(store: SQLiteStore, clock: FakeClock) -> None:
    owner = far_worker(store, "w1", updated_at=clock.now(), lease=30)
    live = fresh_liveness(store, clock)
    assert live.owner_alive(owner) and live.process_alive(FAR, 4242)
    later(clock, 31)
    assert not live.owner_alive(owner) and not live.process_alive(FAR, 4242)
    assert live.owner_alive(f"{FAR}:999:unknown")  # no record at all: presumed alive, as before


def test_a_stopped_worker_is_dead_at_once_and_a_reused_pid_does_not_revive_it(store: SQLiteStore, clock: FakeClock) -> None:
    old = far_worker(store, "old", pid=1, updated_at=clock.now(), state="stopped")
    live = fresh_liveness(store, clock)
    assert not live.owner_alive(old)
    new = far_worker(store, "new", pid=1, updated_at=clock.now())  # pid 1 again, in a new container
    assert live.owner_alive(new) and not live.owner_alive(old)


def test_a_lease_holder_record_alone_decides_for_a_process_without_a_worker_record(
    store: SQLiteStore, clock: FakeClock
) -> None:
    store.set_meta(holder_key("tok"), {"kind": "repl", "pid": 77, "host": FAR, "expires_at": clock.now() + 5})
    live = fresh_liveness(store, clock)
    assert live.owner_alive(f"{FAR}:77:abcd")
    later(clock, 6)
    assert not live.owner_alive(f"{FAR}:77:abcd")


def test_a_dead_remote_workers_heartbeat_reservation_is_refunded_and_a_live_ones_kept(
    store: SQLiteStore, clock: FakeClock
) -> None:
    repo = HeartbeatRepo(store, clock, alive=fresh_liveness(store, clock).owner_alive)
    hb, _ = repo.set(SID, "check", 600)
    clock.set_sync(hb.next_due)
    owner = far_worker(store, "w1", updated_at=clock.now(), lease=30)
    assert HeartbeatRepo(store, clock, owner=owner).reserve(SID) is not None
    assert repo.refund_orphans() == []  # its worker keeps its record fresh
    later(clock, 31)  # SIGKILLed: the record is not renewed
    refunded = repo.refund_orphans()
    assert [h.session_id for h in refunded] == [SID]
    after = repo.get(SID)
    assert after.pending is None and after.fire_count == hb.fire_count and after.next_due == hb.next_due


def test_a_dead_remote_workers_cron_run_is_interrupted_and_a_due_occurrence_left_to_run(
    store: SQLiteStore, clock: FakeClock, tmp_path: Path
) -> None:
    repo = CronRepo(store, clock, alive=fresh_liveness(store, clock).owner_alive)
    repo.add(new_job("j", JobSpec(schedule="every 1h", prompt="p"), now=clock.now(), default_tz="UTC", skills_dir=None))
    later(clock, 3600)
    owner = far_worker(store, "w1", updated_at=clock.now(), lease=30)
    assert CronRepo(store, clock, owner=owner).claim_due("j").claim is not None
    assert repo.recover_abandoned() == []
    later(clock, 3600)  # the worker died; the next occurrence is due too
    assert repo.recover_abandoned() == ["j"]
    job = repo.get("j")
    assert job.running is None and job.last_status == "interrupted"
    assert job.next_due is not None and job.next_due <= clock.now()  # still due: the scheduler runs it
    assert [r.status for r in repo.runs.list("j")] == ["interrupted"]
    assert repo.claim_due("j").claim is not None


# -- the watch a live worker keeps -----------------------------------------------------------

async def test_a_worker_whose_process_is_gone_on_this_host_is_known_to_have_exited(
    store: SQLiteStore, clock: FakeClock
) -> None:
    """Only then may its reply claims be released at once: a silent worker elsewhere may
    still be sending them."""
    from vigil.schedule.heartbeat.lease import this_host

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    calls: list[tuple[list[str], list[str]]] = []

    async def recover(dead: list[str], first: bool, exited: list[str]) -> None:
        calls.append((sorted(dead), exited))

    watch = WorkerWatch(store, clock, "me", recover)
    far_worker(store, "elsewhere", updated_at=clock.now() - 10, lease=3)  # silent, on another host
    store.set_meta(worker_key("killed"), {
        "pid": int(done.stdout), "host": this_host(), "started_at": clock.now(), "updated_at": clock.now(),
        "interval": 1, "lease": 3, "state": "running", "worker_id": "killed",
        "owner": f"{this_host()}:{int(done.stdout)}:killed",
    })
    assert sorted(await watch.look()) == ["elsewhere", "killed"]
    assert calls == [(["elsewhere", "killed"], ["killed"])]


async def test_a_survivor_recovers_once_per_death_and_prunes_long_gone_records(store: SQLiteStore, clock: FakeClock) -> None:
    calls: list[list[str]] = []

    async def recover(dead: list[str], first: bool, exited: list[str]) -> None:
        calls.append(dead)
        assert exited == []  # a worker on another machine is silent, not known to have exited

    watch = WorkerWatch(store, clock, "me", recover, keep_gone=600)
    far_worker(store, "me", updated_at=clock.now(), lease=3)  # its own record is never judged
    far_worker(store, "w1", updated_at=clock.now(), lease=3)
    assert await watch.look() == [] and calls == []
    later(clock, 4)
    assert await watch.look() == ["w1"]
    assert await watch.look() == []  # recovered already
    far_worker(store, "w1", updated_at=clock.now(), lease=3)  # it was only stalled
    assert await watch.look() == []
    later(clock, 4)
    assert await watch.look() == ["w1"]
    assert calls == [["w1"], ["w1"]]
    assert store.get_meta(worker_key("w1")) is not None
    later(clock, 601)
    await watch.look()
    assert store.get_meta(worker_key("w1")) is None  # pruned


def test_status_lists_live_gone_and_stopped_workers(vigil_home: Path) -> None:
    import time

    profile = get_profile(None)
    store = open_store(profile.state_db)
    try:
        now = time.time()
        keeper = StatusKeeper(store, FakeClock(now), lambda: {"url": "http://127.0.0.1:9/", "live_conversations": 2},
                              worker=WorkerIdentity("here1", "me:1:x", 30.0))
        keeper.write("running")
        far_worker(store, "gone1", updated_at=now - 120, lease=30)
        far_worker(store, "done1", updated_at=now - 60, state="stopped")
        listed = read_workers(store, now=now)
        assert [(w.worker_id, w.state) for w in listed] == [("here1", "running"), ("done1", "stopped"), ("gone1", "gone")]
    finally:
        store.close()
    result = run_cli("gateway", "status")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "vigil gateway: 1 worker running on a shared store, 1 gone, 1 stopped."
    assert re.match(r"  worker here1: running \(pid \d+ on \S+, since ", lines[1])
    assert "    web chat:           http://127.0.0.1:9/" in lines
    assert "    live conversations: 2" in lines
    assert any(re.match(r"  worker gone1: gone since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, 2m ago \(pid 4242 on far-away-host\)", line)
               for line in lines)
    status = json.loads(run_cli("gateway", "status", "--json").output)
    assert status["running"] and status["shared"]
    assert [(w["id"], w["live"], w["state"]) for w in status["workers"]] == [
        ("here1", True, "running"), ("done1", False, "stopped"), ("gone1", False, "gone")]
    assert status["workers"][2]["gone_since"] is not None and status["workers"][0]["live_conversations"] == 2


def test_status_with_only_gone_workers_says_not_running(vigil_home: Path) -> None:
    import time

    profile = get_profile(None)
    store = open_store(profile.state_db)
    try:
        far_worker(store, "gone1", updated_at=time.time() - 120, lease=30)
    finally:
        store.close()
    result = run_cli("gateway", "status")
    assert result.exit_code == 3
    assert result.output.startswith("vigil gateway: not running (no live worker on the shared store, 1 gone).")


# -- the adapter lease -----------------------------------------------------------------------

def test_one_worker_holds_the_poll_lease_until_it_lapses_or_is_released(store: SQLiteStore, clock: FakeClock) -> None:
    first = AdapterLease(store, "telegram", token="w1", seconds=3, clock=clock)
    second = AdapterLease(store, "telegram", token="w2", seconds=3, clock=clock)
    assert first.take() and not second.take()
    assert second.other is not None and second.other.token == "w1"
    later(clock, 2)
    assert first.take() and not second.take()  # renewed
    later(clock, 3.5)  # w1 stopped renewing (dead)
    assert second.take() and not first.take()
    assert second.release() and first.take()


def test_a_poll_lease_held_by_a_dead_process_on_this_host_is_free_at_once(
    store: SQLiteStore, clock: FakeClock
) -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(done.stdout)
    from vigil.schedule.heartbeat.lease import this_host

    store.set_meta("adapter-lease:telegram", {"token": "dead", "host": this_host(), "pid": dead_pid,
                                              "taken_at": clock.now(), "expires_at": clock.now() + 30})
    assert AdapterLease(store, "telegram", token="w2", seconds=30, clock=clock).take()


def test_the_stored_offset_only_moves_forward(store: SQLiteStore) -> None:
    offsets = StoredOffset(store)
    assert offsets.load() is None
    offsets.save(10)
    offsets.save(7)  # a stalled old poller
    assert offsets.load() == 10


# -- the lock --------------------------------------------------------------------------------

def test_workers_on_a_shared_store_share_the_lock_and_an_sqlite_gateway_is_refused(vigil_home: Path) -> None:
    profile = get_profile(None)
    with acquire(profile, shared=True), acquire(profile, shared=True):
        with pytest.raises(GatewayRunning, match="shared"):
            acquire(profile)
    with acquire(profile):
        with pytest.raises(GatewayRunning, match="already running"):
            acquire(profile, shared=True)
        with pytest.raises(GatewayRunning):
            acquire(profile)


def test_only_a_postgresql_store_is_shared(store: SQLiteStore) -> None:
    assert not is_shared(store)


@pytest.mark.postgres
def test_a_postgresql_store_is_shared(pg_url: str) -> None:
    store: Any = open_store(pg_url)
    try:
        assert is_shared(store)
    finally:
        store.close()


# -- conversation leases ---------------------------------------------------------------------

def test_a_conversation_claimed_while_the_leases_are_renewed_is_not_let_go(store: SQLiteStore, clock: FakeClock) -> None:
    """The renewal runs in a worker thread while a message claims a conversation in another:
    the one just claimed must not read as taken over by someone else (the worker would close
    it under the turn it was starting)."""
    from vigil.gateway.cluster.ownership import Ownership

    ours = Ownership(store, clock, token="a" * 16, seconds=30, shared=True)
    other = Ownership(store, clock, token="b" * 16, seconds=30, shared=True)
    assert ours.claim("first") is None
    renew_reads = ours.book._read
    claimed_meanwhile: list[object] = []

    def read_while_a_message_claims(session_ids: list[str]) -> Any:
        ours.book._read = renew_reads  # type: ignore[method-assign]
        claimed_meanwhile.append(ours.claim("second"))  # the message's thread, mid-renewal
        return renew_reads(session_ids)

    ours.book._read = read_while_a_message_claims  # type: ignore[method-assign]
    assert ours.still_held() == set()
    assert claimed_meanwhile == [None] and ours.held == {"first", "second"}
    assert ours.still_held() == set() and ours.held == {"first", "second"}
    elsewhere = other.claim("second")
    assert elsewhere is not None and elsewhere.token == "a" * 16

    # A conversation really taken over (our lease lapsed while this worker stalled) is lost.
    later(clock, 31)
    assert other.claim("first") is None
    assert ours.still_held() == {"first"} and ours.held == {"second"}
