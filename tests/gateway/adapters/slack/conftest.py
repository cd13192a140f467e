"""A real gateway in-process (``serve``: the core, the HTTP server on a loopback port, a
SQLite store file, the fake model over HTTP) with the Slack adapter on, against the fake
Slack Web API; users talk to it through the fake's signed Events sender."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import pytest

from tests.gateway.process import free_port
from vigil.config.settings import ModelSettings, Settings
from vigil.gateway.adapters.slack import SlackAdapter
from vigil.gateway.adapters.slack.editing import WORKING
from vigil.gateway.run import GatewayConfig, GatewayRun, serve
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.platforms.slack import SlackSettings
from vigil.profiles import Profile
from tests.gateway.settling import settled_at
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import InboxEntry
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.slack_api import FakeSlackServer
from vigil.testing.slack_api.events import EventsSender
from vigil.testing.waiting import eventually  # noqa: F401 (for the tests that import it from here)

ALICE, BOB = "U0ALICE", "U0BOB"
HANG = 20.0


async def _no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture(scope="session")
def fake_slack_session() -> Iterator[FakeSlackServer]:
    server = FakeSlackServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_slack(fake_slack_session: FakeSlackServer) -> Iterator[FakeSlackServer]:
    """The fake Slack, running, emptied before and after the test."""
    fake_slack_session.start()
    fake_slack_session.state.reset()
    yield fake_slack_session
    fake_slack_session.start()
    fake_slack_session.state.reset()


@dataclass
class SlackHarness:
    run: GatewayRun
    profile: Profile
    settings: Settings
    fake: FakeSlackServer
    model: FakeModelServer
    sender: EventsSender
    lines: list[str]
    reload: asyncio.Event
    refuses_unknown_conversation: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def adapter(self) -> Any:
        """The Slack adapter as the gateway runs it (inside its supervisor, which passes the
        adapter's own attributes through)."""
        adapter = self.run.gateway.adapters["slack"]
        assert isinstance(getattr(adapter, "inner", adapter), SlackAdapter)
        return adapter

    @property
    def gateway(self) -> Any:
        return self.run.gateway

    def stored(self, external_id: str) -> InboxEntry | None:
        """The inbox entry of ``external_id``, as another connection to the file sees it."""
        with sqlite3.connect(self.profile.state_db) as db:
            row = db.execute("SELECT id FROM gateway_inbox WHERE adapter = 'slack' AND external_id = ?",
                             (external_id,)).fetchone()
        if row is None:
            return None
        store = SQLiteStore(self.profile.state_db)
        try:
            return store.gateway.inbox_get(row[0])
        finally:
            store.close()

    def settled(self) -> bool:
        """Nothing left to answer or to send (:mod:`tests.gateway.settling`): no more can arrive."""
        return settled_at(self.profile.state_db)

    def answers(self, channel: str, thread: str | None = None) -> list[str]:
        """What the bot has said there, placeholders apart."""
        return [text for text in self.fake.state.texts(channel, thread) if text != WORKING and not text.endswith(" …")]


def slack_settings(fake: FakeSlackServer, **changes: Any) -> SlackSettings:
    return SlackSettings(enabled=True, api_url=fake.api_url, allow=[ALICE, BOB], **changes)


@pytest.fixture
def slack_env(fake_slack: FakeSlackServer, monkeypatch: pytest.MonkeyPatch) -> FakeSlackServer:
    monkeypatch.setenv("SLACK_BOT_TOKEN", fake_slack.bot_token)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", fake_slack.signing_secret)
    return fake_slack


@pytest.fixture
async def make_slack(slack_env: FakeSlackServer, fake_model: FakeModelServer,
                     tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start a gateway with Slack on: ``await make_slack(**slack_changes, gateway=...)``."""
    running: list[tuple[asyncio.Event, asyncio.Task[Any], Any, SQLiteStore]] = []

    async def start(*, gateway: dict[str, Any] | None = None, **changes: Any) -> SlackHarness:
        profile = Profile("default", tmp_path / "home").ensure()
        model = ModelSettings.from_data({
            "provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
            "api_key": fake_model.api_key, "timeout": 10,
        })
        settings = Settings().copy_with(update={"model": model, "slack": slack_settings(slack_env, **changes)})
        if gateway:
            settings = settings.copy_with(update={"gateway": settings.gateway.copy_with(update=gateway)})
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        store = SQLiteStore(profile.state_db)
        stop, reload = asyncio.Event(), asyncio.Event()
        started: asyncio.Future[GatewayRun] = asyncio.get_running_loop().create_future()
        lines: list[str] = []
        serving = asyncio.create_task(serve(
            store=store, profile=profile, settings=settings, client=client, stop=stop, reload=reload,
            announce=lines.append, config=GatewayConfig(web_port=free_port(), stop_grace=1.0),
            on_started=started.set_result,
        ))
        running.append((stop, serving, client, store))
        done, _ = await asyncio.wait([started, serving], timeout=30, return_when=asyncio.FIRST_COMPLETED)
        if serving in done:
            serving.result()
        run = started.result()
        assert run.url is not None
        sender = EventsSender(run.url + "/slack/events", slack_env.signing_secret, slack_env.state)
        harness = SlackHarness(run, profile, settings, slack_env, fake_model, sender, lines, reload)
        harness.extra.update(stop=stop, serving=serving)  # a test may stop this gateway itself
        return harness

    yield start
    for stop, serving, client, store in running:
        stop.set()
        await asyncio.wait_for(serving, 60)
        await client.aclose()
        store.close()


@pytest.fixture
async def slack(make_slack: Callable[..., Any]) -> SlackHarness:
    return await make_slack()
