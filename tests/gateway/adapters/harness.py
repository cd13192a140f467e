"""What every platform's in-process gateway harness does alike, written once.

A platform's tests run the real gateway in the test's own event loop, over a real SQLite store
file and the fake model over HTTP, in one of two ways:

* ``serve`` — the gateway process's code, with its HTTP server on a free loopback port, cron and
  the adapter supervisor (:meth:`Gateways.serve`, a :class:`Serving`; a harness over it
  subclasses :class:`ServedHarness`);
* the core alone (:class:`vigil.gateway.core.Gateway`) running one adapter the test built
  (:meth:`Gateways.core`, a harness subclassing :class:`CoreHarness`).

Beside them: the settings of a profile that talks to the fake model (:func:`settings_for`),
reading an inbox entry as another connection to the store file sees it (:func:`inbox_entry`),
an outbox entry to a conversation the platform does not know (:func:`outbox_to`), and the
members of an adapter-contract harness that are the same on every platform
(:class:`ContractParts`). What differs between platforms stays in their own ``conftest``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.gateway.process import free_port
from vigil.config.settings import ModelSettings, Settings
from vigil.gateway.core import Gateway
from vigil.gateway.run import GatewayConfig, GatewayRun, serve
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry, RouteKey
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually

START_TIMEOUT = 30.0
"""Seconds a gateway may take to start before the test fails."""
STOP_TIMEOUT = 60.0
"""Seconds a gateway may take to stop (its turns get ``stop_grace`` of them)."""


def fake_model_settings(fake_model: FakeModelServer) -> ModelSettings:
    """The model section of a profile whose model is the fake server."""
    return ModelSettings.from_data({"provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
                                    "api_key": fake_model.api_key, "timeout": 10})


def settings_for(fake_model: FakeModelServer, *, base: Settings | None = None,
                 gateway: dict[str, Any] | None = None, **sections: Any) -> Settings:
    """``base`` (default settings) with the fake model, the given sections (``slack=...``) and
    the ``gateway`` section's fields changed as given."""
    settings = (base or Settings()).copy_with(update={"model": fake_model_settings(fake_model), **sections})
    if gateway:
        settings = settings.copy_with(update={"gateway": settings.gateway.copy_with(update=gateway)})
    return settings


async def _no_sleep(_seconds: float) -> None:
    return None


async def model_client(settings: Settings) -> Any:
    """The model client of ``settings``, which does not retry: a failure shows at once."""
    return await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))


def inbox_entry(state_db: Path | str, adapter: str, *external_ids: str) -> InboxEntry | None:
    """The inbox entry ``adapter`` stored under one of ``external_ids``, as another connection to
    the store file sees it (committed data only), or ``None``."""
    marks = ", ".join("?" * len(external_ids))
    with closing(sqlite3.connect(state_db)) as db:
        row = db.execute(f"SELECT id FROM gateway_inbox WHERE adapter = ? AND external_id IN ({marks})",
                         (adapter, *external_ids)).fetchone()
    if row is None:
        return None
    store = SQLiteStore(state_db)
    try:
        return store.gateway.inbox_get(row[0])
    finally:
        store.close()


def outbox_to(route: RouteKey) -> OutboxEntry:
    """A pending reply to ``route`` that no turn wrote (for a conversation the platform does not know)."""
    now = time.time()
    return OutboxEntry(id=999_999, route=route, kind="reply", text="anyone there?", session_id=None,
                       inbox_id=None, created_at=now, status="pending", attempts=0, next_attempt_at=now)


@dataclass
class Serving:
    """The gateway process's code (``serve``) running in a task of the test's event loop."""

    run: GatewayRun
    profile: Profile
    settings: Settings
    store: SQLiteStore
    lines: list[str]
    """What the gateway said."""
    reload: asyncio.Event
    """Set it to do what SIGHUP does."""
    stop: asyncio.Event
    task: asyncio.Task[None]
    client: Any
    owns_store: bool = True

    @property
    def gateway(self) -> Any:
        return self.run.gateway

    @property
    def url(self) -> str:
        assert self.run.url is not None, "this gateway serves no HTTP"
        return self.run.url

    async def halt(self) -> None:
        """Stop the gateway as a SIGTERM would, and wait for it to end (its store stays open)."""
        self.stop.set()
        await asyncio.wait_for(self.task, STOP_TIMEOUT)

    async def close(self) -> None:
        await self.halt()
        await self.client.aclose()
        if self.owns_store:
            self.store.close()


@dataclass
class ServedHarness:
    """A platform's harness over a :class:`Serving` gateway: what its tests read by name."""

    serving: Serving
    model: FakeModelServer

    @property
    def run(self) -> GatewayRun:
        return self.serving.run

    @property
    def gateway(self) -> Any:
        return self.serving.gateway

    @property
    def profile(self) -> Profile:
        return self.serving.profile

    @property
    def settings(self) -> Settings:
        return self.serving.settings

    @property
    def lines(self) -> list[str]:
        """What the gateway said."""
        return self.serving.lines

    @property
    def url(self) -> str:
        return self.serving.url

    def supervised(self, name: str, kind: type) -> Any:
        """The adapter ``name`` as the gateway runs it: inside its supervisor, which passes the
        adapter's own attributes through (checked to be a ``kind``)."""
        adapter = self.gateway.adapters[name]
        assert isinstance(getattr(adapter, "inner", adapter), kind)
        return adapter

    async def sighup(self) -> None:
        """Do what SIGHUP does (reload the settings and the token); back once the reload is done."""
        reloads = self.run.reloads
        self.serving.reload.set()
        await eventually(lambda: self.run.reloads > reloads, what="the reload")


@dataclass
class CoreHarness:
    """One platform adapter in the gateway's core (no HTTP server, no supervisor) over a store
    that is not synced to disk on every commit."""

    model: FakeModelServer
    gateway: Gateway
    adapter: Any
    store: SQLiteStore
    profile: Profile
    settings: Settings
    lines: list[str]
    """What the gateway said."""

    async def close(self) -> None:
        await self.gateway.stop(1.0)
        if hasattr(self.gateway.client, "aclose"):
            await self.gateway.client.aclose()
        self.store.close()


Core = TypeVar("Core", bound=CoreHarness)


class Gateways:
    """The gateways one fixture starts, all stopped and closed by :meth:`close` when it ends."""

    def __init__(self) -> None:
        self._started: list[Serving | CoreHarness] = []

    async def serve(self, profile: Profile, settings: Settings, *, config: GatewayConfig | None = None,
                    store: SQLiteStore | None = None) -> Serving:
        """``serve`` with ``settings`` (on a free port, a second of grace at stop, unless ``config``
        says otherwise) over ``store`` or a store of its own, returned once it has started."""
        client = await model_client(settings)
        owns_store = store is None
        store = store or SQLiteStore(profile.state_db)
        stop, reload, lines = asyncio.Event(), asyncio.Event(), []
        started: asyncio.Future[GatewayRun] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve(
            store=store, profile=profile, settings=settings, client=client, stop=stop, reload=reload,
            announce=lines.append, config=config or GatewayConfig(web_port=free_port(), stop_grace=1.0),
            on_started=started.set_result,
        ))
        try:
            done, _ = await asyncio.wait([started, task], timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                task.result()  # it ended before it started: its error is the test's
            assert started.done(), f"the gateway did not start within {START_TIMEOUT:g} s"
        except BaseException:
            stop.set()
            await asyncio.wait([task], timeout=STOP_TIMEOUT)
            await client.aclose()
            if owns_store:
                store.close()
            raise
        serving = Serving(started.result(), profile, settings, store, lines, reload, stop, task, client, owns_store)
        self._started.append(serving)
        return serving

    async def core(self, kind: type[Core], *, model: FakeModelServer, profile: Profile, settings: Settings,
                   adapter: Any, store: SQLiteStore | None = None, start: bool = True, **fields: Any) -> Core:
        """A :class:`CoreHarness` of ``kind`` (its own ``fields`` given) whose gateway runs
        ``adapter`` alone; started unless ``start`` is false."""
        client = await model_client(settings)
        store = store or SQLiteStore(profile.state_db, durable=False)
        lines: list[str] = []
        gateway = Gateway(store=store, profile=profile, settings=settings, client=client,
                          adapters={adapter.name: adapter}, say=lines.append)
        harness = kind(model=model, gateway=gateway, adapter=adapter, store=store, profile=profile,
                       settings=settings, lines=lines, **fields)
        self._started.append(harness)
        if start:
            await gateway.start()
        return harness

    async def close(self) -> None:
        for started in self._started:
            await started.close()


class ContractParts:
    """The members of an adapter-contract harness (``ContractHarness`` in
    :mod:`tests.gateway.adapter_contract`, ``MessagingHarness`` in
    :mod:`tests.gateway.messaging_contract`) that are alike on every platform whose harness
    ``h`` runs the adapter in a gateway: a subclass names ``nowhere``, a conversation its
    platform does not know."""

    h: Any
    nowhere: RouteKey
    refuses_unknown_conversation: bool = True

    @property
    def adapter(self) -> Any:
        return self.h.adapter

    @property
    def gateway(self) -> Any:
        return self.h.gateway

    @property
    def model(self) -> Any:
        return self.h.model

    @property
    def lines(self) -> list[str]:
        return self.h.lines

    def unknown_conversation(self) -> OutboxEntry:
        return outbox_to(self.nowhere)

    async def open_stream(self) -> None:
        return None  # answers are sent to the platform; nothing of the adapter's stays open
