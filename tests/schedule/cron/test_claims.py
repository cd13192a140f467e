"""Claiming occurrences in the store: grace, coalescing, catch-up, overlap, back-off, repeat,
pause/resume, manual runs, refunds and recovery — all on a fake clock, without a model."""

from __future__ import annotations

import threading
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.schedule.cron.conftest import START, AddJob, at
from vigil.clock import FakeClock
from vigil.schedule.cron import plan as cron_plan
from vigil.schedule.cron.errors import JobBusy
from vigil.schedule.cron.format import backoff_text
from vigil.schedule.cron.jobs import JobSpec, new_job
from vigil.schedule.cron.repo import Claim, CronRepo
from vigil.schedule.cron.runs import FAILED, KEEP_PER_JOB, OK, RunRecord
from vigil.store import SessionStore, SQLiteStore, open_store


def finish(repo: CronRepo, claim: Claim, status: str = OK) -> None:
    repo.finish(claim, claim.record.finished(status, repo.clock.now()), error="boom" if status == FAILED else None)


def test_on_time_and_late_within_grace(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("j", "every 1h")  # grace = 30m
    assert repo.claim_due("j").claim is None  # not due yet
    clock.set_sync(START + 3600 + 20 * 60)  # 20 minutes late
    result = repo.claim_due("j")
    assert result.claim is not None and result.claim.record.occurrence == START + 3600
    assert result.claim.record.late == 20 * 60 and "late (within the grace)" in result.claim.record.detail
    assert result.job is not None and result.job.next_due == START + 7200
    assert repo.claim_due("j").claim is None  # the same occurrence is never claimed twice


def test_long_outage_runs_once_coalesced(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("j", "every 1h")
    clock.set_sync(START + 5 * 3600 + 45 * 60)  # occurrences 1..5 missed; the last by 45m > grace
    claim = repo.claim_due("j").claim
    assert claim is not None
    assert claim.record.occurrence == START + 5 * 3600
    assert claim.record.coalesced == 4 and "caught up" in claim.record.detail
    finish(repo, claim)
    assert repo.get("j").next_due == START + 6 * 3600
    assert [r.status for r in repo.runs.list("j")] == ["ok"]


def test_long_outage_is_skipped_with_catch_up_skip(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("j", "every 1h", catch_up="skip")
    clock.set_sync(START + 5 * 3600 + 45 * 60)
    result = repo.claim_due("j")
    assert result.claim is None
    assert [(r.status, r.coalesced) for r in result.records] == [("skipped-missed", 4)]
    assert repo.get("j").next_due == START + 6 * 3600
    # Late but within the grace still runs, even with catch_up: skip.
    clock.set_sync(START + 6 * 3600 + 10 * 60)
    assert repo.claim_due("j").claim is not None


def test_per_job_grace(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("strict", "every 1h", catch_up="skip", grace="5m")
    clock.set_sync(START + 3600 + 6 * 60)
    assert repo.claim_due("strict").records[0].status == "skipped-missed"


def test_one_shot_runs_once_or_is_retired_as_missed(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("soon", "20m")  # grace 10m
    add_job("later", "20m")
    clock.set_sync(START + 25 * 60)
    claim = repo.claim_due("soon").claim
    assert claim is not None and claim.job.retired == "done" and claim.job.next_due is None
    finish(repo, claim)
    assert repo.get("soon").state == "done"
    clock.set_sync(START + 31 * 60)
    result = repo.claim_due("later")
    assert result.claim is None and result.records[0].status == "missed"
    job = repo.get("later")
    assert (job.state, job.last_status, job.next_due) == ("missed", "missed", None)


def test_overlap_is_recorded_and_not_started(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("slow", "every 1h")
    clock.set_sync(START + 3600)
    first = repo.claim_due("slow").claim
    assert first is not None
    clock.set_sync(START + 7200 + 5)
    result = repo.claim_due("slow")
    assert result.claim is None
    assert [r.status for r in result.records] == ["skipped-overlap"]
    assert repo.get("slow").next_due == START + 3 * 3600
    finish(repo, first)
    clock.set_sync(START + 3 * 3600)
    assert repo.claim_due("slow").claim is not None


def test_failures_back_off_visibly_and_a_success_clears_them(
    repo: CronRepo, add_job: AddJob, clock: FakeClock
) -> None:
    add_job("flaky", "every 1m")
    for minute in range(1, 20):
        clock.set_sync(START + minute * 60)
        claim = repo.claim_due("flaky").claim
        if claim is not None:
            finish(repo, claim, FAILED)
    job = repo.get("flaky")
    assert job.state == "backoff" and job.failures == 5 and job.last_error == "boom"  # at minutes 1, 2, 4, 8, 16
    assert "5 failure(s) in a row; backing off until" in (backoff_text(job, clock.now()) or "")
    skipped = [r for r in repo.runs.list("flaky") if r.status == "skipped-backoff"]
    assert skipped and "backing off after" in skipped[0].detail
    clock.set_sync(job.next_due or 0)
    claim = repo.claim_due("flaky").claim
    assert claim is not None
    finish(repo, claim, OK)
    job = repo.get("flaky")
    assert (job.failures, job.backoff_until, job.state) == (0, None, "active")


def test_backoff_delays_exponentially(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("flaky", "every 1m")
    run_times = []
    for minute in range(1, 80):
        clock.set_sync(START + minute * 60)
        claim = repo.claim_due("flaky").claim
        if claim is not None:
            run_times.append(minute)
            finish(repo, claim, FAILED)
    gaps = [b - a for a, b in zip(run_times, run_times[1:])]
    assert gaps[:6] == [1, 2, 4, 8, 16, 32]


def test_a_fast_failing_job_backs_off_1_2_4_minutes_at_fractional_times(
    repo: CronRepo, add_job: AddJob, clock: FakeClock
) -> None:
    """As in the gateway: each wake-up comes a little after the due time and the run fails
    a moment later (no model configured). Every handled occurrence must move ``next_due``
    into the future, or the scheduler re-fires at once."""
    add_job("flaky", "every 1m")
    attempts: list[float] = []
    for handled in range(200):
        due = repo.get("flaky").next_due
        assert due is not None
        if due > START + 64 * 60:
            break
        clock.set_sync(due + 0.2)
        result = repo.claim_due("flaky")
        assert result.job is not None and (result.job.next_due or 0) > clock.now()
        if result.claim is not None:
            attempts.append(result.claim.record.occurrence or 0)
            clock.set_sync(clock.now() + 0.1)
            finish(repo, result.claim, FAILED)
    minutes = [int((b - a) // 60) for a, b in zip(attempts, attempts[1:])]
    assert minutes == [1, 2, 4, 8, 16, 32]
    # Each back-off is one skipped-backoff record that jumps straight to the next attempt.
    assert repo.get("flaky").counts == {"failed": 7, "skipped-backoff": 5} and handled == 12


@settings(max_examples=300, deadline=None)
@given(
    text=st.sampled_from(["every 1m", "every 5m", "*/5 * * * *", "0 9 * * *", "20m"]),
    late=st.floats(min_value=0, max_value=4000),
    failures=st.integers(min_value=0, max_value=8),
    pause=st.floats(min_value=-100, max_value=5000),
)
def test_handling_a_due_job_never_leaves_it_due(text: str, late: float, failures: int, pause: float) -> None:
    """Whatever the plan decides (run, skip, back off, retire), the next due time is in the
    future: a due time at or before now would make the scheduler fire again at once."""
    job = new_job("j", JobSpec(schedule=text, prompt="p", tz="UTC"), now=START + 0.4, default_tz="UTC", skills_dir=None)
    assert job.next_due is not None
    now = job.next_due + late
    job = replace(job, failures=failures, backoff_until=now + pause if failures else None)
    decision = cron_plan.plan_due(job, now, owner="me", alive=lambda owner: True)
    assert decision is not None
    assert decision.job.next_due is None or decision.job.next_due > now


def test_repeat_limit(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("thrice", "every 1h", repeat=3)
    ran = 0
    for hour in range(1, 6):
        clock.set_sync(START + hour * 3600)
        claim = repo.claim_due("thrice").claim
        if claim is not None:
            ran += 1
            finish(repo, claim)
    job = repo.get("thrice")
    assert ran == 3 and job.runs == 3 and job.state == "done" and job.next_due is None


def test_pause_and_resume_do_not_make_up_missed_runs(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("j", "every 1h")
    job, changed = repo.pause("j")
    assert changed and job.state == "paused"
    assert repo.pause("j")[1] is False
    clock.set_sync(START + 5 * 3600 + 60)
    assert repo.claim_due("j").claim is None
    job, changed = repo.resume("j")
    assert changed and job.next_due == START + 6 * 3600
    assert repo.claim_due("j").claim is None


def test_manual_run_leaves_the_schedule_alone(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    before = add_job("j", "every 1h", repeat=2)
    clock.set_sync(START + 600)
    claim = repo.claim_manual("j")
    assert claim.record.kind == "manual" and claim.record.stamp.endswith("-manual")
    try:
        repo.claim_manual("j")
        raise AssertionError("a running job must not start again")
    except JobBusy as exc:
        assert "is running" in str(exc)
    finish(repo, claim, FAILED)
    after = repo.get("j")
    assert (after.next_due, after.runs, after.failures, after.repeat) == (before.next_due, 0, 0, 2)
    assert (after.last_status, after.last_run_at) == ("failed", START + 600)


def test_a_manual_run_a_dead_process_left_is_recorded_interrupted_when_the_next_one_starts(
    store: SQLiteStore, add_job: AddJob, clock: FakeClock
) -> None:
    dead = CronRepo(store, clock, owner="elsewhere:1:dead", alive=lambda owner: owner != "elsewhere:1:dead")
    add_job("j", "every 1h")
    clock.set_sync(START + 600)
    first = dead.claim_manual("j")  # its process dies before the run ends: never finished
    second = dead.claim_manual("j")  # in the same second: a stamp of its own
    assert second.record.stamp != first.record.stamp and second.record.stamp.startswith(first.record.stamp)
    records = {record.stamp: record for record in dead.runs.list("j")}
    assert records[first.record.stamp].status == "interrupted"
    assert records[first.record.stamp].error == "the process running it stopped"
    assert records[second.record.stamp].status == "running"
    assert dead.get("j").running.run_key == second.record.stamp


def test_refund_restores_the_claim(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("j", "every 1h")
    clock.set_sync(START + 3600)
    claim = repo.claim_due("j").claim
    assert claim is not None
    repo.refund(claim)
    job = repo.get("j")
    assert (job.next_due, job.runs, job.running) == (START + 3600, 0, None)
    assert repo.runs.list("j") == []
    assert repo.claim_due("j").claim is not None


def test_a_dead_owners_run_is_recovered(store: SQLiteStore, add_job: AddJob, clock: FakeClock) -> None:
    dead = CronRepo(store, clock, owner="elsewhere:1:dead", alive=lambda owner: False)
    add_job("j", "every 1h")
    clock.set_sync(START + 3600)
    assert dead.claim_due("j").claim is not None
    alive = CronRepo(store, clock, alive=lambda owner: owner != "elsewhere:1:dead")
    assert alive.recover_abandoned() == ["j"]
    job = alive.get("j")
    assert job.running is None and job.last_status == "interrupted"
    assert [r.status for r in alive.runs.list("j")] == ["interrupted"]


def test_a_dead_owners_run_has_its_session_ended(store: SQLiteStore, add_job: AddJob, clock: FakeClock) -> None:
    dead = CronRepo(store, clock, owner="elsewhere:1:dead", alive=lambda owner: False)
    add_job("j", "every 1h")
    clock.set_sync(START + 3600)
    claim = dead.claim_due("j").claim
    assert claim is not None
    session = store.create_session(source="cron", title="cron: j")
    dead.runs.put(replace(claim.record, session_id=session.id))  # as the runner links it
    alive = CronRepo(store, clock, alive=lambda owner: owner != "elsewhere:1:dead")
    assert alive.recover_abandoned() == ["j"]
    assert store.get_session(session.id).end_reason == "interrupted"


def test_stale_lease_is_recovered_whoever_owns_it(store: SQLiteStore, add_job: AddJob, clock: FakeClock) -> None:
    other = CronRepo(store, clock, owner="otherhost:1:x", alive=lambda owner: True)
    add_job("j", "every 1h")
    clock.set_sync(START + 3600)
    assert other.claim_due("j").claim is not None
    clock.set_sync(START + 3600 + cron_plan.LEASE + 1)
    result = other.claim_due("j")
    assert result.recovered and result.claim is not None  # due again, and the old run closed


def test_two_processes_race_for_each_occurrence(store_location: str, shared_store: SessionStore) -> None:
    clock = FakeClock(START)
    for n in range(10):
        job = new_job(f"job{n}", JobSpec("every 1m", "p"), now=START, default_tz="UTC", skills_dir=None)
        CronRepo(shared_store, clock).add(job)
    winners: list[tuple[str, float]] = []
    lock = threading.Lock()

    def worker(owner: str) -> None:
        own_store = open_store(store_location)  # a store object of its own, as a process has
        repo = CronRepo(own_store, clock, owner=owner, alive=lambda o: True)
        try:
            for _ in range(3):
                for n in range(10):
                    result = repo.claim_due(f"job{n}")
                    if result.claim is not None:
                        with lock:
                            winners.append((f"job{n}", result.claim.record.occurrence or 0))
                        finish(repo, result.claim)
        finally:
            own_store.close()

    for minute in range(1, 6):
        clock.set_sync(START + minute * 60)
        threads = [threading.Thread(target=worker, args=(f"host:{i}:t",)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(winners) == 50 == len(set(winners))


def test_records_round_trip() -> None:
    record = RunRecord("j", "20260329T010000Z", "scheduled", "ok", at("2026-03-29 01:00"), START, answer="x" * 10_000)
    done = record.finished("ok", START + 5, answer="y" * 10_000)
    assert len(done.answer or "") == 4000
    assert RunRecord.from_json(done.to_json()) == done
    assert RunRecord.from_json({"nonsense": 1}) is None


def test_the_run_log_is_pruned(repo: CronRepo, add_job: AddJob, clock: FakeClock) -> None:
    add_job("chatty", "every 1m")
    for minute in range(1, 141):
        clock.set_sync(START + minute * 60)
        claim = repo.claim_due("chatty").claim
        assert claim is not None
        finish(repo, claim)
    kept = repo.runs.list("chatty")
    assert KEEP_PER_JOB <= len(kept) < KEEP_PER_JOB + 25
    assert kept[0].occurrence == START + 140 * 60  # the newest stay


def test_claiming_many_at_once_decides_as_one_by_one(
    repo: CronRepo, add_job: AddJob, clock: FakeClock, store: SQLiteStore
) -> None:
    add_job("due", "every 1h")
    add_job("late-skip", "every 1h", catch_up="skip")
    add_job("busy", "every 1h")
    add_job("paused", "every 1h")
    add_job("later", "every 2h")
    repo.pause("paused")
    clock.set_sync(START + 2 * 3600 - 60)
    busy = repo.claim_due("busy").claim  # still going (within its lease) at the next occurrence
    assert busy is not None
    clock.set_sync(START + 2 * 3600 + 40 * 60)  # 40 minutes late: past late-skip's grace
    store.set_meta("cron:job:broken", {"name": "broken"})  # a damaged record

    names = ["due", "late-skip", "busy", "paused", "later", "broken", "missing"]
    results = dict(zip(names, repo.claim_due_many(names)))

    claim = results["due"].claim
    assert claim is not None and claim.record.occurrence == START + 2 * 3600 and claim.record.coalesced == 1
    assert [r.status for r in results["late-skip"].records] == ["skipped-missed"]
    assert [r.status for r in results["busy"].records] == ["skipped-overlap"]
    assert results["paused"].claim is None and not results["paused"].records
    assert results["later"].claim is not None  # due at +2h, 40 minutes ago, within its grace of 1h
    assert results["broken"].error is not None and "broken" in results["broken"].error
    assert results["missing"].job is None and results["missing"].error is None
    # Everything it decided is in the store, and nothing can be claimed twice.
    assert repo.runs.get("due", claim.record.stamp) == claim.record
    assert {r.status for r in repo.runs.list("late-skip")} == {"skipped-missed"}
    assert all(r.claim is None for r in repo.claim_due_many(names))


def test_a_batch_that_loses_a_race_falls_back_to_claiming_alone(
    repo: CronRepo, add_job: AddJob, clock: FakeClock, store: SQLiteStore, profile
) -> None:  # type: ignore[no-untyped-def]
    for n in range(5):
        add_job(f"job{n}", "every 1h")
    clock.set_sync(START + 3600)
    other = CronRepo(SQLiteStore(profile.state_db), clock, owner="other:1:t", alive=lambda o: True)
    taken = other.claim_due("job2").claim  # another process gets there first
    assert taken is not None
    results = repo.claim_due_many([f"job{n}" for n in range(5)])
    assert [r.claim is not None for r in results] == [True, True, False, True, True]
    assert repo.runs.get("job2", taken.record.stamp).owner == "other:1:t"  # type: ignore[union-attr]
    other.store.close()
