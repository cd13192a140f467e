"""A real gateway in-process (``serve``: the core, the HTTP server on a loopback port, a
SQLite store file, the fake model over HTTP) with the Discord adapter on, against the fake
Discord; people talk to it through the fake (DMs, channel messages, ``/vigil``, buttons)."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import pytest

from tests.gateway.process import free_port
from vigil.config.settings import ModelSettings, Settings
from vigil.gateway.adapters.discord import DiscordAdapter
from vigil.gateway.adapters.discord.link import SESSION_KEY
from vigil.gateway.run import GatewayConfig, GatewayRun, serve
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.platforms.discord import DiscordSettings
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import InboxEntry
from vigil.testing.discord_api import FakeDiscordServer
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually

ALICE, BOB, STRANGER = "310000000000000001", "310000000000000002", "310000000000000009"
TOKEN_ENV = "VIGIL_TEST_DISCORD_TOKEN"


async def _no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture(scope="session")
def fake_discord_session() -> Iterator[FakeDiscordServer]:
    server = FakeDiscordServer().start()
    server.name(ALICE, "alice")
    server.name(BOB, "bob")
    yield server
    server.stop()


@pytest.fixture
def fake_discord(fake_discord_session: FakeDiscordServer) -> Iterator[FakeDiscordServer]:
    """The fake Discord, running, emptied before and after the test."""
    fake_discord_session.start()
    fake_discord_session.reset()
    yield fake_discord_session
    fake_discord_session.start()
    fake_discord_session.reset()


@dataclass
class DiscordHarness:
    run: GatewayRun
    profile: Profile
    settings: Settings
    fake: FakeDiscordServer
    model: FakeModelServer
    lines: list[str]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def adapter(self) -> Any:
        """The Discord adapter as the gateway runs it (inside its supervisor)."""
        adapter = self.run.gateway.adapters["discord"]
        assert isinstance(getattr(adapter, "inner", adapter), DiscordAdapter)
        return adapter

    @property
    def gateway(self) -> Any:
        return self.run.gateway

    def stored(self, external_id: str) -> InboxEntry | None:
        """The inbox entry of ``external_id``, as another connection to the file sees it."""
        with sqlite3.connect(self.profile.state_db) as db:
            row = db.execute("SELECT id FROM gateway_inbox WHERE adapter = 'discord' AND external_id = ?",
                             (external_id,)).fetchone()
        if row is None:
            return None
        store = SQLiteStore(self.profile.state_db)
        try:
            return store.gateway.inbox_get(row[0])
        finally:
            store.close()

    def acknowledged(self) -> int:
        """The sequence number the bot has acknowledged (stored what came up to it)."""
        with sqlite3.connect(self.profile.state_db) as db:
            row = db.execute("SELECT value FROM state_meta WHERE key = ?", (SESSION_KEY,)).fetchone()
        import json
        return int(json.loads(row[0])["seq"]) if row else 0

    async def acked(self, sequence: int) -> None:
        await eventually(lambda: self.acknowledged() >= sequence, what=f"event {sequence} acknowledged")

    def answers(self, channel: str) -> list[str]:
        """What the bot has said there, streaming previews apart."""
        return [text for text in self.fake.state.texts(channel) if not text.endswith(" …")]


def discord_settings(fake: FakeDiscordServer, **changes: Any) -> DiscordSettings:
    return DiscordSettings.from_data({"enabled": True, "api_url": fake.api_url, "token_env": TOKEN_ENV,
                                      "allow": [ALICE, BOB], **changes})


@pytest.fixture
def discord_env(fake_discord: FakeDiscordServer, monkeypatch: pytest.MonkeyPatch) -> FakeDiscordServer:
    monkeypatch.setenv(TOKEN_ENV, fake_discord.token)
    return fake_discord


@pytest.fixture
async def make_discord(discord_env: FakeDiscordServer, fake_model: FakeModelServer,
                       tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start a gateway with Discord on: ``await make_discord(**discord_changes, gateway=...)``;
    it returns once the bot is connected (``connected=False``: at once)."""
    running: list[tuple[asyncio.Event, asyncio.Task[Any], Any]] = []

    async def start(*, gateway: dict[str, Any] | None = None, connected: bool = True, **changes: Any) -> DiscordHarness:
        profile = Profile("default", tmp_path / "home").ensure()
        model = ModelSettings.from_data({
            "provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
            "api_key": fake_model.api_key, "timeout": 10,
        })
        settings = Settings().copy_with(update={"model": model, "discord": discord_settings(discord_env, **changes)})
        if gateway:
            settings = settings.copy_with(update={"gateway": settings.gateway.copy_with(update=gateway)})
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        store = SQLiteStore(profile.state_db)
        stop = asyncio.Event()
        started: asyncio.Future[GatewayRun] = asyncio.get_running_loop().create_future()
        lines: list[str] = []
        serving = asyncio.create_task(serve(
            store=store, profile=profile, settings=settings, client=client, stop=stop, reload=asyncio.Event(),
            announce=lines.append, config=GatewayConfig(web_port=free_port(), stop_grace=1.0),
            on_started=started.set_result,
        ))
        running.append((stop, serving, client))
        done, _ = await asyncio.wait([started, serving], timeout=30, return_when=asyncio.FIRST_COMPLETED)
        if serving in done:
            serving.result()
        harness = DiscordHarness(started.result(), profile, settings, discord_env, fake_model, lines)
        if connected:
            await eventually(lambda: harness.adapter.health().ok, what="Discord connected")
        return harness

    yield start
    for stop, serving, client in running:
        stop.set()
        await asyncio.wait_for(serving, 60)
        await client.aclose()
