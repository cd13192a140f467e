"""The adapter contract on the real web chat adapter, inside a real gateway (``serve``: the
core, the HTTP server on a loopback port, a SQLite store file) with the fake model over HTTP;
the platform side is an HTTP client of the web API. For the messaging part a page is open on
the conversation before anything is sent (:mod:`.live_page`): the bot's messages are what it
draws from the live events, an approval is answered as its Approve/Deny buttons do, and a
file is uploaded and named in the message as the page's composer does."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, ClassVar, Mapping

import httpx
import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.harness import Gateways, ServedHarness, outbox_to, settings_for
from tests.gateway.adapters.web.live_page import APPROVE, LivePage, uploaded
from tests.gateway.messaging_contract import Shown
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import Adapter
from vigil.gateway.token import token_path
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry, RouteKey
from vigil.testing.fake_model import FakeModelServer


@dataclass
class WebHarness(ServedHarness):
    token: str = ""
    session_id: str = ""
    refuses_unknown_conversation: bool = False
    not_driven: ClassVar[Mapping[str, str]] = {
        "delivery errors": "answers reach pages by the event stream and the history; there is no delivery to refuse",
        "a message limit": "a page shows an answer whole in one message, however long",
    }
    page: LivePage | None = None
    _acks: dict[str, int] = field(default_factory=dict)

    @property
    def adapter(self) -> Adapter:
        return self.run.gateway.adapters["web"]

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"}, timeout=30
        )

    async def deliver(self, text: str, external_id: str) -> Ack:
        if self.page is None:
            self.page = LivePage(self.client(), self.session_id)
        await self.page.ensure_open()  # the person's page: open before they send
        async with self.client() as client:
            response = await client.post(
                f"/api/conversations/{self.session_id}/messages", json={"text": text, "client_id": external_id}
            )
        assert response.status_code == 202, response.text
        body = response.json()
        self._acks[external_id] = body["inbox_id"]
        return Ack(external_id, body["duplicate"], body["inbox_id"])

    def stored(self, external_id: str) -> InboxEntry | None:
        inbox_id = self._acks.get(external_id)
        if inbox_id is None:
            return None
        store = SQLiteStore(self.profile.state_db)
        try:
            return store.gateway.inbox_get(inbox_id)
        finally:
            store.close()

    def unknown_conversation(self) -> OutboxEntry:
        return outbox_to(RouteKey("web", "no-such-conversation"))

    async def open_stream(self) -> asyncio.Task[Any]:
        connected = asyncio.Event()

        async def read() -> None:
            async with self.client() as client:
                async with client.stream("GET", f"/api/conversations/{self.session_id}/events",
                                         timeout=httpx.Timeout(30, read=None)) as stream:
                    assert stream.status_code == 200
                    async for _line in stream.aiter_lines():
                        connected.set()

        task = asyncio.create_task(read())
        waiting = asyncio.create_task(connected.wait())
        await asyncio.wait([task, waiting], timeout=20, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if task.done():
            task.result()
        assert connected.is_set(), "the event stream did not open"
        return task

    def new_settings(self) -> Settings:
        gateway = self.settings.gateway.copy_with(update={"upload_max_bytes": 1024})
        return self.settings.copy_with(update={"gateway": gateway})

    async def answers(self, ack: Ack) -> list[str]:
        async with self.client() as client:
            view = (await client.get(f"/api/conversations/{self.session_id}")).json()
        return [m["content"] for m in view["messages"] if m["role"] == "assistant" and not m["tool_calls"]]

    # -- the messaging part (tests/gateway/messaging_contract.py) ---------------------------
    async def messages(self, ack: Ack) -> list[Shown]:
        """The bot's messages on the page of the harness's conversation (where every delivery goes)."""
        assert self.page is not None, "nothing was delivered"
        return await self.page.messages()

    async def press(self, message: Shown, label: str) -> None:
        async with self.client() as client:
            response = await client.post(f"/api/approvals/{message.ref}", json={"approve": label == APPROVE})
        assert response.status_code == 200, response.text

    async def deliver_file(self, name: str, data: bytes, caption: str, external_id: str) -> Ack:
        async with self.client() as client:
            saved = await client.post(f"/api/conversations/{self.session_id}/files", files={"file": (name, data)})
        assert saved.status_code == 201, saved.text
        return await self.deliver(uploaded(caption, saved.json()), external_id)


@pytest.fixture
async def web_gateway(fake_model: FakeModelServer, tmp_path: Path) -> AsyncIterator[WebHarness]:
    profile = Profile("default", tmp_path / "home").ensure()
    gateways = Gateways()
    serving = await gateways.serve(profile, settings_for(fake_model))
    harness = WebHarness(serving, fake_model, token=token_path(profile).read_text().strip())
    try:
        async with harness.client() as http:
            created = await http.post("/api/conversations")
            assert created.status_code == 201, created.text
            harness.session_id = created.json()["id"]
        yield harness
    finally:
        if harness.page is not None:
            await harness.page.close()
        await gateways.close()


class TestWebAdapterContract(AdapterContract):
    @pytest.fixture
    def contract(self, web_gateway: WebHarness) -> ContractHarness:
        return web_gateway


# -- what only the web chat does ---------------------------------------------------------------

async def test_sighup_with_a_new_token_logs_out_the_old_one_everywhere(web_gateway: WebHarness) -> None:
    """A deleted token file and SIGHUP: a new token; the old one opens neither the web API
    nor /metrics, the new one opens both."""
    old = web_gateway.token
    token_path(web_gateway.profile).unlink()
    reloads = web_gateway.run.reloads
    await web_gateway.sighup()
    assert web_gateway.run.reloads == reloads + 1
    new = token_path(web_gateway.profile).read_text().strip()
    assert new != old
    async with web_gateway.client(old) as client:
        assert (await client.get("/api/conversations")).status_code == 401
        assert (await client.get("/metrics")).status_code == 401
    async with web_gateway.client(new) as client:
        assert (await client.get("/api/conversations")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200
    assert any("SIGHUP: adapter configuration reloaded" in line for line in web_gateway.lines)
    assert not any(old in line or new in line for line in web_gateway.lines)
