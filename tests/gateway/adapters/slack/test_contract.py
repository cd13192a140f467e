"""The adapter contract on the real Slack adapter inside a real gateway, with the fake Slack
Web API and its signed Events sender as the platform side."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.harness import ContractParts
from tests.gateway.adapters.slack.conftest import ALICE, SlackHarness
from tests.gateway.messaging_contract import Shown
from vigil.testing.waiting import eventually
from vigil.config.settings import Settings
from vigil.store.gateway.gateway_tables import RouteKey


class SlackContractHarness(ContractParts):
    nowhere = RouteKey("slack", "C0NOSUCHCHANNEL")

    def __init__(self, harness: SlackHarness) -> None:
        self.h = harness
        self._channels: dict[str, str] = {}

    async def deliver(self, text: str, external_id: str) -> Ack:
        before = self.h.stored(external_id) is not None
        channel = self._channels.setdefault(external_id, "D" + external_id[:10].upper())
        sent = await self.h.sender.message(channel, ALICE, text, event_id=external_id)
        assert sent.response.status_code == 200, sent.response.text
        return Ack(external_id, before)

    def stored(self, external_id: str) -> Any:
        return self.h.stored(external_id)

    def new_settings(self) -> Settings:
        return self.h.settings.copy_with(update={"slack": self.h.settings.slack.copy_with(update={"command": "/agent"})})

    async def answers(self, ack: Ack) -> list[str]:
        return self.h.answers(self._channels[ack.external_id])

    # -- the messaging part (tests/gateway/messaging_contract.py) ---------------------------
    async def messages(self, ack: Ack) -> list[Shown]:
        """The bot's messages in the DM of ``ack`` (their versions: the texts of its edits), then its uploads."""
        state = self.h.fake.state
        channel = self._channels[ack.external_id]
        updates = [c for c in state.calls_of("chat.update") if c.status == 200 and c.params.get("channel") == channel]
        shown = []
        for message in state.posted(channel):
            times = [c.at for c in updates if c.params.get("ts") == message.ts]
            buttons = [element["text"]["text"] for block in message.blocks or [] if block.get("type") == "actions"
                       for element in block.get("elements", [])]
            sections = [b["text"]["text"] for b in message.blocks or [] if b.get("type") == "section" and b.get("text")]
            text = "\n".join(sections) or message.text  # blocks are what Slack shows of a message that has them
            shown.append(Shown(text, message.edits or [text], times, buttons, None, message))
        for upload in list(state.uploads.values()):
            if upload.channel == channel:
                shown.append(Shown(upload.initial_comment or "", file=(upload.filename, upload.data or b"")))
        return shown

    async def press(self, message: Shown, label: str) -> None:
        [element] = [e for block in message.ref.blocks if block.get("type") == "actions"
                     for e in block.get("elements", []) if e["text"]["text"] == label]
        await self.h.sender.press(element["action_id"], element["value"], user=ALICE, channel=message.ref.channel,
                                  message_ts=message.ref.ts)

    async def deliver_file(self, name: str, data: bytes, caption: str, external_id: str) -> Ack:
        before = self.h.stored(external_id) is not None
        channel = self._channels.setdefault(external_id, "D" + external_id[:10].upper())
        shared = self.h.fake.share_file(name, data)
        sent = await self.h.sender.message(channel, ALICE, caption, event_id=external_id, files=[shared])
        assert sent.response.status_code == 200, sent.response.text
        return Ack(external_id, before)

    async def fail_next_answer(self, ack: Ack, *, permanent: bool) -> None:
        """Once the working placeholder is up: the answer replaces it (chat.update), and a
        refused update is posted anew (chat.postMessage)."""
        channel = self._channels[ack.external_id]
        await eventually(lambda: self.h.fake.state.posted(channel), what="the working placeholder")
        if permanent:
            self.h.fake.state.fault(status=200, error="not_in_channel", count=3)
        else:
            self.h.fake.state.fault(status=503, count=2, method="chat.update")


class TestSlackAdapterContract(AdapterContract):
    @pytest.fixture
    def contract(self, slack: SlackHarness) -> ContractHarness:
        return SlackContractHarness(slack)  # type: ignore[return-value]
