"""The adapter contract on the Discord adapter inside a real gateway, with the fake Discord as
the platform side: a delivery is a DM dispatched over the Gateway (the fake chooses the message
id, as Discord does), and it is acknowledged when the bot's saved session sequence number —
what it would resume from after a crash — has passed it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.discord.conftest import ALICE, DiscordHarness
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import Adapter, GatewayPort
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry, RouteKey


@dataclass
class DiscordContract:
    h: DiscordHarness
    refuses_unknown_conversation: bool = True
    _sent: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def adapter(self) -> Adapter:
        return self.h.adapter

    @property
    def gateway(self) -> GatewayPort:
        return self.h.gateway

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

    def unknown_conversation(self) -> OutboxEntry:
        now = time.time()
        return OutboxEntry(id=999_999, route=RouteKey("discord", "999999999999999999"), kind="reply",
                           text="anyone there?", session_id=None, inbox_id=None, created_at=now, status="pending",
                           attempts=0, next_attempt_at=now)

    async def open_stream(self) -> None:
        return None

    def new_settings(self) -> Settings:
        return self.h.settings.copy_with(update={"discord": self.h.settings.discord.copy_with(update={"command": "agent"})})

    async def answers(self, ack: Ack) -> list[str]:
        return self.h.answers(self.h.fake.dm_channel(ALICE))


class TestDiscordAdapterContract(AdapterContract):
    @pytest.fixture
    async def contract(self, make_discord: Any) -> ContractHarness:
        return DiscordContract(await make_discord())  # type: ignore[return-value]
