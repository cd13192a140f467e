"""Email, send-only, against a real SMTP server (aiosmtpd): a cron job delivered to
``email:ADDRESS`` arrives as a mail with the answer as text and as Markdown rendered to HTML,
with proper headers; a server that puts the mail off (451) gets it again through the outbox,
once; one that refuses it (550) fails the run with the server's reason; a login is used when
``email.password_env`` names a password, and a wrong one is shown by ``gateway status``."""

from __future__ import annotations

import email.utils
import re
from typing import Iterator

import pytest

from tests.gateway.adapters.email.conftest import AGENT, ME, PASSWORD_ENV, StartGateway, email_settings
from tests.gateway.adapters.email.smtp_server import SmtpServer
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")

LOGIN = "app-password-1"
ANSWER = "Deploy is **green**.\n\n| service | state |\n|---|---|\n| api | up |\n\n<script>alert(1)</script>"


async def test_a_cron_answer_arrives_as_a_mail_with_text_and_html(
    email_gateway: StartGateway, smtp: SmtpServer, fake_model: FakeModelServer
) -> None:
    running = await email_gateway(email_settings(fake_model, smtp.url))
    record = await running.cron_mail("deploy", ANSWER)

    [got] = await eventually(lambda: smtp.mails, what="the mail")
    assert (got.envelope_from, got.envelope_to) == (AGENT, [ME])
    mail = got.mail
    assert (mail["From"], mail["To"]) == (AGENT, ME)
    assert mail["Subject"].startswith("cron: deploy — ")
    assert re.fullmatch(r"<vigil\.\d+\.[0-9a-f]{20}@example\.com>", mail["Message-ID"])
    assert abs(email.utils.parsedate_to_datetime(mail["Date"]).timestamp() - record.when) < 600
    assert mail["Auto-Submitted"] == "auto-generated"
    assert mail.get_content_type() == "multipart/alternative"
    assert got.part("text/plain").strip() == ANSWER
    html = got.part("text/html")
    assert "Deploy is <strong>green</strong>." in html and "<td>api</td>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html  # raw HTML in an answer is text

    await eventually(lambda: running.delivery(record).get("status") == "delivered", what="the run recorded delivered")
    assert smtp.tries == 1


async def test_a_mail_put_off_with_451_is_sent_again_and_arrives_once(
    email_gateway: StartGateway, smtp: SmtpServer, fake_model: FakeModelServer
) -> None:
    smtp.answer("451 4.7.1 Greylisted, try again later")
    running = await email_gateway(email_settings(fake_model, smtp.url))
    record = await running.cron_mail("later", "Second time lucky.")

    await eventually(lambda: running.delivery(record).get("status") == "delivered", timeout=30,
                     what="delivered on the second try")
    assert smtp.tries == 2
    assert [m.part("text/plain").strip() for m in smtp.mails] == ["Second time lucky."]


async def test_a_mail_refused_with_550_fails_the_run_with_the_servers_reason(
    email_gateway: StartGateway, smtp: SmtpServer, fake_model: FakeModelServer
) -> None:
    smtp.answer("550 5.1.1 No such user here")
    running = await email_gateway(email_settings(fake_model, smtp.url))
    record = await running.cron_mail("nobody", "Hello?")

    delivery = await eventually(lambda: (d := running.delivery(record)).get("status") == "failed" and d,
                                what="the run recorded failed")
    assert "550 5.1.1 No such user here" in delivery["detail"], delivery
    assert smtp.tries == 1 and smtp.mails == []


@pytest.fixture
def smtp_login() -> Iterator[SmtpServer]:
    """An SMTP server that takes mail only after a login with the password ``LOGIN``."""
    server = SmtpServer(password=LOGIN).start()
    try:
        yield server
    finally:
        server.stop()


async def test_the_login_uses_the_password_from_the_environment(
    email_gateway: StartGateway, smtp_login: SmtpServer, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, LOGIN)
    running = await email_gateway(email_settings(fake_model, smtp_login.url, password_env=PASSWORD_ENV))
    await eventually(lambda: running.adapter.health().ok, what="email connected")
    await running.cron_mail("secret", "Logged in.")
    await eventually(lambda: smtp_login.mails, what="the mail")
    assert smtp_login.logins and all(login == (AGENT, True) for login in smtp_login.logins)


async def test_a_wrong_password_is_shown_and_nothing_is_sent(
    email_gateway: StartGateway, smtp_login: SmtpServer, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "a-wrong-one")
    running = await email_gateway(email_settings(fake_model, smtp_login.url, password_env=PASSWORD_ENV))
    health = await eventually(lambda: (h := running.adapter.health()).last_error and h, what="the login's failure")
    assert not health.ok and health.state == "retrying"
    assert "the server refused the login: 535" in health.last_error
    assert "a-wrong-one" not in " ".join(running.lines) + str(health)
    assert smtp_login.mails == []


async def test_without_its_password_variable_email_is_misconfigured(
    email_gateway: StartGateway, smtp: SmtpServer, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    running = await email_gateway(email_settings(fake_model, smtp.url, password_env=PASSWORD_ENV))
    health = running.adapter.health()
    assert (health.ok, health.state) == (False, "misconfigured")
    assert "VIGIL_TEST_EMAIL_PASSWORD" in health.detail
    assert any("email is enabled but VIGIL_TEST_EMAIL_PASSWORD is not set" in line for line in running.lines)


def test_a_script_link_in_an_answer_is_text_in_the_html() -> None:
    from vigil.gateway.adapters.email.compose import render_html

    html = render_html("[x](javascript:alert(1)) and [docs](https://example.com/docs)", "t")
    assert "href=\"javascript" not in html and '<a href="https://example.com/docs">docs</a>' in html
