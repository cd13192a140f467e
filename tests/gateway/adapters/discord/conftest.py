"""A real gateway in-process (``serve``: the core, the HTTP server on a loopback port, a
SQLite store file, the fake model over HTTP) with the Discord adapter on, against the fake
Discord; people talk to it through the fake (DMs, channel messages, ``/vigil``, buttons)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import pytest

from tests.gateway.adapters.harness import Gateways, ServedHarness, inbox_entry, settings_for
from vigil.gateway.adapters.discord import DiscordAdapter
from vigil.gateway.adapters.discord.link import SESSION_KEY
from vigil.platforms.discord import DiscordSettings
from vigil.profiles import Profile
from vigil.store.gateway.gateway_tables import InboxEntry
from vigil.testing.discord_api import FakeDiscordServer
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually

ALICE, BOB, STRANGER = "310000000000000001", "310000000000000002", "310000000000000009"
TOKEN_ENV = "VIGIL_TEST_DISCORD_TOKEN"


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
class DiscordHarness(ServedHarness):
    fake: FakeDiscordServer

    @property
    def adapter(self) -> Any:
        return self.supervised("discord", DiscordAdapter)

    def stored(self, external_id: str) -> InboxEntry | None:
        """The inbox entry of ``external_id``, as another connection to the file sees it."""
        return inbox_entry(self.profile.state_db, "discord", external_id)

    def acknowledged(self) -> int:
        """The sequence number the bot has acknowledged (stored what came up to it)."""
        with closing(sqlite3.connect(self.profile.state_db)) as db:
            row = db.execute("SELECT value FROM state_meta WHERE key = ?", (SESSION_KEY,)).fetchone()
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
    gateways = Gateways()

    async def start(*, gateway: dict[str, Any] | None = None, connected: bool = True, **changes: Any) -> DiscordHarness:
        profile = Profile("default", tmp_path / "home").ensure()
        settings = settings_for(fake_model, gateway=gateway, discord=discord_settings(discord_env, **changes))
        harness = DiscordHarness(await gateways.serve(profile, settings), fake_model, discord_env)
        if connected:
            await eventually(lambda: harness.adapter.health().ok, what="Discord connected")
        return harness

    yield start
    await gateways.close()
