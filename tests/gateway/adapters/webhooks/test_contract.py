"""The adapter contract on the Webhooks adapter inside a real gateway (see ``conftest``): the
platform side is a signed ``POST /hooks/ha`` whose ``webhook-id`` is the platform's message id,
and the hook's url, a :class:`Receiver`, is where the answers arrive."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.webhooks.conftest import SECRET_ENV, HooksHarness
from tests.gateway.messaging_contract import Shown
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import Adapter, GatewayPort
from vigil.platforms.webhooks import WebhooksSettings
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry, RouteKey


@dataclass
class WebhooksContract:
    hooks: HooksHarness
    refuses_unknown_conversation: bool = True

    @property
    def adapter(self) -> Adapter:
        return self.hooks.run.gateway.adapters["webhooks"]

    @property
    def gateway(self) -> GatewayPort:
        return self.hooks.run.gateway

    async def deliver(self, text: str, external_id: str) -> Ack:
        response = await self.hooks.post({"text": text, "conversation": "contract"}, delivery=external_id)
        assert response.status_code == 202, response.text
        body = response.json()
        assert body["id"] == external_id and body["conversation"] == "contract"
        return Ack(f"ha:{external_id}", body["duplicate"], body["inbox_id"])

    def stored(self, external_id: str) -> InboxEntry | None:
        wanted = {external_id, f"ha:{external_id}"}
        with sqlite3.connect(self.hooks.profile.state_db) as db:
            row = db.execute("SELECT id FROM gateway_inbox WHERE adapter = 'webhooks' AND external_id IN (?, ?)",
                             tuple(wanted)).fetchone()
        if row is None:
            return None
        from vigil.store import SQLiteStore

        store = SQLiteStore(self.hooks.profile.state_db)
        try:
            return store.gateway.inbox_get(row[0])
        finally:
            store.close()

    def unknown_conversation(self) -> OutboxEntry:
        now = time.time()
        return OutboxEntry(
            id=999_999, route=RouteKey("webhooks", "no-such-hook", "c"), kind="reply", text="anyone there?",
            session_id=None, inbox_id=None, created_at=now, status="pending", attempts=0, next_attempt_at=now,
        )

    async def open_stream(self) -> asyncio.Task[Any] | None:
        return None  # answers are sent whole to the hook's url; nothing stays open

    def new_settings(self) -> Settings:
        changed = WebhooksSettings.from_data({**self.hooks.settings.webhooks.as_dict(), "tolerance": 60,
                                                   "hooks": {**self.hooks.settings.webhooks.hooks.as_dict(),
                                                             "n8n": {"secret_env": SECRET_ENV}}})
        return self.hooks.settings.copy_with(update={"webhooks": changed})

    async def answers(self, ack: Ack) -> list[str]:
        delivery = ack.external_id.split(":", 1)[1]
        return [d.body["text"] for d in self.hooks.receiver.replies_to(delivery)
                if d.body["kind"] == "reply" and d.genuine]

    # -- the messaging part (tests/gateway/messaging_contract.py): delivery errors ---------------
    @property
    def model(self) -> Any:
        return self.hooks.model

    @property
    def lines(self) -> list[str]:
        return self.hooks.lines

    async def messages(self, ack: Ack) -> list[Shown]:
        delivery = ack.external_id.split(":", 1)[1]
        return [Shown(d.body["text"]) for d in self.hooks.receiver.replies_to(delivery) if d.genuine]

    async def fail_next_answer(self, ack: Ack, *, permanent: bool) -> None:
        """The hook's url refuses the next post (nothing streams to a hook: one is the answer)."""
        self.hooks.receiver.refusals.append(400 if permanent else 500)


class TestWebhooksAdapterContract(AdapterContract):
    @pytest.fixture
    def contract(self, hooks: HooksHarness) -> ContractHarness:
        return WebhooksContract(hooks)
