"""The adapter contract on the Matrix adapter inside a real gateway, with the fake homeserver as
the platform side: a delivery is a message Alice writes in her direct room, acknowledged when
the adapter's next ``/sync`` moves past it; a redelivery is the same event handed out again."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness, eventually
from tests.gateway.adapters.matrix.conftest import ALICE, Factory, MatrixHarness
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import Adapter, GatewayPort
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry, RouteKey


@dataclass
class MatrixContract:
    h: MatrixHarness
    room: str
    refuses_unknown_conversation: bool = True
    _events: dict[str, str] = field(default_factory=dict)

    @property
    def adapter(self) -> Adapter:
        return self.h.adapter

    @property
    def gateway(self) -> GatewayPort:
        return self.h.gateway

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
        with sqlite3.connect(self.h.profile.state_db) as db:
            row = db.execute("SELECT id FROM gateway_inbox WHERE adapter = 'matrix' AND external_id = ?", (key,)).fetchone()
        if row is None:
            return None
        store = SQLiteStore(self.h.profile.state_db)
        try:
            return store.gateway.inbox_get(row[0])
        finally:
            store.close()

    def unknown_conversation(self) -> OutboxEntry:
        now = time.time()
        return OutboxEntry(id=999_999, route=RouteKey("matrix", "!nosuchroom:vigil.test"), kind="reply", text="anyone?",
                           session_id=None, inbox_id=None, created_at=now, status="pending", attempts=0,
                           next_attempt_at=now)

    async def open_stream(self) -> None:
        return None

    def new_settings(self) -> Settings:
        return self.h.settings.copy_with(update={"matrix": self.h.settings.matrix.copy_with(update={"allow": [ALICE]})})

    async def answers(self, ack: Ack) -> list[str]:
        return self.h.answers(self.room) if self.h.idle() else []


class TestMatrixAdapterContract(AdapterContract):
    @pytest.fixture
    async def contract(self, make_matrix: Factory) -> ContractHarness:
        h = await make_matrix()
        return MatrixContract(h, await h.dm())  # type: ignore[return-value]

