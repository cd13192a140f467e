"""The adapter contract on the real Slack adapter inside a real gateway, with the fake Slack
Web API and its signed Events sender as the platform side."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.slack.conftest import ALICE, SlackHarness
from vigil.config.settings import Settings
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey


class SlackContractHarness:
    def __init__(self, harness: SlackHarness) -> None:
        self.h = harness
        self.refuses_unknown_conversation = True
        self._channels: dict[str, str] = {}

    @property
    def adapter(self) -> Any:
        return self.h.adapter

    @property
    def gateway(self) -> Any:
        return self.h.gateway

    async def deliver(self, text: str, external_id: str) -> Ack:
        before = self.h.stored(external_id) is not None
        channel = self._channels.setdefault(external_id, "D" + external_id[:10].upper())
        sent = await self.h.sender.message(channel, ALICE, text, event_id=external_id)
        assert sent.response.status_code == 200, sent.response.text
        return Ack(external_id, before)

    def stored(self, external_id: str) -> Any:
        return self.h.stored(external_id)

    def unknown_conversation(self) -> OutboxEntry:
        now = time.time()
        return OutboxEntry(id=999_999, route=RouteKey("slack", "C0NOSUCHCHANNEL"), kind="reply",
                           text="anyone there?", session_id=None, inbox_id=None, created_at=now,
                           status="pending", attempts=0, next_attempt_at=now)

    async def open_stream(self) -> None:
        return None

    def new_settings(self) -> Settings:
        return self.h.settings.copy_with(update={"slack": self.h.settings.slack.copy_with(update={"command": "/agent"})})

    async def answers(self, ack: Ack) -> list[str]:
        return self.h.answers(self._channels[ack.external_id])


class TestSlackAdapterContract(AdapterContract):
    @pytest.fixture
    def contract(self, slack: SlackHarness) -> ContractHarness:
        return SlackContractHarness(slack)  # type: ignore[return-value]
