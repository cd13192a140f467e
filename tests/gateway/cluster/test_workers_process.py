"""Two real `vigil gateway run` processes on one PostgreSQL schema, Telegram long polling
against the fake Bot API: both run and are listed, exactly one polls, and when the poller is
SIGKILLed the other takes polling over within the lease and answers what came meanwhile once."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from tests.gateway.process import _STARTED, GatewayProcess, wait_for
from tests.store import conftest as pg_fixtures
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.telegram_api.server import FakeTelegramServer

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("telegram") is None, reason="needs python-telegram-bot (vigil[telegram])"),
]

postgres_server = pg_fixtures.postgres_server
TOKEN_ENV = "VIGIL_E2E_TELEGRAM_TOKEN"
OWNER = 111
LEASE = 2


def _status(gateway: GatewayProcess) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "vigil.cli.main", "gateway", "status", "--json"],
                          env=gateway.environment(), capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 3), done.stderr
    return json.loads(done.stdout)


def _telegram(worker: dict[str, Any]) -> str:
    return next((a["detail"] for a in worker["adapters"] if a["name"] == "telegram"), "")


def _by_pid(status: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {w["pid"]: w for w in status["workers"]}


@dataclass
class Cluster:
    workers: list[GatewayProcess]
    telegram: FakeTelegramServer
    url: str
    """The shared store."""


@pytest.fixture(scope="module")
def cluster(
    postgres_server: str, fake_model_session: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Two workers of one profile home on one fresh schema, Telegram polling configured."""
    import uuid

    schema = f"vigil_test_{uuid.uuid4().hex[:12]}"
    home = tmp_path_factory.mktemp("workers") / "home"
    home.mkdir()
    telegram = FakeTelegramServer().start()
    url = pg_fixtures.with_schema(postgres_server, schema)
    (home / "config.yaml").write_text(
        f"store:\n  url: {url}\n"
        f"gateway:\n  lease_seconds: {LEASE}\n"
        f"telegram:\n  enabled: true\n  api_url: {telegram.api_url}\n  token_env: {TOKEN_ENV}\n"
        f"  allow: ['{OWNER}']\n"
    )
    workers = [GatewayProcess(home, fake_model_session, env={TOKEN_ENV: telegram.token}) for _ in range(2)]
    try:
        for worker in workers:
            worker.start()
            assert worker.process is not None
            _STARTED.remove(worker.process)  # lives for the module, not one test
        yield Cluster(workers, telegram, url)
    finally:
        for worker in workers:
            if worker.process is not None and worker.process.poll() is None:
                worker.stop(signal.SIGKILL)
        telegram.stop()
        pg_fixtures.drop_schema(postgres_server, schema)


def _diagnosis(workers: list[GatewayProcess]) -> str:
    """Each worker's exit code (None: running) and the end of its output, for a failure."""
    return "\n".join(
        f"worker {n} (exit {w.process.poll() if w.process else None}):\n" + "".join(w.output[-25:])
        for n, w in enumerate(workers)
    )


def test_both_workers_run_and_exactly_one_polls(cluster: Cluster) -> None:
    workers, telegram = cluster.workers, cluster.telegram
    pids = {w.process.pid for w in workers if w.process is not None}
    try:
        status = wait_for(lambda: (s := _status(workers[0]))["running"] and {w["pid"] for w in s["workers"] if w["live"]} == pids
                          and s, what="both workers listed")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_diagnosis(workers)}") from None
    assert len(status["workers"]) == 2 and all(w["state"] == "running" for w in status["workers"])
    wait_for(lambda: sorted(_telegram(w).split(" ")[0] for w in _status(workers[0])["workers"]) == ["polling", "sending"],
             what="one worker polling, the other sending")
    telegram.message(OWNER, OWNER, "hello workers")
    wait_for(lambda: telegram.texts(OWNER) == ["ok"], what="the answer")
    assert len(telegram.polling()) == 1 and telegram.max_polls == 1


def test_what_a_worker_on_a_lost_machine_left_is_recovered_by_the_live_ones(
    cluster: Cluster
) -> None:
    """A worker elsewhere reserved a heartbeat slot and started a cron run, then its machine
    went away: its registry record goes stale and the running workers refund and close."""
    import time

    from tests.gateway.cluster.test_workers_units import far_worker
    from vigil.clock import FakeClock
    from vigil.schedule.cron.errors import JobNotFound
    from vigil.schedule.cron.jobs import JobSpec, new_job
    from vigil.schedule.cron.repo import CronRepo
    from vigil.schedule.heartbeat.repo import HeartbeatRepo
    from vigil.store import open_store

    workers = cluster.workers
    store: Any = open_store(cluster.url)
    try:
        now = time.time()
        owner = far_worker(store, "lostmachine01", updated_at=now, lease=LEASE)
        later = FakeClock(now + 3700)  # when the lost worker reserved and claimed: the slots were due
        heartbeat, _ = HeartbeatRepo(store).set("bbbbbbbbbbbb", "watch the build", 3600)
        assert HeartbeatRepo(store, later, owner=owner).reserve("bbbbbbbbbbbb") is not None
        CronRepo(store).add(new_job("report", JobSpec(schedule="every 1h", prompt="p"), now=now,
                                    default_tz="UTC", skills_dir=None))
        assert CronRepo(store, later, owner=owner).claim_due("report").claim is not None

        def recovered() -> bool:
            pending = HeartbeatRepo(store).get("bbbbbbbbbbbb")
            job = CronRepo(store).get("report")
            runs = CronRepo(store).runs.list("report")  # written just after the job record
            return (pending is not None and pending.pending is None and job.last_status == "interrupted"
                    and [r.status for r in runs] == ["interrupted"])

        wait_for(recovered, timeout=4 * LEASE + 10, what="the lost worker's reservation refunded and run interrupted")
        after = HeartbeatRepo(store).get("bbbbbbbbbbbb")
        assert after is not None and after.fire_count == heartbeat.fire_count and after.next_due == heartbeat.next_due
        runs = CronRepo(store).runs.list("report")
        assert [r.status for r in runs] == ["interrupted"]
        lost = next(w for w in _status(workers[0])["workers"] if w["id"] == "lostmachine01")
        assert lost["state"] == "gone"
    finally:
        HeartbeatRepo(store).clear("bbbbbbbbbbbb")
        with contextlib.suppress(JobNotFound):
            CronRepo(store).remove("report")
        store.close()


def test_the_survivor_takes_polling_over_when_the_poller_is_killed(
    cluster: Cluster
) -> None:
    workers, telegram = cluster.workers, cluster.telegram
    by_pid = _by_pid(_status(workers[0]))
    poller = next(w for w in workers if w.process is not None and _telegram(by_pid[w.process.pid]).startswith("polling"))
    survivor = next(w for w in workers if w is not poller)
    assert poller.process is not None and survivor.process is not None
    answered = len(telegram.texts(OWNER))
    poller.kill()
    telegram.message(OWNER, OWNER, "are you still there")
    try:
        wait_for(lambda: len(telegram.texts(OWNER)) == answered + 1, timeout=4 * LEASE + 10, what="the answer after the kill")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_diagnosis(workers)}") from None
    status = _status(survivor)
    mine = _by_pid(status)
    assert _telegram(mine[survivor.process.pid]).startswith("polling")
    assert mine[poller.process.pid]["state"] == "gone" and not mine[poller.process.pid]["live"]
    assert status["running"] and status["summary"].startswith("1 worker running on a shared store")
    telegram.message(OWNER, OWNER, "and once more")
    wait_for(lambda: len(telegram.texts(OWNER)) == answered + 2, what="the next answer")
    assert telegram.texts(OWNER)[answered:] == ["ok", "ok"]  # each answered once
    assert telegram.max_polls == 1  # never two pollers at once
    assert survivor.stop() == 0
    after = _by_pid(_status(survivor))
    assert after[survivor.process.pid]["state"] == "stopped"
