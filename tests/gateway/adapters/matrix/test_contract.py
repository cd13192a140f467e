"""The adapter contract on the Matrix adapter inside a real gateway, with the fake homeserver as
the platform side: a delivery is a message Alice writes in her direct room, acknowledged when
the adapter's next ``/sync`` moves past it; a redelivery is the same event handed out again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness, eventually
from tests.gateway.adapters.harness import ContractParts, inbox_entry
from tests.gateway.adapters.matrix.conftest import ALICE, Factory, MatrixHarness
from vigil.config.settings import Settings
from vigil.store.gateway.gateway_tables import InboxEntry, RouteKey


@dataclass
class MatrixContract(ContractParts):
    h: MatrixHarness
    room: str
    _events: dict[str, str] = field(default_factory=dict)
    nowhere = RouteKey("matrix", "!nosuchroom:vigil.test")

    async def deliver(self, text: str, external_id: str) -> Ack:
        state = self.h.fake.state
        duplicate = external_id in self._events
        if duplicate:
            state.replay(self.room, self._events[external_id])
        else:
            self._events[external_id] = state.say(self.room, ALICE, text)
        event_id = self._events[external_id]
        await eventually(lambda: self.h.fake.acknowledged(event_id), what="the sync past the event")
        entry = self.stored(event_id)
        return Ack(event_id, duplicate, entry.id if entry else None)

    def stored(self, external_id: str) -> InboxEntry | None:
        key = self._events.get(external_id, external_id)
        return inbox_entry(self.h.profile.state_db, "matrix", key)

    def new_settings(self) -> Settings:
        return self.h.settings.copy_with(update={"matrix": self.h.settings.matrix.copy_with(update={"allow": [ALICE]})})

    async def answers(self, ack: Ack) -> list[str]:
        return self.h.answers(self.room) if self.h.idle() else []

    # -- the messaging part (tests/gateway/messaging_contract.py) ---------------------------
    @property
    def edit_interval(self) -> float:
        """The harness's adapter edits at a faster pace than the default second."""
        return self.h.adapter.streams.interval

    async def messages(self, ack: Ack) -> list[Any]:
        """The bot's messages in the room, each with every version its edits showed; the
        reactions it put under one are its buttons (✅ approves, ❌ denies)."""
        from tests.gateway.messaging_contract import Shown

        state, bot = self.h.fake.state, self.h.bot
        events = state.events(self.room, sender=bot)
        reactions = [e["content"]["m.relates_to"] for e in events if e["type"] == "m.reaction"]
        shown = []
        for event in events:
            relation = event["content"].get("m.relates_to") or {}
            if event["type"] != "m.room.message" or relation.get("rel_type") == "m.replace":
                continue
            edits = [e for e in events if (e["content"].get("m.relates_to") or {}).get("event_id") == event["event_id"]
                     and e["content"]["m.relates_to"].get("rel_type") == "m.replace"]
            versions = [event["content"]["body"]] + [e["content"]["m.new_content"]["body"] for e in edits]
            times = [e["origin_server_ts"] / 1000 for e in [event, *edits]]
            buttons = [{"✅": "✅ approve", "❌": "❌ deny"}[r["key"]] for r in reactions if r["event_id"] == event["event_id"]]
            url = event["content"].get("url")
            file = None
            if event["content"].get("msgtype") == "m.file" and isinstance(url, str):
                file = (event["content"]["filename"], state.media[url.rsplit("/", 1)[1]][0])
            shown.append(Shown(versions[-1], versions, times, buttons, file, event))
        return shown

    async def press(self, message: Any, label: str) -> None:
        self.h.fake.state.react(self.room, ALICE, message.ref["event_id"], label.split()[0])

    async def deliver_file(self, name: str, data: bytes, caption: str, external_id: str) -> Ack:
        event_id = self.h.fake.state.share_file(self.room, ALICE, name, data, caption=caption)
        self._events[external_id] = event_id
        await eventually(lambda: self.h.fake.acknowledged(event_id), what="the sync past the file")
        entry = self.stored(event_id)
        return Ack(event_id, False, entry.id if entry else None)

    async def fail_next_answer(self, ack: Ack, *, permanent: bool) -> None:
        self.h.fake.state.fail(10_000 if permanent else 2, 400 if permanent else 502, path="/send/m.room.message/")


class TestMatrixAdapterContract(AdapterContract):
    @pytest.fixture
    async def contract(self, make_matrix: Factory) -> ContractHarness:
        h = await make_matrix()
        return MatrixContract(h, await h.dm())  # type: ignore[return-value]

