"""The adapter contract on the Webhooks adapter inside a real gateway (see ``conftest``): the
platform side is a signed ``POST /hooks/ha`` whose ``webhook-id`` is the platform's message id,
and the hook's url, a :class:`Receiver`, is where the answers arrive."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.harness import ContractParts, inbox_entry
from tests.gateway.adapters.webhooks.conftest import SECRET_ENV, HooksHarness
from tests.gateway.messaging_contract import Shown
from vigil.config.settings import Settings
from vigil.platforms.webhooks import WebhooksSettings
from vigil.store.gateway.gateway_tables import InboxEntry, RouteKey


@dataclass
class WebhooksContract(ContractParts):
    """Answers are sent whole to the hook's url: nothing stays open, nothing streams."""

    h: HooksHarness
    nowhere = RouteKey("webhooks", "no-such-hook", "c")

    async def deliver(self, text: str, external_id: str) -> Ack:
        response = await self.h.post({"text": text, "conversation": "contract"}, delivery=external_id)
        assert response.status_code == 202, response.text
        body = response.json()
        assert body["id"] == external_id and body["conversation"] == "contract"
        return Ack(f"ha:{external_id}", body["duplicate"], body["inbox_id"])

    def stored(self, external_id: str) -> InboxEntry | None:
        return inbox_entry(self.h.profile.state_db, "webhooks", external_id, f"ha:{external_id}")

    def new_settings(self) -> Settings:
        webhooks = self.h.settings.webhooks
        changed = WebhooksSettings.from_data({**webhooks.as_dict(), "tolerance": 60,
                                              "hooks": {**webhooks.hooks.as_dict(), "n8n": {"secret_env": SECRET_ENV}}})
        return self.h.settings.copy_with(update={"webhooks": changed})

    async def answers(self, ack: Ack) -> list[str]:
        delivery = ack.external_id.split(":", 1)[1]
        return [d.body["text"] for d in self.h.receiver.replies_to(delivery)
                if d.body["kind"] == "reply" and d.genuine]

    # -- the messaging part (tests/gateway/messaging_contract.py): delivery errors ---------------
    async def messages(self, ack: Ack) -> list[Shown]:
        delivery = ack.external_id.split(":", 1)[1]
        return [Shown(d.body["text"]) for d in self.h.receiver.replies_to(delivery) if d.genuine]

    async def fail_next_answer(self, ack: Ack, *, permanent: bool) -> None:
        """The hook's url refuses the next post (nothing streams to a hook: one is the answer)."""
        self.h.receiver.refusals.append(400 if permanent else 500)


class TestWebhooksAdapterContract(AdapterContract):
    @pytest.fixture
    def contract(self, hooks: HooksHarness) -> ContractHarness:
        return WebhooksContract(hooks)
