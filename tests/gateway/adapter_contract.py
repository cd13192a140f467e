"""The contract every platform adapter keeps (:class:`vigil.gateway.adapters.base.Adapter`).

An adapter's test module subclasses :class:`AdapterContract` and provides one fixture,
``contract``: a :class:`ContractHarness` whose adapter runs inside a real, started gateway (the
real core over a real store and the fake model), with the platform side played by the harness
(the web chat: HTTP requests; Slack and Telegram: their fake platform servers)::

    class TestWebAdapterContract(AdapterContract):
        @pytest.fixture
        async def contract(self, ...) -> AsyncIterator[ContractHarness]:
            ...

Nothing here knows a platform: what differs between them is the harness's job.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

import pytest
from starlette.routing import BaseRoute

from tests.gateway.messaging_contract import MessagingContract
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import Adapter, DeliveryError, GatewayPort
from vigil.store.gateway.gateway_tables import FINISHED_STATUSES, InboxEntry, OutboxEntry
from vigil.testing.waiting import eventually

HANG_GUARD = 20.0
"""Seconds after which a wait is a hang (a failure), not a slow machine."""


@dataclass(frozen=True, slots=True)
class Ack:
    """What the platform side got back when the adapter acknowledged one delivery."""

    external_id: str
    duplicate: bool
    inbox_id: int | None = None
    """The inbox entry the adapter named in its acknowledgement, where the platform shows one."""


class ContractHarness(Protocol):
    """One adapter inside a running gateway, and the platform side of it."""

    adapter: Adapter
    gateway: GatewayPort

    refuses_unknown_conversation: bool
    """Whether the platform refuses a message to a conversation it does not know (Slack,
    Telegram: ``DeliveryError``); the web chat accepts it (the history holds the answer)."""

    async def deliver(self, text: str, external_id: str) -> Ack:
        """Have the platform deliver one message (``external_id``: its message id or
        idempotency key) and return as soon as the adapter acknowledged it."""
        ...

    def stored(self, external_id: str) -> InboxEntry | None:
        """The inbox entry of ``external_id`` as a separate connection to the store's file sees
        it (committed data only), or ``None``."""
        ...

    def unknown_conversation(self) -> OutboxEntry:
        """An outbox entry addressed to a conversation the platform does not know."""
        ...

    async def open_stream(self) -> asyncio.Task[Any] | None:
        """Open one of the platform's live streams (the web chat: a page's event stream) and
        return a task that ends when the stream does; ``None`` where the platform has none."""
        ...

    def new_settings(self) -> Settings:
        """Settings a reload should take (changed where the adapter has something to change)."""
        ...

    async def answers(self, ack: Ack) -> list[str]:
        """The answers the conversation of a delivered message holds."""
        ...


class AdapterContract(MessagingContract):
    """The contract tests; see the module docstring (and :mod:`tests.gateway.messaging_contract` for
    what a messaging platform keeps of what it declares)."""

    async def test_health_is_ok_after_start(self, contract: ContractHarness) -> None:
        health = contract.adapter.health()
        assert health.ok, health.detail

    async def test_start_and_stop_are_idempotent(self, contract: ContractHarness) -> None:
        adapter = contract.adapter
        await adapter.start(contract.gateway)  # a second start: still one working adapter
        assert adapter.health().ok
        ack = await contract.deliver("after a second start", _key())
        assert not ack.duplicate
        await adapter.stop()
        await adapter.stop()
        assert not adapter.health().ok
        await adapter.start(contract.gateway)  # and it can be started again
        assert adapter.health().ok
        assert not (await contract.deliver("after a restart", _key())).duplicate

    async def test_stop_ends_open_streams_while_the_gateway_runs(self, contract: ContractHarness) -> None:
        stream = await contract.open_stream()
        if stream is None:
            pytest.skip("the platform has no live stream")
        assert not stream.done()
        await contract.adapter.stop()
        await asyncio.wait_for(stream, HANG_GUARD)  # ended by the adapter, not by the server's shutdown
        assert contract.gateway.accepting  # the gateway still runs

    def test_http_routes_are_starlette_routes(self, contract: ContractHarness) -> None:
        routes = list(contract.adapter.http_routes())
        assert all(isinstance(route, BaseRoute) for route in routes), routes
        keys = [(getattr(route, "path", None), tuple(sorted(getattr(route, "methods", None) or ()))) for route in routes]
        assert len(keys) == len(set(keys)), "two routes answer the same path and method"

    async def test_send_to_an_unknown_conversation(self, contract: ContractHarness) -> None:
        entry = contract.unknown_conversation()
        if contract.refuses_unknown_conversation:
            with pytest.raises(DeliveryError):
                await contract.adapter.send(entry)
        else:
            await contract.adapter.send(entry)
        assert contract.adapter.health().ok

    async def test_reload_takes_new_settings_and_keeps_working(self, contract: ContractHarness) -> None:
        await contract.adapter.reload(contract.new_settings())
        assert contract.adapter.health().ok
        ack = await contract.deliver("after the reload", _key())
        assert not ack.duplicate
        assert contract.stored(ack.external_id) is not None

    async def test_an_inbound_message_is_durable_before_it_is_acknowledged(self, contract: ContractHarness) -> None:
        key = _key()
        ack = await contract.deliver("remember this", key)
        entry = contract.stored(key)  # read at once, through another connection
        assert entry is not None, "acknowledged before the message was in the store"
        # the platform may choose the message id (Telegram does): the ack names the one stored
        assert entry.text == "remember this" and entry.external_id == ack.external_id
        assert entry.route.adapter == contract.adapter.name
        if ack.inbox_id is not None:
            assert ack.inbox_id == entry.id

    async def test_a_redelivery_is_a_duplicate_answered_once(self, contract: ContractHarness) -> None:
        key = _key()
        first = await contract.deliver("only once, please", key)
        again = await contract.deliver("only once, please", key)
        assert not first.duplicate and again.duplicate
        if first.inbox_id is not None:
            assert again.inbox_id == first.inbox_id
        answers = await eventually(lambda: contract.answers(first), what="the answer")
        # once its one entry is finished no turn can answer it again: only an inbox entry is answered
        await eventually(lambda: _finished(contract.stored(key)), what="the message's entry finished")
        assert len(await contract.answers(first)) == len(answers) == 1


def _finished(entry: InboxEntry | None) -> bool:
    return entry is not None and entry.status in FINISHED_STATUSES


def _key() -> str:
    return uuid.uuid4().hex
