"""The Matrix adapter in an in-process gateway (the real core over a real SQLite store, the fake
model over HTTP) talking to the fake homeserver over HTTP through matrix-nio."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest

from vigil.config.settings import ModelSettings, Settings
from vigil.gateway.core import Gateway
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.matrix_api import SERVER_NAME, FakeMatrixServer
from vigil.testing.waiting import eventually

if importlib.util.find_spec("nio") is None:  # pip install -e '.[matrix]' to run them
    collect_ignore_glob = ["test_*.py"]

ALICE = f"@alice:{SERVER_NAME}"
BOB = f"@bob:{SERVER_NAME}"
STRANGER = f"@mallory:{SERVER_NAME}"
TOKEN_ENV = "VIGIL_TEST_MATRIX_TOKEN"


async def _no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture
def homeserver() -> Iterator[FakeMatrixServer]:
    server = FakeMatrixServer().start()
    for person in (ALICE, BOB, STRANGER):
        server.person(person)
    yield server
    server.stop()


@dataclass
class MatrixHarness:
    fake: FakeMatrixServer
    model: FakeModelServer
    gateway: Gateway
    adapter: Any
    store: SQLiteStore
    profile: Profile
    settings: Settings
    lines: list[str] = field(default_factory=list)

    @property
    def bot(self) -> str:
        return self.fake.bot

    async def joined(self, room: str) -> str:
        await eventually(lambda: self.fake.state.rooms[room].membership(self.bot) == "join", what=f"the bot in {room}")
        return room

    async def dm(self, person: str = ALICE, *, encrypted: bool = False) -> str:
        """A direct room ``person`` opened with the bot (once it joined)."""
        return await self.joined(self.fake.state.create_room(person, invite=[self.bot], direct=True, encrypted=encrypted))

    async def group(self, *members: str) -> str:
        """A room of ``ALICE`` and ``members`` the bot was invited to (once it joined)."""
        return await self.joined(self.fake.state.create_room(ALICE, invite=[self.bot], members=list(members),
                                                             name="team"))

    def answers(self, room: str, thread: str | None | bool = False) -> list[str]:
        """The bot's messages there as shown now, streamed previews still running left out."""
        return [text for text in self.fake.state.texts(room, self.bot, thread=thread) if not text.endswith(" …")]

    async def answered(self, room: str, count: int, thread: str | None | bool = False) -> list[str]:
        await eventually(lambda: len(self.answers(room, thread)) >= count and self.idle(),
                         what=f"{count} answer(s) in {room}")
        return self.answers(room, thread)

    def idle(self) -> bool:
        return all(not live.conversation.busy for live in self.gateway.all_live()) \
            and self.store.gateway.outbox_next_due() is None


Factory = Callable[..., Awaitable[MatrixHarness]]


@pytest.fixture
async def make_matrix(
    fake_model: FakeModelServer, homeserver: FakeMatrixServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Factory]:
    from vigil.gateway.adapters.matrix import MatrixAdapter
    from vigil.platforms.matrix import MatrixSettings

    monkeypatch.setenv(TOKEN_ENV, homeserver.token)
    built: list[MatrixHarness] = []
    profile = Profile("default", tmp_path / "home").ensure()

    async def factory(*, matrix: dict[str, Any] | None = None, **gateway_settings: Any) -> MatrixHarness:
        model = ModelSettings.from_data({"provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
                                         "api_key": fake_model.api_key, "timeout": 10})
        section = MatrixSettings.from_data({"enabled": True, "homeserver": homeserver.url, "user_id": homeserver.bot,
                                            "allow": [ALICE, BOB], "token_env": TOKEN_ENV, **(matrix or {})})
        settings = Settings().copy_with(update={"model": model, "matrix": section})
        if gateway_settings:
            settings = settings.copy_with(update={"gateway": settings.gateway.copy_with(update=gateway_settings)})
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        store = SQLiteStore(profile.state_db, durable=False)
        adapter = MatrixAdapter(section, backoff=(0.05, 0.4), poll_ms=1000, edit_interval=0.2)
        lines: list[str] = []
        gateway = Gateway(store=store, profile=profile, settings=settings, client=client,
                          adapters={adapter.name: adapter}, say=lines.append)
        harness = MatrixHarness(homeserver, fake_model, gateway, adapter, store, profile, settings, lines)
        built.append(harness)
        await gateway.start()
        return harness

    yield factory
    for harness in built:
        await harness.gateway.stop(1.0)
        if hasattr(harness.gateway.client, "aclose"):
            await harness.gateway.client.aclose()
        harness.store.close()
