"""Webhook mode in the real gateway process code (``serve``: its HTTP server on a loopback
port): the fake Bot API POSTs updates to ``/telegram/webhook`` with the secret token set by
``setWebhook``; a request without the right secret is refused and nothing is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest

from tests.gateway.adapters.harness import Gateways, settings_for
from tests.gateway.process import free_port
from tests.gateway.adapters.telegram.conftest import OWNER, TOKEN_ENV, eventually, telegram_settings
from vigil.gateway.run import GatewayConfig
from vigil.profiles import Profile
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.telegram_api.server import FakeTelegramServer

SECRET_ENV = "VIGIL_TEST_TELEGRAM_SECRET"
SECRET = "s3cret-Webhook_token"


@pytest.fixture
async def webhook_gateway(
    fake_model: FakeModelServer, telegram: FakeTelegramServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[dict[str, Any]]:
    monkeypatch.setenv(TOKEN_ENV, telegram.token)
    monkeypatch.setenv(SECRET_ENV, SECRET)
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram/webhook"
    profile = Profile("default", tmp_path / "home").ensure()
    settings = settings_for(fake_model, telegram=telegram_settings(
        telegram, mode="webhook", webhook_url=url, webhook_secret_env=SECRET_ENV))
    gateways = Gateways()
    serving = await gateways.serve(profile, settings, config=GatewayConfig(web_port=port, stop_grace=1.0))
    try:
        yield {"run": serving.run, "url": url, "store": serving.store, "fake": telegram}
    finally:
        await gateways.close()


async def test_updates_arrive_by_webhook_with_the_secret_and_are_answered(webhook_gateway: dict[str, Any]) -> None:
    fake: FakeTelegramServer = webhook_gateway["fake"]
    assert fake.webhook() == {"url": webhook_gateway["url"], "secret_token": SECRET}
    adapter = webhook_gateway["run"].gateway.adapters["telegram"]
    assert adapter.health().state == "connected"
    fake.message(OWNER, OWNER, "hello by webhook")
    await eventually(lambda: fake.texts(OWNER) == ["ok"], what="the answer")
    assert fake.pending() == 0 and fake.calls("getUpdates") == []


async def test_a_webhook_request_without_the_secret_is_refused_and_nothing_stored(webhook_gateway: dict[str, Any]) -> None:
    update = {"update_id": 77, "message": {"message_id": 5, "date": 0, "text": "forged",
                                           "chat": {"id": OWNER, "type": "private"},
                                           "from": {"id": OWNER, "is_bot": False, "first_name": "X"}}}
    async with httpx.AsyncClient() as http:
        missing = await http.post(webhook_gateway["url"], json=update)
        wrong = await http.post(webhook_gateway["url"], json=update,
                                headers={"X-Telegram-Bot-Api-Secret-Token": SECRET[:-1] + "x"})
        garbage = await http.post(webhook_gateway["url"], content=b"{not json",
                                  headers={"X-Telegram-Bot-Api-Secret-Token": SECRET})
    assert missing.status_code == 401 and wrong.status_code == 401 and garbage.status_code == 400
    assert webhook_gateway["store"].gateway.inbox_get(1) is None
