"""Two real `vigil gateway run` processes on one PostgreSQL schema, Telegram long polling
against the fake Bot API: both run and are listed, exactly one polls, and when the poller is
SIGKILLed the other takes polling over within the lease and answers what came meanwhile once."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
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


@pytest.fixture(scope="module")
def cluster(
    postgres_server: str, fake_model_session: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[GatewayProcess], FakeTelegramServer]]:
    """Two workers of one profile home on one fresh schema, Telegram polling configured."""
    import uuid

    schema = f"vigil_test_{uuid.uuid4().hex[:12]}"
    home = tmp_path_factory.mktemp("workers") / "home"
    home.mkdir()
    telegram = FakeTelegramServer().start()
    (home / "config.yaml").write_text(
        f"store:\n  url: {pg_fixtures.with_schema(postgres_server, schema)}\n"
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
        yield workers, telegram
    finally:
        for worker in workers:
            if worker.process is not None and worker.process.poll() is None:
                worker.stop(signal.SIGKILL)
        telegram.stop()
        pg_fixtures.drop_schema(postgres_server, schema)


def test_both_workers_run_and_exactly_one_polls(cluster: tuple[list[GatewayProcess], FakeTelegramServer]) -> None:
    workers, telegram = cluster
    pids = {w.process.pid for w in workers if w.process is not None}
    status = wait_for(lambda: (s := _status(workers[0]))["running"] and {w["pid"] for w in s["workers"] if w["live"]} == pids
                      and s, what="both workers listed")
    assert len(status["workers"]) == 2 and all(w["state"] == "running" for w in status["workers"])
    wait_for(lambda: sorted(_telegram(w).split(" ")[0] for w in _status(workers[0])["workers"]) == ["polling", "sending"],
             what="one worker polling, the other sending")
    telegram.message(OWNER, OWNER, "hello workers")
    wait_for(lambda: telegram.texts(OWNER) == ["ok"], what="the answer")
    assert len(telegram.polling()) == 1 and telegram.max_polls == 1


def test_the_survivor_takes_polling_over_when_the_poller_is_killed(
    cluster: tuple[list[GatewayProcess], FakeTelegramServer]
) -> None:
    workers, telegram = cluster
    by_pid = _by_pid(_status(workers[0]))
    poller = next(w for w in workers if w.process is not None and _telegram(by_pid[w.process.pid]).startswith("polling"))
    survivor = next(w for w in workers if w is not poller)
    assert poller.process is not None and survivor.process is not None
    answered = len(telegram.texts(OWNER))
    poller.kill()
    telegram.message(OWNER, OWNER, "are you still there")
    wait_for(lambda: len(telegram.texts(OWNER)) == answered + 1, timeout=4 * LEASE + 10, what="the answer after the kill")
    status = _status(survivor)
    mine = _by_pid(status)
    assert _telegram(mine[survivor.process.pid]).startswith("polling")
    assert mine[poller.process.pid]["state"] == "gone" and not mine[poller.process.pid]["live"]
    assert status["running"] and status["summary"] == "1 worker running on a shared store, 1 gone"
    telegram.message(OWNER, OWNER, "and once more")
    wait_for(lambda: len(telegram.texts(OWNER)) == answered + 2, what="the next answer")
    assert telegram.texts(OWNER)[answered:] == ["ok", "ok"]  # each answered once
    assert telegram.max_polls == 1  # never two pollers at once
    assert survivor.stop() == 0
    after = _by_pid(_status(survivor))
    assert after[survivor.process.pid]["state"] == "stopped"
