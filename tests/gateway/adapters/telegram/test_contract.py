"""The adapter contract on the Telegram adapter, inside a real gateway, with the fake Bot API
as the platform side: a delivery is a message the fake hands out by long polling, and it is
acknowledged when the adapter confirms it (the next ``getUpdates`` offset)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness, eventually
from tests.gateway.adapters.harness import ContractParts, inbox_entry
from tests.gateway.adapters.telegram.conftest import OWNER, Factory, TelegramHarness
from tests.gateway.messaging_contract import Shown
from vigil.config.settings import Settings
from vigil.store.gateway.gateway_tables import InboxEntry, RouteKey


@dataclass
class TelegramContract(ContractParts):
    h: TelegramHarness
    _ids: dict[str, int] = field(default_factory=dict)
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    nowhere = RouteKey("telegram", "987654321")

    def telegram_id(self, external_id: str) -> str:
        """The inbox key of the message the harness sent for ``external_id``."""
        return f"{OWNER}:{self._ids[external_id]}"

    async def deliver(self, text: str, external_id: str) -> Ack:
        return await self._deliver(external_id, text=text)

    async def _deliver(self, external_id: str, **message: Any) -> Ack:
        duplicate = external_id in self._ids
        message_id = self._ids.setdefault(external_id, next(self._numbers))
        update = self.h.fake.message(OWNER, OWNER, message_id=message_id, **message)
        state = self.h.fake.state  # confirmed: the next offset passed it
        await eventually(lambda: state.confirmed_below > update["update_id"], what="the adapter to confirm the update")
        entry = self.stored(external_id)
        return Ack(self.telegram_id(external_id), duplicate, entry.id if entry else None)

    def stored(self, external_id: str) -> InboxEntry | None:
        """By the harness's key or by Telegram's (an ``Ack.external_id``)."""
        key = self.telegram_id(external_id) if external_id in self._ids else external_id
        return inbox_entry(self.h.profile.state_db, "telegram", key)

    def new_settings(self) -> Settings:
        telegram = self.h.settings.telegram.copy_with(update={"allow": [str(OWNER), "555"]})
        return self.h.settings.copy_with(update={"telegram": telegram})

    async def answers(self, ack: Ack) -> list[str]:
        return self.h.fake.texts(OWNER) if self.h.idle() else []

    # -- the messaging part (tests/gateway/messaging_contract.py) ---------------------------
    @property
    def edit_interval(self) -> float:
        """The harness's adapter streams at a faster pace than Telegram's second."""
        return self.h.adapter.streams.style.interval

    async def messages(self, ack: Ack) -> list[Shown]:
        """Every test has a fresh fake: the bot's messages in the owner's chat are this test's."""
        edits = [c for c in self.h.fake.calls("editMessageText") if c.status == 200]
        shown = []
        for sent in self.h.fake.sent(OWNER):
            times = [sent.sent_at] + [c.at for c in edits if str(c.params.get("message_id")) == str(sent.message_id)]
            buttons = [b["text"] for row in (sent.reply_markup or {}).get("inline_keyboard", []) for b in row]
            file = (sent.file_name or "", sent.content or b"") if sent.kind == "document" else None
            shown.append(Shown(sent.text, [*sent.edits, sent.text], times, buttons, file, sent))
        return shown

    async def press(self, message: Shown, label: str) -> None:
        markup = message.ref.reply_markup or {}
        [data] = [b["callback_data"] for row in markup["inline_keyboard"] for b in row if b["text"] == label]
        self.h.fake.press(OWNER, OWNER, message.ref.message_id, data)

    async def deliver_file(self, name: str, data: bytes, caption: str, external_id: str) -> Ack:
        return await self._deliver(external_id, document=(name, data), caption=caption)

    async def fail_next_answer(self, ack: Ack, *, permanent: bool) -> None:
        self.h.fake.fail(2, 400 if permanent else 502, methods=["sendMessage", "editMessageText"])


class TestTelegramAdapterContract(AdapterContract):
    @pytest.fixture
    async def contract(self, make_telegram: Factory) -> ContractHarness:
        return TelegramContract(await make_telegram())


async def test_the_contract_redelivery_really_reaches_the_gateway_twice(make_telegram: Factory) -> None:
    h = await make_telegram()
    contract = TelegramContract(h)
    first = await contract.deliver("twice", "k")
    again = await contract.deliver("twice", "k")
    assert first.inbox_id == again.inbox_id
    await eventually(lambda: contract.answers(first), what="the answer")
    assert h.fake.texts(OWNER) == ["ok"]
    assert h.fake.delivered(1) == 1 and h.fake.delivered(2) == 1  # two updates of one message
