"""The Telegram adapter in an in-process gateway (the real core over a real SQLite store, the
fake model over HTTP) talking to the fake Bot API over HTTP through python-telegram-bot."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest

from tests.gateway.adapters.harness import CoreHarness, Gateways, settings_for
from vigil.gateway.adapters.telegram import TelegramAdapter
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


@pytest.fixture
def telegram() -> Iterator[FakeTelegramServer]:
    server = FakeTelegramServer().start()
    yield server
    server.stop()


@dataclass
class TelegramHarness(CoreHarness):
    fake: FakeTelegramServer
    adapter: TelegramAdapter

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
    gateways = Gateways()
    profile = Profile("default", tmp_path / "home").ensure()

    async def factory(*, start: bool = True, telegram_overrides: dict[str, Any] | None = None,
                      store: SQLiteStore | None = None, **gateway_settings: Any) -> TelegramHarness:
        settings = settings_for(fake_model, gateway=gateway_settings,
                                telegram=telegram_settings(telegram, **(telegram_overrides or {})))
        adapter = TelegramAdapter(backoff=(0.05, 0.4), poll_timeout=1, edit_interval=0.2)
        return await gateways.core(TelegramHarness, model=fake_model, profile=profile, settings=settings,
                                   adapter=adapter, store=store, start=start, fake=telegram)

    yield factory
    await gateways.close()
