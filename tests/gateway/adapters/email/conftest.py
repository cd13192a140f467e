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
from vigil.clock import SystemClock  # noqa: E402
from vigil.config.settings import ModelSettings, Settings  # noqa: E402
from vigil.gateway.lock import acquire  # noqa: E402
from vigil.gateway.run import GatewayConfig, GatewayRun, serve  # noqa: E402
from vigil.models.factory import build_client  # noqa: E402
from vigil.models.retry import RetryPolicy  # noqa: E402
from vigil.profiles import Profile  # noqa: E402
from vigil.schedule.cron.jobs import JobSpec, new_job  # noqa: E402
from vigil.schedule.cron.repo import CronRepo  # noqa: E402
from vigil.schedule.cron.runs import RunRecord  # noqa: E402
from vigil.store import SQLiteStore  # noqa: E402
from vigil.testing.fake_model import FakeModelServer  # noqa: E402

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
    model = ModelSettings.from_data({"provider": "openai", "name": "fake-model", "base_url": fake_model.base_url,
                                          "api_key": fake_model.api_key, "timeout": 10})
    return Settings.from_data({
        "timezone": "UTC", "email": {"enabled": True, "address": AGENT, "smtp_url": smtp_url, **email},
    }).copy_with(update={"model": model})


async def _no_sleep(_seconds: float) -> None:
    return None


@dataclass
class Running:
    run: GatewayRun
    store: SQLiteStore
    profile: Profile
    settings: Settings
    lines: list[str]

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

    def delivery(self, record: RunRecord) -> dict[str, Any]:
        stored = self.repo.runs.get(record.job, record.stamp)
        assert stored is not None
        return stored.delivery or {}


StartGateway = Callable[[Settings], Awaitable[Running]]


@pytest.fixture
async def email_gateway(vigil_home: Any) -> AsyncIterator[StartGateway]:
    """Start a gateway with the given settings (once per test)."""
    profile = Profile("default", vigil_home).ensure()
    store = SQLiteStore(profile.state_db)
    lock = acquire(profile)
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    clients: list[Any] = []

    async def start(settings: Settings) -> Running:
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=0, sleep=_no_sleep))
        clients.append(client)
        lines: list[str] = []
        started: asyncio.Future[GatewayRun] = asyncio.get_running_loop().create_future()
        tasks.append(asyncio.create_task(serve(
            store=store, profile=profile, settings=settings, client=client, stop=stop, announce=lines.append,
            config=GatewayConfig(poll_interval=0, stop_grace=2, serve_http=False, adapter_watch=0.02,
                                 adapter_backoff=(0.05, 0.2)),
            on_started=started.set_result,
        )))
        return Running(await asyncio.wait_for(started, 20), store, profile, settings, lines)

    try:
        yield start
    finally:
        stop.set()
        for task in tasks:
            await asyncio.wait_for(task, 20)
        for client in clients:
            await client.aclose()
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
