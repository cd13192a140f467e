"""The in-process scheduler on a fake clock: DST days, restarts, changes from other processes,
the emergency stop, overlap, and how rarely it wakes."""

from __future__ import annotations

import asyncio
import json

from tests.cli.helpers import run_cli
from tests.schedule.cron.conftest import START, AddJob, MakeRunner, at, settle
from vigil.clock import FakeClock
from vigil.profiles import Profile
from vigil.schedule import estop
from vigil.schedule.cron.jobs import JobSpec, new_job
from vigil.schedule.cron.repo import Claim, CronRepo
from vigil.schedule.cron.runs import RunRecord
from vigil.schedule.cron.scheduler import CronScheduler
from vigil.schedule.engine import MAX_SLEEP
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply


async def walk(clock: FakeClock, scheduler: CronScheduler, until: float, step: float) -> None:
    while clock.now() < until:
        await clock.set(min(until, clock.now() + step))
        await settle(scheduler)


def recorder() -> tuple[list[Claim], object]:
    claims: list[Claim] = []

    async def execute(claim: Claim) -> RunRecord:
        claims.append(claim)
        record = claim.record.finished("ok", 0.0)
        await asyncio.to_thread(lambda: None)
        return record

    return claims, execute


async def finish_all(repo: CronRepo, claims: list[Claim]) -> None:
    for claim in claims:
        await asyncio.to_thread(repo.finish, claim, claim.record.finished("ok", repo.clock.now()))


async def test_daylight_saving_days_run_once_each(
    fake_model: FakeModelServer, store: SQLiteStore, profile: Profile, make_runner: MakeRunner,
) -> None:
    clock = FakeClock(at("2026-03-28 12:00", "Europe/Berlin"))
    repo = CronRepo(store, clock)
    repo.add(new_job("night", JobSpec("30 2 * * *", "nightly", "Europe/Berlin"), now=clock.now(),
                     default_tz="UTC", skills_dir=None))
    runner = await make_runner()
    runner.clock = clock
    runner.repo = repo
    scheduler = CronScheduler(repo, runner.execute, clock=clock, poll_interval=0)
    await scheduler.start()
    await walk(clock, scheduler, at("2026-03-31 12:00", "Europe/Berlin"), 1800)
    spring = [r.occurrence for r in repo.runs.list("night")]
    await clock.set(at("2026-10-24 12:00", "Europe/Berlin"))
    await settle(scheduler)  # the long gap: one coalesced catch-up run
    await walk(clock, scheduler, at("2026-10-26 12:00", "Europe/Berlin"), 900)
    await scheduler.stop()
    assert sorted(spring) == [at("2026-03-29 01:00"), at("2026-03-30 00:30"), at("2026-03-31 00:30")]  # type: ignore[type-var]
    autumn = [r for r in repo.runs.list("night") if (r.occurrence or 0) > at("2026-10-24 12:00")]
    assert sorted(r.occurrence for r in autumn) == [at("2026-10-25 00:30"), at("2026-10-26 01:30")]  # type: ignore[type-var]
    assert all(r.status == "ok" for r in repo.runs.list("night"))


async def test_restart_catches_up_once_or_skips(
    store: SQLiteStore, clock: FakeClock, repo: CronRepo, add_job: AddJob, vigil_home: object,
) -> None:
    add_job("catchup", "every 1h")
    add_job("skipper", "every 1h", catch_up="skip")
    claims, execute = recorder()
    first = CronScheduler(repo, execute, clock=clock, poll_interval=0)  # type: ignore[arg-type]
    await first.start()
    await walk(clock, first, START + 3600, 600)
    await finish_all(repo, claims)
    await first.stop()
    assert sorted(c.job.name for c in claims) == ["catchup", "skipper"]

    await clock.set(START + 6 * 3600 + 45 * 60)  # down for five occurrences, the last beyond its grace
    claims.clear()
    second = CronScheduler(repo, execute, clock=clock, poll_interval=0)  # type: ignore[arg-type]
    await second.start()
    await settle(second)
    await finish_all(repo, claims)
    await second.stop()
    assert [(c.job.name, c.record.coalesced) for c in claims] == [("catchup", 4)]
    shown = json.loads(run_cli("cron", "runs", "--json").output)
    assert sorted((r["job"], r["status"], r["coalesced"]) for r in shown) == [
        ("catchup", "ok", 0),
        ("catchup", "ok", 4),
        ("skipper", "ok", 0),
        ("skipper", "skipped-missed", 4),
    ]


async def test_jobs_added_elsewhere_are_noticed_through_the_generation(
    store: SQLiteStore, profile: Profile, clock: FakeClock, repo: CronRepo,
) -> None:
    claims, execute = recorder()
    scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=15)  # type: ignore[arg-type]
    assert await scheduler.start() == 0
    other_store = SQLiteStore(profile.state_db)
    try:
        other = CronRepo(other_store, clock)
        other.add(new_job("late", JobSpec("every 1m", "p"), now=clock.now(), default_tz="UTC", skills_dir=None))
        await walk(clock, scheduler, START + 60, 15)
        assert [c.job.name for c in claims] == ["late"]
        await finish_all(repo, claims)
        other.pause("late")
        await walk(clock, scheduler, START + 300, 15)
        assert len(claims) == 1
    finally:
        await scheduler.stop()
        other_store.close()


async def test_the_emergency_stop_parks_every_job(
    store: SQLiteStore, clock: FakeClock, repo: CronRepo, add_job: AddJob,
) -> None:
    add_job("j", "every 10m")  # grace 5m
    claims, execute = recorder()
    scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=15)  # type: ignore[arg-type]
    await scheduler.start()
    estop.engage(store, clock.now(), reason="test")
    await walk(clock, scheduler, START + 1200, 15)
    assert claims == [] and (await scheduler.tick()).stopped
    estop.release(store)
    await walk(clock, scheduler, START + 1230, 15)
    await scheduler.stop()
    assert [c.record.occurrence for c in claims] == [START + 1200]  # the newest, within its grace


async def test_a_run_still_going_makes_the_next_occurrence_skip(
    fake_model: FakeModelServer, clock: FakeClock, repo: CronRepo, add_job: AddJob, make_runner: MakeRunner,
) -> None:
    add_job("slow", "every 1m")
    runner = await make_runner()
    fake_model.queue(Reply.text("slow answer", delay=0.5))
    scheduler = CronScheduler(repo, runner.execute, clock=clock, poll_interval=0)
    await scheduler.start()
    await clock.set(START + 60)
    await fake_model.wait_for_requests_async(1)
    await clock.set(START + 120)
    await settle(scheduler)
    await scheduler.stop()
    statuses = sorted((r.stamp, r.status) for r in repo.runs.list("slow"))
    assert [s for _, s in statuses] == ["ok", "skipped-overlap"]


async def test_an_idle_scheduler_sleeps_until_the_next_due_time(
    store: SQLiteStore, clock: FakeClock, repo: CronRepo, add_job: AddJob,
) -> None:
    for n in range(50):
        add_job(f"daily{n}", f"{n % 60} 3 * * *")
    claims, execute = recorder()
    scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=0)  # type: ignore[arg-type]
    assert await scheduler.start() == 50
    stats = scheduler.engine.stats
    woken, fired = stats.wakeups, stats.fired
    await walk(clock, scheduler, START + 12 * 3600, 300)  # 12 idle hours in 5-minute steps
    # The engine re-reads the wall clock at least every MAX_SLEEP seconds (to notice clock
    # jumps), so each 5-minute step may wake it once; what matters is that nothing fires and
    # the wake-ups do not grow with the 50 jobs.
    assert stats.fired == fired and stats.wakeups - woken <= 12 * 3600 / min(300, MAX_SLEEP)
    await walk(clock, scheduler, START + 20 * 3600, 600)  # through 03:00 next day
    await scheduler.stop()
    assert len(claims) == 50


async def test_tick_runs_what_is_due_once(clock: FakeClock, repo: CronRepo, add_job: AddJob) -> None:
    add_job("a", "every 1h")
    add_job("b", "every 2h")
    claims, execute = recorder()
    scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=0)  # type: ignore[arg-type]
    clock.set_sync(START + 3600)
    report = await scheduler.tick()
    assert [r.job for r in report.runs] == ["a"]
    await finish_all(repo, claims)
    assert (await scheduler.tick()).runs == ()


async def test_start_up_recovers_runs_of_dead_processes(
    store: SQLiteStore, clock: FakeClock, add_job: AddJob,
) -> None:
    add_job("j", "every 1h")
    clock.set_sync(START + 3600)
    dead = CronRepo(store, clock, owner="gone:1:x", alive=lambda owner: False)
    assert dead.claim_due("j").claim is not None
    claims, execute = recorder()
    repo = CronRepo(store, clock, alive=lambda owner: owner != "gone:1:x")
    scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=0)  # type: ignore[arg-type]
    assert await scheduler.start() == 1
    assert scheduler.engine.due_of("j") == START + 7200
    await scheduler.stop()
    assert scheduler.stats.recovered == 1 and claims == []
    assert [r.status for r in repo.runs.list("j")] == ["interrupted"]
    assert repo.get("j").state == "active"


async def test_a_fast_failing_job_backs_off_without_spinning(
    store: SQLiteStore, clock: FakeClock, repo: CronRepo, add_job: AddJob,
) -> None:
    """Wake-ups land a fraction of a second after the due time and the run fails at once (the
    gateway's no-model case): the scheduler waits for the next allowed occurrence each time."""
    add_job("flaky", "every 1m")
    attempts: list[float] = []

    async def fail_fast(claim: Claim) -> RunRecord:
        attempts.append(clock.now())
        record = claim.record.finished("failed", clock.now() + 0.1, error="no model is configured")
        await asyncio.to_thread(repo.finish, claim, record, error=record.error)
        return record

    scheduler = CronScheduler(repo, fail_fast, clock=clock, poll_interval=0)
    await scheduler.start()
    for _ in range(200):
        due = scheduler.engine.due_of("flaky")
        assert due is not None and due > clock.now()
        if due > START + 16 * 60:
            break
        await clock.set(due + 0.3)
        await settle(scheduler, timeout=3)
    await scheduler.stop()
    assert [round((t - START) / 60) for t in attempts] == [1, 2, 4, 8, 16]
    # One fire per attempt and one per back-off (which re-arms at the next attempt).
    assert (scheduler.engine.stats.fired, scheduler.stats.claims, scheduler.stats.skipped) == (8, 5, 3)


async def test_a_stop_engaged_by_another_process_parks_the_job_until_released(
    store: SQLiteStore, profile: Profile, clock: FakeClock, repo: CronRepo, add_job: AddJob,
    fake_model: FakeModelServer, make_runner: MakeRunner,
) -> None:
    """`vigil pause` elsewhere: the runner refunds the first claim; the scheduler must not
    re-arm the restored (past) due time and claim again until its poll sees the stop."""
    add_job("j", "every 1m")
    runner = await make_runner()
    scheduler = CronScheduler(repo, runner.execute, clock=clock, poll_interval=15)
    await scheduler.start()
    other = SQLiteStore(profile.state_db)
    try:
        estop.engage(other, clock.now(), reason="elsewhere")
        await clock.set(START + 60)  # due before the watcher has polled
        await settle(scheduler, timeout=3)
        assert (scheduler.stats.claims, scheduler.stats.stopped) == (1, 1)
        assert scheduler.engine.due_of("j") is None and repo.get("j").next_due == START + 60
        await walk(clock, scheduler, START + 100, 5)  # polls while the stop is on
        assert scheduler.stats.claims == 1 and repo.runs.list("j") == []
        fake_model.queue("done")
        estop.release(other)
        await walk(clock, scheduler, START + 115, 5)  # the next poll re-arms it
    finally:
        await scheduler.stop()
        other.close()
    assert scheduler.stats.claims == 2
    # The occurrence the stop held back is still within its grace, so it runs late.
    assert [(r.status, r.occurrence) for r in repo.runs.list("j")] == [("ok", START + 60)]


async def test_a_burst_is_claimed_in_one_commit_and_runs_within_the_bound(
    repo: CronRepo, add_job: AddJob, clock: FakeClock, store: SQLiteStore
) -> None:
    for n in range(12):
        add_job(f"hourly-{n:02d}", "0 * * * *")
    running, most = 0, 0
    release = asyncio.Event()

    async def execute(claim: Claim) -> RunRecord:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        record = claim.record.finished("ok", clock.now())
        await asyncio.to_thread(repo.finish, claim, record)
        return record

    scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=0, max_concurrent=3)
    await scheduler.start()
    commits = store.group_commit.commits
    await clock.set(START + 3600)
    for _ in range(200):  # until the claims are in and the first runs wait
        await asyncio.sleep(0.005)
        if scheduler.stats.claims == 12 and running == 3:
            break
    assert scheduler.stats.claims == 12 and store.group_commit.commits == commits + 1
    jobs = repo.list()
    assert all(job.running is not None for job in jobs)  # all twelve claimed at once
    release.set()
    await settle(scheduler)
    assert most == 3  # ... and run three at a time
    assert sorted(r.job for r in repo.runs.list() if r.status == "ok") == [f"hourly-{n:02d}" for n in range(12)]
    await scheduler.stop()


async def test_claims_still_waiting_for_a_slot_at_stop_are_given_back(
    repo: CronRepo, add_job: AddJob, clock: FakeClock
) -> None:
    for n in range(4):
        add_job(f"hourly-{n}", "0 * * * *")
    started: list[str] = []

    async def execute(claim: Claim) -> RunRecord:
        started.append(claim.job.name)
        await asyncio.Event().wait()  # runs until cancelled
        raise AssertionError("unreachable")

    scheduler = CronScheduler(repo, execute, clock=clock, poll_interval=0, max_concurrent=1)
    await scheduler.start()
    await clock.set(START + 3600)
    for _ in range(200):
        await asyncio.sleep(0.005)
        if scheduler.stats.claims == 4 and started:
            break
    await scheduler.stop(grace=0)
    assert scheduler.stats.claims == 4 and len(started) == 1  # all claimed, one slot
    waiting = [job for job in repo.list() if job.name not in started]
    # Given back: due again at the occurrence they never ran for, with no run record left.
    assert [(job.running, job.next_due) for job in waiting] == [(None, START + 3600)] * 3
    assert {r.job for r in repo.runs.list()} == set(started)
