"""The Matrix adapter in an in-process gateway (the real core over a real SQLite store, the fake
model over HTTP) talking to the fake homeserver over HTTP through matrix-nio."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest

from tests.gateway.adapters.harness import CoreHarness, Gateways, settings_for
from vigil.profiles import Profile
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.matrix_api import SERVER_NAME, FakeMatrixServer
from vigil.testing.waiting import eventually

if importlib.util.find_spec("nio") is None:  # pip install -e '.[matrix]' to run them
    collect_ignore_glob = ["test_*.py"]

ALICE = f"@alice:{SERVER_NAME}"
BOB = f"@bob:{SERVER_NAME}"
STRANGER = f"@mallory:{SERVER_NAME}"
TOKEN_ENV = "VIGIL_TEST_MATRIX_TOKEN"


@pytest.fixture
def homeserver() -> Iterator[FakeMatrixServer]:
    server = FakeMatrixServer().start()
    for person in (ALICE, BOB, STRANGER):
        server.person(person)
    yield server
    server.stop()


@dataclass
class MatrixHarness(CoreHarness):
    fake: FakeMatrixServer

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
    gateways = Gateways()
    profile = Profile("default", tmp_path / "home").ensure()

    async def factory(*, matrix: dict[str, Any] | None = None, **gateway_settings: Any) -> MatrixHarness:
        section = MatrixSettings.from_data({"enabled": True, "homeserver": homeserver.url, "user_id": homeserver.bot,
                                            "allow": [ALICE, BOB], "token_env": TOKEN_ENV, **(matrix or {})})
        settings = settings_for(fake_model, gateway=gateway_settings, matrix=section)
        adapter = MatrixAdapter(section, backoff=(0.05, 0.4), poll_ms=1000, edit_interval=0.2)
        return await gateways.core(MatrixHarness, model=fake_model, profile=profile, settings=settings,
                                   adapter=adapter, fake=homeserver)

    yield factory
    await gateways.close()
