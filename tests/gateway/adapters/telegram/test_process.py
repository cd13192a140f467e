"""End to end: the real ``vigil gateway run`` process with Telegram enabled in config.yaml,
the token in the environment, the fake Bot API and the fake model over HTTP. One gateway
for the checks that need a process: answers in the right chat and topic, the status record,
no token in any log line, and a SIGKILL between answering an update and confirming it (the
restarted gateway fetches it again and does not answer it twice)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway.process import GatewayProcess, wait_for
from tests.gateway.adapters.telegram.conftest import GROUP, OWNER
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.telegram_api.server import FakeTelegramServer

pytestmark = pytest.mark.slow

TOKEN_ENV = "VIGIL_E2E_TELEGRAM_TOKEN"


def _config(home: Path, fake: FakeTelegramServer) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        "telegram:\n"
        "  enabled: true\n"
        f"  api_url: {fake.api_url}\n"
        f"  token_env: {TOKEN_ENV}\n"
        f"  allow: ['{OWNER}']\n"
    )


def _status(gateway: GatewayProcess) -> dict:
    done = subprocess.run([sys.executable, "-m", "vigil.cli.main", "gateway", "status", "--json"],
                          env=gateway.environment(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_gateway_process_answers_telegram_and_survives_a_sigkill(
    fake_model: FakeModelServer, vigil_home: Path, telegram: FakeTelegramServer
) -> None:
    _config(vigil_home, telegram)
    fake_model.rule(contains="hello there", reply="Hello from vigil.")
    fake_model.rule(contains="in the topic", reply="Topic answer.")
    gateway = GatewayProcess(vigil_home, fake_model, env={TOKEN_ENV: telegram.token}).start()
    try:
        telegram.message(OWNER, OWNER, "hello there")
        wait_for(lambda: telegram.texts(OWNER) == ["Hello from vigil."], what="the private answer")
        telegram.message(GROUP, OWNER, "in the topic", chat_type="supergroup", thread_id=3)
        wait_for(lambda: telegram.texts(GROUP, 3) == ["Topic answer."], what="the topic answer")
        adapters = {a["name"]: a for a in _status(gateway)["adapters"]}
        assert adapters["telegram"]["ok"] and "polling" in adapters["telegram"]["detail"], adapters

        # answered, but its confirmation never reaches Telegram; then the process dies
        update = telegram.message(OWNER, OWNER, "count me once")
        telegram.fail(10_000, 502, methods=["getUpdates"], params={"offset": update["update_id"] + 1})
        wait_for(lambda: len(telegram.texts(OWNER)) == 2, what="the third answer")
        gateway.kill()
        telegram.clear_faults()
        assert telegram.pending() == 1
        gateway.start()
        wait_for(lambda: telegram.delivered(update["update_id"]) == 2 and telegram.pending() == 0,
                 what="the update fetched again")
        telegram.message(OWNER, OWNER, "after the restart")
        wait_for(lambda: len(telegram.texts(OWNER)) == 3, what="the answer after the restart")
        assert telegram.texts(OWNER)[1:] == ["ok", "ok"]  # "count me once" answered once
        assert gateway.stop() == 0
    finally:
        if gateway.process is not None and gateway.process.poll() is None:
            gateway.stop(signal.SIGKILL)
    log = (vigil_home / "logs" / "gateway.log").read_text()
    assert telegram.token not in log and telegram.token not in "".join(gateway.output)
    assert telegram.token.split(":")[1] not in log
