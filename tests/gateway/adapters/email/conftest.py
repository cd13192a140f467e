"""The Email tests' parts: a real SMTP server (aiosmtpd, :mod:`.smtp_server`) and a real
gateway in-process (``serve`` over a SQLite store, the fake model over HTTP) whose email
adapter is the one the platform registry makes from the profile's settings."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest

pytest.importorskip("aiosmtpd")  # a dev extra: pip install -e '.[dev]'

from tests.gateway.adapters.email.smtp_server import SmtpServer  # noqa: E402

if TYPE_CHECKING:
    from tests.gateway.adapters.email.imap_server import ImapServer
from tests.gateway.adapters.harness import Gateways, settings_for  # noqa: E402
from vigil.clock import SystemClock  # noqa: E402
from vigil.config.settings import Settings  # noqa: E402
from vigil.gateway.lock import acquire  # noqa: E402
from vigil.gateway.run import GatewayConfig, GatewayRun  # noqa: E402
from vigil.profiles import Profile  # noqa: E402
from vigil.schedule.cron.jobs import JobSpec, new_job  # noqa: E402
from vigil.schedule.cron.repo import CronRepo  # noqa: E402
from vigil.schedule.cron.runs import RunRecord  # noqa: E402
from vigil.store import SQLiteStore  # noqa: E402
from vigil.testing.fake_model import FakeModelServer  # noqa: E402
from vigil.testing.waiting import eventually  # noqa: E402

AGENT = "agent@example.com"
ME = "me@example.com"


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer().start()
    try:
        yield server
    finally:
        server.stop()


def email_settings(fake_model: FakeModelServer, smtp_url: str, **email: Any) -> Settings:
    """A profile's settings with email on (send-only unless ``email`` says more)."""
    return settings_for(fake_model, base=Settings.from_data({
        "timezone": "UTC", "email": {"enabled": True, "address": AGENT, "smtp_url": smtp_url, **email},
    }))


@dataclass
class Running:
    run: GatewayRun
    store: SQLiteStore
    profile: Profile
    settings: Settings
    lines: list[str]
    model: FakeModelServer

    @property
    def adapter(self) -> Any:
        """The email adapter as the gateway runs it (inside its supervisor)."""
        return self.run.gateway.adapters["email"]

    @property
    def repo(self) -> CronRepo:
        return CronRepo(self.store, SystemClock())

    def add(self, name: str, deliver: str) -> None:
        job = new_job(name, JobSpec(schedule="every 1h", prompt="report", deliver=deliver),
                      now=SystemClock().now(), default_tz="UTC", skills_dir=None)  # type: ignore[arg-type]
        self.repo.add(job)

    async def run_job(self, name: str) -> RunRecord:
        claim = await asyncio.to_thread(self.repo.claim_manual, name)
        record = await self.run.cron.execute(claim)
        assert record is not None
        return record

    async def cron_mail(self, name: str, answer: str) -> RunRecord:
        """Run a new cron job ``name`` delivered to ``email:ME``, the model answering ``answer``."""
        self.add(name, f"email:{ME}")
        self.model.queue(answer)
        return await self.run_job(name)

    def delivery(self, record: RunRecord) -> dict[str, Any]:
        stored = self.repo.runs.get(record.job, record.stamp)
        assert stored is not None
        return stored.delivery or {}


StartGateway = Callable[[Settings], Awaitable[Running]]
Reading = Callable[..., Awaitable[Running]]


@pytest.fixture
async def email_gateway(vigil_home: Any, fake_model: FakeModelServer) -> AsyncIterator[StartGateway]:
    """Start a gateway with the given settings (once per test)."""
    profile = Profile("default", vigil_home).ensure()
    store = SQLiteStore(profile.state_db)
    lock = acquire(profile)
    gateways = Gateways()
    config = GatewayConfig(poll_interval=0, stop_grace=2, serve_http=False, adapter_watch=0.02,
                           adapter_backoff=(0.05, 0.2))

    async def start(settings: Settings) -> Running:
        serving = await gateways.serve(profile, settings, config=config, store=store)
        return Running(serving.run, store, profile, settings, serving.lines, fake_model)

    try:
        yield start
    finally:
        await gateways.close()
        lock.release()
        store.close()


PASSWORD = "imap-and-smtp"
PASSWORD_ENV = "VIGIL_TEST_EMAIL_PASSWORD"


@pytest.fixture
def imap(monkeypatch: pytest.MonkeyPatch) -> Iterator["ImapServer"]:
    """A real IMAP server (Dovecot) holding the agent's mailbox; its password in the environment."""
    from tests.gateway.adapters.email.imap_server import DOVECOT, ImapServer

    if DOVECOT is None:
        pytest.skip("Dovecot is not installed (apt-get install dovecot-imapd)")
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    server = ImapServer(AGENT, PASSWORD).start()
    try:
        yield server
    finally:
        server.stop()


def receiving_settings(fake_model: FakeModelServer, smtp: SmtpServer, imap: "ImapServer", *,
                       poll_seconds: int = 1, **email: Any) -> Settings:
    """Settings that read the agent's mailbox (looking at least every ``poll_seconds``) and answer ``ME``."""
    return email_settings(fake_model, smtp.url, imap_url=imap.url, password_env=PASSWORD_ENV,
                          poll_seconds=poll_seconds, allow=[ME], **email)


@pytest.fixture
def reading(email_gateway: StartGateway, fake_model: FakeModelServer, smtp: SmtpServer,
            imap: "ImapServer") -> Reading:
    """Start a gateway with :func:`receiving_settings` (``options`` passed on), once it reads the mailbox."""
    async def start(**options: Any) -> Running:
        running = await email_gateway(receiving_settings(fake_model, smtp, imap, **options))
        await eventually(lambda: running.adapter.health().ok, what="reading the mailbox")
        return running

    return start
