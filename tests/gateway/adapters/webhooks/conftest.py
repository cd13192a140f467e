"""A real gateway in-process (``serve``: the core, the HTTP server on a loopback port, a SQLite
store file, the fake model over HTTP) with Webhooks on: the hook ``ha`` answers to a
:class:`Receiver`, the hook ``quiet`` has no url."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import httpx
import pytest

from tests.gateway.adapters.harness import Gateways, ServedHarness, settings_for
from tests.gateway.adapters.webhooks.receiver import Receiver, request
from tests.gateway.process import free_port
from vigil.gateway.run import GatewayConfig
from vigil.platforms.webhooks import WebhooksSettings
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry
from vigil.testing.fake_model import FakeModelServer

SECRET = "s3cret-for-the-tests"
SECRET_ENV = "VIGIL_TEST_HOOK_SECRET"


def hooks_settings(receiver_url: str) -> WebhooksSettings:
    return WebhooksSettings.from_data({"enabled": True, "hooks": {
        "ha": {"secret_env": SECRET_ENV, "url": receiver_url},
        "quiet": {"secret_env": SECRET_ENV},
    }})


@dataclass
class HooksHarness(ServedHarness):
    receiver: Receiver

    @property
    def adapter(self) -> Any:
        return self.gateway.adapters["webhooks"]

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
        with closing(sqlite3.connect(self.profile.state_db)) as db:
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
    gateways = Gateways()
    settings = settings_for(fake_model, webhooks=hooks_settings(receiver.url))
    serving = await gateways.serve(profile, settings, config=GatewayConfig(web_port=free_port(), stop_grace=1.0,
                                                                           adapter_watch=0.05))
    try:
        yield HooksHarness(serving, fake_model, receiver)
    finally:
        await gateways.close()
