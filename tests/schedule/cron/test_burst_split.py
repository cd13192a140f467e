"""Workers sharing one store (SQLite and PostgreSQL) that wake up for the same burst split
it: every occurrence is claimed and finished once, and on PostgreSQL every worker claims part
of it."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from tests.schedule.cron.conftest import START, AddJob
from vigil.clock import FakeClock
from vigil.schedule.changes import bump_generation
from vigil.schedule.cron.jobs import JobSpec, job_key, new_job
from vigil.schedule.cron.plan import claim_chunks
from vigil.schedule.cron.repo import Claim, CronRepo
from vigil.schedule.cron.runs import RunRecord
from vigil.schedule.cron.scheduler import CronScheduler
from vigil.store import SessionStore, SQLiteStore, open_store
from vigil.store.records import MetaSwap

JOBS = 300
CHUNK = 20
WORKERS = 3
OWNERS = [f"host:{n}:burst" for n in range(WORKERS)]


def test_workers_racing_for_one_burst_split_it_and_claim_each_occurrence_once(
    store_location: str, shared_store: SessionStore
) -> None:
    jobs = [
        new_job(f"hourly-{n:04d}", JobSpec("0 * * * *", "p", "UTC"), now=START, default_tz="UTC", skills_dir=None)
        for n in range(JOBS)
    ]
    shared_store.compare_and_set_many([MetaSwap(job_key(job.name), None, job.to_json()) for job in jobs])
    bump_generation(shared_store)
    clock = FakeClock(START + 3600)  # every job due on this second
    claimed: list[tuple[str, str, float]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    go = threading.Barrier(WORKERS)

    def worker(owner: str) -> None:
        store = open_store(store_location)  # a store object of its own, as a process has
        repo = CronRepo(store, clock, owner=owner, alive=lambda _owner: True)

        async def execute(claim: Claim) -> RunRecord:
            with lock:
                claimed.append((owner, claim.job.name, claim.record.occurrence or 0))
            record = claim.record.finished("ok", clock.now())
            repo.finish(claim, record)
            return record

        async def tick() -> None:
            scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=0, claim_chunk=CHUNK)
            go.wait()
            await scheduler.tick()

        try:
            asyncio.run(tick())
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=worker, args=(owner,)) for owner in OWNERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures

    assert Counter((name, at) for _, name, at in claimed) == {(job.name, START + 3600): 1 for job in jobs}
    if store_location.startswith("postgresql"):
        # Row locks: workers on different chunks do not wait for each other, and every one of
        # them gets its share. (SQLite has one writer at a time: one that waits for the file
        # lock may find the whole burst taken when it gets it.)
        per_worker = Counter(owner for owner, _, _ in claimed)
        assert set(per_worker) == set(OWNERS), per_worker
    records = CronRepo(shared_store, clock).runs.list()
    assert sorted((r.job, r.status, r.occurrence) for r in records) == [
        (job.name, "ok", START + 3600) for job in jobs
    ]
    after = CronRepo(shared_store, clock).list()
    assert {(job.running, job.next_due, job.runs) for job in after} == {(None, START + 7200, 1)}


def test_each_worker_takes_every_chunk_of_a_burst_in_an_order_of_its_own() -> None:
    names = [f"job-{n:04d}" for n in range(1000)]
    orders = [claim_chunks(list(reversed(names)), owner, 100) for owner in OWNERS]
    for chunks in orders:
        assert sorted(name for chunk in chunks for name in chunk) == names  # each job once
        assert len(chunks) == 10 and {len(chunk) for chunk in chunks} == {100}
    # Cut alike, taken in different orders.
    assert len({tuple(map(tuple, sorted(chunks))) for chunks in orders}) == 1
    assert len({chunks[0][0] for chunks in orders}) == WORKERS
    assert [len(c) for c in claim_chunks(names[:201], OWNERS[0], 100)] == [67, 67, 67]
    assert claim_chunks(names[:5], OWNERS[0], 100) == [names[:5]]  # a small burst: one batch


async def test_a_burst_bigger_than_a_chunk_costs_a_commit_per_chunk(
    repo: CronRepo, add_job: AddJob, clock: FakeClock, store: SQLiteStore
) -> None:
    for n in range(25):
        add_job(f"hourly-{n:02d}", "0 * * * *")
    handed: list[str] = []

    async def execute(claim: Claim) -> RunRecord:  # the run is left going
        handed.append(claim.job.name)
        return claim.record

    scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=0, claim_chunk=10)
    clock.set_sync(START + 3600)
    commits = store.group_commit.commits
    await scheduler.tick()
    assert sorted(handed) == [f"hourly-{n:02d}" for n in range(25)]
    assert store.group_commit.commits == commits + 3  # chunks of 9, 8 and 8, a commit each
    assert all(job.running is not None for job in repo.list())
