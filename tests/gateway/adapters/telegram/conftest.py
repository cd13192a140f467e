"""The Telegram adapter in an in-process gateway (the real core over a real SQLite store, the
fake model over HTTP) talking to the fake Bot API over HTTP through python-telegram-bot."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest

from vigil.config.settings import ModelSettings, Settings
from vigil.gateway.adapters.telegram import TelegramAdapter
from vigil.gateway.core import Gateway
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.platforms.telegram import TelegramSettings
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.telegram_api.server import FakeTelegramServer
from vigil.testing.waiting import eventually

if importlib.util.find_spec("telegram") is None:  # pip install -e '.[telegram]' to run them
    collect_ignore_glob = ["test_*.py"]

OWNER = 111
FRIEND = 222
STRANGER = 333
GROUP = -1001234
TOKEN_ENV = "VIGIL_TEST_TELEGRAM_TOKEN"


async def _no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture
def telegram() -> Iterator[FakeTelegramServer]:
    server = FakeTelegramServer().start()
    yield server
    server.stop()


@dataclass
class TelegramHarness:
    fake: FakeTelegramServer
    model: FakeModelServer
    gateway: Gateway
    adapter: TelegramAdapter
    store: SQLiteStore
    profile: Profile
    settings: Settings
    lines: list[str] = field(default_factory=list)

    def route_session(self, route: RouteKey) -> str | None:
        return self.store.gateway.route_get(route)

    async def answered(self, chat: int, count: int, thread: int | None | str = "any") -> list[str]:
        """The bot's ``count`` answers in ``chat`` once there are that many (settled: no
        preview still being edited)."""
        await eventually(lambda: len(self.fake.texts(chat, thread)) >= count and self.idle(),
                         what=f"{count} answer(s) in chat {chat}")
        return self.fake.texts(chat, thread)

    def idle(self) -> bool:
        return self.gateway.answered + self.gateway.failed > 0 and all(
            not live.conversation.busy for live in self.gateway.all_live()) and not self.outbox_pending()

    def outbox_pending(self) -> bool:
        return self.store.gateway.outbox_next_due() is not None


Factory = Callable[..., Awaitable[TelegramHarness]]


def telegram_settings(fake: FakeTelegramServer, **overrides: Any) -> TelegramSettings:
    values: dict[str, Any] = {"enabled": True, "api_url": fake.api_url, "allow": [str(OWNER), str(FRIEND)],
                              "token_env": TOKEN_ENV, **overrides}
    return TelegramSettings.from_data(values)


@pytest.fixture
async def make_telegram(
    fake_model: FakeModelServer, telegram: FakeTelegramServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Factory]:
    monkeypatch.setenv(TOKEN_ENV, telegram.token)
    built: list[TelegramHarness] = []
    profile = Profile("default", tmp_path / "home").ensure()

    async def factory(*, start: bool = True, telegram_overrides: dict[str, Any] | None = None,
                      store: SQLiteStore | None = None, **gateway_settings: Any) -> TelegramHarness:
        model = ModelSettings.from_data({
            "provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
            "api_key": fake_model.api_key, "timeout": 10,
        })
        settings = Settings().copy_with(update={
            "model": model, "telegram": telegram_settings(telegram, **(telegram_overrides or {}))})
        if gateway_settings:
            settings = settings.copy_with(update={"gateway": settings.gateway.copy_with(update=gateway_settings)})
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        store = store or SQLiteStore(profile.state_db, durable=False)
        adapter = TelegramAdapter(backoff=(0.05, 0.4), poll_timeout=1, edit_interval=0.2)
        lines: list[str] = []
        gateway = Gateway(store=store, profile=profile, settings=settings, client=client,
                          adapters={adapter.name: adapter}, say=lines.append)
        harness = TelegramHarness(telegram, fake_model, gateway, adapter, store, profile, settings, lines)
        built.append(harness)
        if start:
            await gateway.start()
        return harness

    yield factory
    for harness in built:
        await harness.gateway.stop(1.0)
        if hasattr(harness.gateway.client, "aclose"):
            await harness.gateway.client.aclose()
        harness.store.close()
