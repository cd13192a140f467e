"""A real gateway in-process (``serve``: the core, the HTTP server on a loopback port, a
SQLite store file, the fake model over HTTP) with the Slack adapter on, against the fake
Slack Web API; users talk to it through the fake's signed Events sender."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import pytest

from tests.gateway.adapters.harness import Gateways, ServedHarness, inbox_entry, settings_for
from tests.gateway.settling import settled_at
from vigil.gateway.adapters.slack import SlackAdapter
from vigil.gateway.adapters.slack.editing import WORKING
from vigil.platforms.slack import SlackSettings
from vigil.profiles import Profile
from vigil.store.gateway.gateway_tables import InboxEntry
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.slack_api import FakeSlackServer
from vigil.testing.slack_api.events import EventsSender
from vigil.testing.waiting import eventually  # noqa: F401 (for the tests that import it from here)

ALICE, BOB = "U0ALICE", "U0BOB"
HANG = 20.0


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
class SlackHarness(ServedHarness):
    fake: FakeSlackServer

    @cached_property
    def sender(self) -> EventsSender:
        """Slack's signed Events API requests to this gateway."""
        return EventsSender(self.url + "/slack/events", self.fake.signing_secret, self.fake.state)

    @property
    def adapter(self) -> Any:
        return self.supervised("slack", SlackAdapter)

    def stored(self, external_id: str) -> InboxEntry | None:
        """The inbox entry of ``external_id``, as another connection to the file sees it."""
        return inbox_entry(self.profile.state_db, "slack", external_id)

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
    gateways = Gateways()

    async def start(*, gateway: dict[str, Any] | None = None, **changes: Any) -> SlackHarness:
        profile = Profile("default", tmp_path / "home").ensure()
        settings = settings_for(fake_model, gateway=gateway, slack=slack_settings(slack_env, **changes))
        return SlackHarness(await gateways.serve(profile, settings), fake_model, slack_env)

    yield start
    await gateways.close()


@pytest.fixture
async def slack(make_slack: Callable[..., Any]) -> SlackHarness:
    return await make_slack()
