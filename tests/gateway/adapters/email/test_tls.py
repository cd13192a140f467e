"""Encryption on the way to the servers: ``smtp://`` and ``imap://`` upgrade with STARTTLS when
the server offers it (and log in only then), ``smtps://`` and ``imaps://`` speak TLS from the
start; a certificate that does not verify is refused for good. The certificate is self-signed (the openssl command) and
trusted through ``SSL_CERT_FILE``, as a person would for a private authority."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from tests.gateway.adapters.email.conftest import AGENT, ME, StartGateway, email_settings
from tests.gateway.adapters.email.smtp_server import SmtpServer, certificate
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually

pytestmark = [pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command makes the certificate"),
              pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")]

PASSWORD_ENV = "VIGIL_TEST_EMAIL_TLS_PASSWORD"


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(params=["starttls", "smtps"])
def server(request: pytest.FixtureRequest, pem: tuple[Path, Path]) -> Iterator[SmtpServer]:
    smtp = SmtpServer(password="over-tls", user=AGENT, tls=request.param, certificate=pem).start()
    try:
        yield smtp
    finally:
        smtp.stop()


async def test_the_login_and_the_mail_go_encrypted(
    server: SmtpServer, pem: tuple[Path, Path], email_gateway: StartGateway, fake_model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(pem[0]))
    monkeypatch.setenv(PASSWORD_ENV, "over-tls")
    running = await email_gateway(email_settings(fake_model, server.url, password_env=PASSWORD_ENV))
    await eventually(lambda: running.adapter.health().ok, what="email connected over TLS")
    await running.cron_mail("secure", "Sent over TLS.")
    [mail] = await eventually(lambda: server.mails, what="the mail")
    assert mail.part("text/plain").strip() == "Sent over TLS."
    assert server.logins and all(ok for _, ok in server.logins)


async def test_a_certificate_that_does_not_verify_is_refused(
    server: SmtpServer, email_gateway: StartGateway, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv(PASSWORD_ENV, "over-tls")
    running = await email_gateway(email_settings(fake_model, server.url, password_env=PASSWORD_ENV))
    health = await eventually(lambda: (h := running.adapter.health()).last_error and h, what="the TLS failure")
    assert not health.ok and "does not verify" in (health.last_error or "")
    assert server.logins == [] and server.mails == []


@pytest.mark.parametrize("scheme", ["imap", "imaps"])
async def test_the_mailbox_is_read_over_tls(
    scheme: str, pem: tuple[Path, Path], smtp: SmtpServer, email_gateway: StartGateway,
    fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.gateway.adapters.email.imap_server import DOVECOT, ImapServer, mail

    if DOVECOT is None:
        pytest.skip("Dovecot is not installed (apt-get install dovecot-imapd)")
    monkeypatch.setenv("SSL_CERT_FILE", str(pem[0]))
    monkeypatch.setenv(PASSWORD_ENV, "over-tls")
    imap = ImapServer(AGENT, "over-tls", certificate=pem).start()
    try:
        url = imap.tls_url if scheme == "imaps" else imap.url
        running = await email_gateway(email_settings(fake_model, smtp.url, imap_url=url, password_env=PASSWORD_ENV,
                                                     poll_seconds=1, allow=[ME]))
        await eventually(lambda: running.adapter.health().ok, what="reading the mailbox over TLS")
        fake_model.rule(contains="over tls?", reply="over TLS")
        imap.append(mail(ME, AGENT, "TLS", "over tls?", "<tls@example.com>"))
        await eventually(lambda: smtp.mails, what="the answer")
        assert any("Login:" in line and ", TLS" in line for line in imap.log().splitlines()), imap.log()
    finally:
        imap.stop()
