"""A real gateway in-process (``serve``: the core, the HTTP server on a loopback port, a SQLite
store file, the fake model over HTTP) with Webhooks on: the hook ``ha`` answers to a
:class:`Receiver`, the hook ``quiet`` has no url."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import httpx
import pytest

from tests.gateway.process import free_port
from tests.gateway.adapters.webhooks.receiver import Receiver, request
from vigil.config.settings import ModelSettings, Settings
from vigil.gateway.run import GatewayConfig, GatewayRun, serve
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.platforms.webhooks import WebhooksSettings
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry
from vigil.testing.fake_model import FakeModelServer

SECRET = "s3cret-for-the-tests"
SECRET_ENV = "VIGIL_TEST_HOOK_SECRET"


async def _no_sleep(_seconds: float) -> None:
    return None


def hooks_settings(receiver_url: str) -> WebhooksSettings:
    return WebhooksSettings.from_data({"enabled": True, "hooks": {
        "ha": {"secret_env": SECRET_ENV, "url": receiver_url},
        "quiet": {"secret_env": SECRET_ENV},
    }})


@dataclass
class HooksHarness:
    run: GatewayRun
    profile: Profile
    url: str
    settings: Settings
    receiver: Receiver
    reload: asyncio.Event
    model: FakeModelServer
    lines: list[str]
    """What the gateway said."""

    async def post(self, payload: Any, hook: str = "ha", *, secret: str = SECRET, **signing: Any) -> httpx.Response:
        body, headers = request(secret, payload, **signing)
        return await self.post_raw(body, headers, hook)

    async def post_raw(self, body: bytes, headers: dict[str, str], hook: str = "ha") -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=30, trust_env=False) as client:
            return await client.post(f"/hooks/{hook}", content=body, headers=headers)

    def outbox(self, *statuses: str) -> list[OutboxEntry]:
        """The outbox's entries of ``statuses``, as another connection to the store sees them."""
        store = SQLiteStore(self.profile.state_db)
        try:
            return store.gateway.outbox_list(statuses=statuses, limit=1000)
        finally:
            store.close()

    def inbox(self, inbox_id: int) -> InboxEntry | None:
        store = SQLiteStore(self.profile.state_db)
        try:
            return store.gateway.inbox_get(inbox_id)
        finally:
            store.close()

    def count(self, table: str) -> int:
        with sqlite3.connect(self.profile.state_db) as db:
            return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.fixture(scope="session")
def receiver_session() -> Iterator[Receiver]:
    receiver = Receiver(SECRET).start()
    yield receiver
    receiver.stop()


@pytest.fixture
def receiver(receiver_session: Receiver) -> Receiver:
    receiver_session.deliveries.clear()
    receiver_session.refusals.clear()
    receiver_session.refused = 0
    return receiver_session


@pytest.fixture
async def hooks(fake_model: FakeModelServer, receiver: Receiver, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[HooksHarness]:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    profile = Profile("default", tmp_path / "home").ensure()
    model = ModelSettings.from_data({
        "provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
        "api_key": fake_model.api_key, "timeout": 10,
    })
    settings = Settings().copy_with(update={"model": model, "webhooks": hooks_settings(receiver.url)})
    client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
    store = SQLiteStore(profile.state_db)
    stop, reload = asyncio.Event(), asyncio.Event()
    lines: list[str] = []
    started: asyncio.Future[GatewayRun] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve(
        store=store, profile=profile, settings=settings, client=client, stop=stop, reload=reload,
        announce=lines.append, config=GatewayConfig(web_port=free_port(), stop_grace=1.0, adapter_watch=0.05),
        on_started=started.set_result,
    ))
    done, _ = await asyncio.wait([started, serving], timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if serving in done:
        serving.result()
    run = started.result()
    assert run.url is not None
    try:
        yield HooksHarness(run, profile, run.url, settings, receiver, reload, fake_model, lines)
    finally:
        stop.set()
        await asyncio.wait_for(serving, 60)
        await client.aclose()
