"""The adapter contract on the OpenAI-compatible API adapter, inside the same real gateway as the
web chat's contract (``serve`` with its HTTP server, a SQLite store file, the fake model over
HTTP); the platform side is an HTTP client of ``/v1/chat/completions``, whose idempotency key is
the platform's message id (an API request is acknowledged with its answer)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import httpx
import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.harness import outbox_to
from tests.gateway.adapters.web.test_contract import WebHarness, web_gateway  # noqa: F401 - the fixture
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import Adapter, GatewayPort
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry, RouteKey


@dataclass
class ApiHarness:
    web: WebHarness
    refuses_unknown_conversation: bool = False
    not_driven: ClassVar[Mapping[str, str]] = {
        "delivery errors": "a client is answered in the response to its own request, and the conversation's "
                           "history keeps the answer when it went away; there is no delivery to refuse",
    }

    @property
    def adapter(self) -> Adapter:
        return self.web.run.gateway.adapters["api"]

    @property
    def gateway(self) -> GatewayPort:
        return self.web.run.gateway

    def _entries(self) -> list[InboxEntry]:
        store = SQLiteStore(self.web.profile.state_db)
        try:
            return store.gateway.inbox_list(limit=10_000)
        finally:
            store.close()

    async def deliver(self, text: str, external_id: str) -> Ack:
        before = len(self._entries())
        async with self.web.client() as client:
            response = await client.post("/v1/chat/completions", headers={"Idempotency-Key": external_id}, json={
                "model": "vigil", "messages": [{"role": "user", "content": text}],
            })
        assert response.status_code == 200, response.text
        entries = self._entries()
        stored = next(e for e in entries if e.external_id == f"key:{external_id}")
        return Ack(stored.external_id, duplicate=len(entries) == before, inbox_id=stored.id)

    def stored(self, external_id: str) -> InboxEntry | None:
        """The entry of an idempotency key (stored as ``key:<key>``) or of a stored id."""
        wanted = {external_id, f"key:{external_id}"}
        return next((e for e in self._entries() if e.external_id in wanted), None)

    def unknown_conversation(self) -> OutboxEntry:
        return outbox_to(RouteKey("api", "session:no-such-conversation"))

    async def open_stream(self) -> asyncio.Task[Any] | None:
        return None  # a request's stream is its own answer; nothing stays open

    def new_settings(self) -> Settings:
        return self.web.settings

    async def answers(self, ack: Ack) -> list[str]:
        stored = self.stored(ack.external_id)
        if stored is None or stored.session_id is None:
            return []
        async with self.web.client() as client:
            view = (await client.get(f"/api/conversations/{stored.session_id}")).json()
        return [m["content"] for m in view["messages"] if m["role"] == "assistant" and not m["tool_calls"]]


class TestApiAdapterContract(AdapterContract):
    @pytest.fixture
    def contract(self, web_gateway: WebHarness) -> ContractHarness:
        return ApiHarness(web_gateway)


async def test_a_new_token_on_sighup_refuses_the_old_key(web_gateway: WebHarness) -> None:
    from vigil.gateway.token import token_path

    old = web_gateway.token
    token_path(web_gateway.profile).unlink()
    await web_gateway.sighup()
    new = token_path(web_gateway.profile).read_text().strip()
    async with httpx.AsyncClient(base_url=web_gateway.url, timeout=30) as client:
        assert (await client.get("/v1/models", headers={"Authorization": f"Bearer {old}"})).status_code == 401
        assert (await client.get("/v1/models", headers={"Authorization": f"Bearer {new}"})).status_code == 200
