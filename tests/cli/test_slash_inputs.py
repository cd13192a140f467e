"""Slash commands refuse text that cannot be stored, and ASCII-only intervals and schedules,
through the controller every front end (REPL, web chat, platforms) dispatches to."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import pytest

from tests.cli.helpers import state_digest
from vigil.agent.turn import Agent
from vigil.config.settings import ModelSettings, Settings
from vigil.models.factory import build_client
from vigil.profiles import Profile
from vigil.runtime.controller import ConversationController
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer


@pytest.fixture
async def controller(fake_model: FakeModelServer, vigil_home: Path) -> AsyncIterator[ConversationController]:
    profile = Profile("default", vigil_home).ensure()
    store = SQLiteStore(profile.state_db)
    model = ModelSettings.from_data(
        {"provider": "openai", "name": "fake-model", "base_url": fake_model.base_url, "api_key": fake_model.api_key}
    )
    settings = Settings().copy_with(update={"model": model})
    client = await build_client(settings.model)
    controller = ConversationController(Agent(store=store, client=client, profile=profile, settings=settings))
    fake_model.queue("hello")
    await controller.turn("start")
    try:
        yield controller
    finally:
        await client.aclose()
        store.close()


@pytest.mark.parametrize(
    "text",
    [
        "/heartbeat every 15m check \udcff",  # a terminal's undecodable byte
        "/hb every 15m \ud83d",  # a lone surrogate, as JSON "\\ud83d" carries it from a web client
        '/cron add job "every 1h" report \udce9',
        "/title new \udcff",
        "/model m\udcff",
    ],
)
async def test_undecodable_text_is_refused_and_changes_nothing(
    controller: ConversationController, vigil_home: Path, text: str
) -> None:
    before = state_digest(vigil_home)
    reply = await controller.command(text)
    assert reply.is_error and "not valid UTF-8" in reply.text
    assert state_digest(vigil_home) == before


@pytest.mark.parametrize(
    "text",
    ["/heartbeat every ١٥m check", "/hb every １５m check", "/hb every 1٥m check", '/cron add job "every ١h" report',
     '/cron add job "١٥m" report'],
)
async def test_non_ascii_digits_are_refused(controller: ConversationController, vigil_home: Path, text: str) -> None:
    before = state_digest(vigil_home)
    reply = await controller.command(text)
    assert reply.is_error, reply.text
    assert state_digest(vigil_home) == before
