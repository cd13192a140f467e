"""A gateway in-process: the real core over a real SQLite store and the fake model over HTTP,
with a recording platform adapter (a platform of the tests, not a stand-in for vigil code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Sequence

import pytest

from vigil.config.settings import ModelSettings, Settings
from vigil.gateway.adapters.base import AdapterHealth, DeliveryError, GatewayPort
from vigil.gateway.core import Gateway
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually  # noqa: F401 (for the tests that import it from here)


async def _no_sleep(_seconds: float) -> None:
    return None


@dataclass
class RecordingAdapter:
    """A platform that records what it is sent; ``failures`` makes the next sends fail."""

    name: str = "chat"
    sent: list[OutboxEntry] = field(default_factory=list)
    live_events: list[tuple[RouteKey, dict[str, Any]]] = field(default_factory=list)
    failures: int = 0
    permanent: bool = False
    gateway: GatewayPort | None = None
    stopped: bool = False
    reloaded: list[Settings] = field(default_factory=list)

    async def start(self, gateway: GatewayPort) -> None:
        self.gateway = gateway

    async def stop(self) -> None:
        self.stopped = True

    def http_routes(self) -> Sequence[Any]:
        return []

    async def send(self, message: OutboxEntry) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise DeliveryError("the platform is down", retryable=not self.permanent, retry_after=0.01)
        self.sent.append(message)

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        self.live_events.append((route, event))

    def health(self) -> AdapterHealth:
        return AdapterHealth(True, "recording")

    async def reload(self, settings: Settings) -> None:
        self.reloaded.append(settings)

    def texts(self) -> list[str]:
        return [entry.text for entry in self.sent]


@pytest.fixture(autouse=True)
def _no_gateway_outlives_its_test() -> Iterator[None]:
    from tests.gateway.process import kill_leftovers

    yield
    kill_leftovers()


@dataclass
class Harness:
    store: SQLiteStore
    profile: Profile
    settings: Settings
    fake: FakeModelServer
    adapter: RecordingAdapter
    gateway: Gateway
    lines: list[str]


GatewayFactory = Callable[..., Awaitable[Harness]]


@pytest.fixture
async def make_gateway(fake_model: FakeModelServer, tmp_path: Path) -> AsyncIterator[GatewayFactory]:
    built: list[Harness] = []
    profile = Profile("default", tmp_path / "home").ensure()

    async def factory(*, settings: Settings | None = None, start: bool = True, **gateway_settings: Any) -> Harness:
        model = ModelSettings.from_data({
            "provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
            "api_key": fake_model.api_key, "timeout": 10,
        })
        settings = (settings or Settings()).copy_with(update={"model": model})
        if gateway_settings:
            settings = settings.copy_with(update={"gateway": settings.gateway.copy_with(update=gateway_settings)})
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        store = SQLiteStore(profile.state_db, durable=False)
        adapter = RecordingAdapter()
        lines: list[str] = []
        gateway = Gateway(store=store, profile=profile, settings=settings, client=client,
                          adapters={adapter.name: adapter}, say=lines.append)
        # The recording platform's messages carry no sender: it stands for an adapter that
        # authenticates its one user itself, as the web chat does (pairing is tested apart).
        gateway.authorization.exempt = frozenset({"web", adapter.name})
        harness = Harness(store, profile, settings, fake_model, adapter, gateway, lines)
        built.append(harness)
        if start:
            await gateway.start()
        return harness

    yield factory
    for harness in built:
        await harness.gateway.stop(1.0)
        await harness.gateway.client.aclose() if hasattr(harness.gateway.client, "aclose") else None
        harness.store.close()
