"""The adapter contract on the Discord adapter inside a real gateway, with the fake Discord as
the platform side: a delivery is a DM dispatched over the Gateway (the fake chooses the message
id, as Discord does), and it is acknowledged when the bot's saved session sequence number —
what it would resume from after a crash — has passed it. The messaging part reads the bot's
messages in the DM as the fake keeps them (each version shown, buttons, attachments)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.discord.conftest import ALICE, DiscordHarness
from tests.gateway.adapters.harness import ContractParts
from tests.gateway.messaging_contract import Shown
from vigil.config.settings import Settings
from vigil.store.gateway.gateway_tables import InboxEntry, RouteKey


@dataclass
class DiscordContract(ContractParts):
    h: DiscordHarness
    _sent: dict[str, dict[str, Any]] = field(default_factory=dict)
    nowhere = RouteKey("discord", "999999999999999999")

    async def deliver(self, text: str, external_id: str) -> Ack:
        duplicate = external_id in self._sent
        if duplicate:
            payload = self._sent[external_id]
            self.h.fake.send("MESSAGE_CREATE", payload)
        else:
            payload = self._sent[external_id] = self.h.fake.dm(ALICE, text)
        await self.h.acked(self.h.fake.sequence)
        entry = self.stored(external_id)
        return Ack(payload["id"], duplicate, entry.id if entry else None)

    def stored(self, external_id: str) -> InboxEntry | None:
        """By the harness's key or by Discord's message id (an ``Ack.external_id``)."""
        payload = self._sent.get(external_id)
        return self.h.stored(payload["id"] if payload else external_id)

    def new_settings(self) -> Settings:
        return self.h.settings.copy_with(update={"discord": self.h.settings.discord.copy_with(update={"command": "agent"})})

    async def answers(self, ack: Ack) -> list[str]:
        return self.h.answers(self.h.fake.dm_channel(ALICE))

    # -- the messaging part (tests/gateway/messaging_contract.py) ---------------------------
    async def messages(self, ack: Ack) -> list[Shown]:
        """The bot's messages in Alice's DM: every version it showed, its buttons and file."""
        fake = self.h.fake
        shown = []
        for message in fake.state.posted(fake.dm_channel(ALICE)):
            file = None
            if message.attachments:
                attachment = message.attachments[0]
                file = (attachment["filename"], fake.state.hosted[attachment["url"].split("/attachments/", 1)[1]])
            shown.append(Shown(message.content, [text for _, text in message.shown], [at for at, _ in message.shown],
                               fake.buttons(message.id, labels=True), file, message))
        return shown

    async def press(self, message: Shown, label: str) -> None:
        fake = self.h.fake
        labels = fake.buttons(message.ref.id, labels=True)
        fake.press(message.ref.id, fake.buttons(message.ref.id)[labels.index(label)], ALICE)

    async def deliver_file(self, name: str, data: bytes, caption: str, external_id: str) -> Ack:
        fake = self.h.fake
        attachment = fake.attachment(fake.dm_channel(ALICE), name, data)
        payload = self._sent[external_id] = fake.dm(ALICE, caption, attachments=[attachment])
        await self.h.acked(fake.sequence)
        return Ack(payload["id"], False)

    async def fail_next_answer(self, ack: Ack, *, permanent: bool) -> None:
        """A 503 for the next two sends and edits in the DM, or a 403 (Missing Permissions) for all."""
        path = f"/channels/{self.h.fake.dm_channel(ALICE)}/messages"
        self.h.fake.state.fault(403 if permanent else 503, count=1000 if permanent else 2, path=path)


class TestDiscordAdapterContract(AdapterContract):
    @pytest.fixture
    async def contract(self, make_discord: Any) -> ContractHarness:
        return DiscordContract(await make_discord())  # type: ignore[return-value]
