"""The real ``vigil gateway run`` (a subprocess) with email on, send-only, and a real SMTP
server that wants a login: ``vigil cron add … --deliver email:ADDRESS`` for a job due now, and
the gateway's cron delivers the answer as a mail; ``vigil gateway status`` shows email
connected, ``vigil cron runs`` shows the run delivered, and the password is in no log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.cli.helpers import run_cli
from tests.gateway.adapters.email.conftest import AGENT, ME
from tests.gateway.adapters.email.smtp_server import SmtpServer
from tests.gateway.process import GatewayProcess, add_overdue_job, wait_for
from vigil.testing.fake_model import FakeModelServer

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")]

PASSWORD = "app-password-7f3k"
PASSWORD_ENV = "VIGIL_TEST_EMAIL_APP_PASSWORD"


@pytest.fixture
def server() -> Iterator[SmtpServer]:
    smtp = SmtpServer(password=PASSWORD, user=AGENT).start()
    try:
        yield smtp
    finally:
        smtp.stop()


def test_a_cron_job_delivers_its_answer_as_a_mail_from_the_running_gateway(
    server: SmtpServer, fake_model: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({
        "timezone": "UTC",
        "email": {"enabled": True, "address": AGENT, "smtp_url": server.url, "password_env": PASSWORD_ENV},
    }))
    fake_model.rule(contains="morning summary", reply="Good morning: **3** meetings today.")
    monkeypatch.setenv("VIGIL_HOME", str(home))
    add_overdue_job(home, "morning", "the morning summary", f"email:{ME}")  # the gateway runs it at start

    gateway = GatewayProcess(home, fake_model, env={PASSWORD_ENV: PASSWORD}).start()
    try:
        [mail] = wait_for(lambda: server.mails, timeout=30, what="the cron answer as a mail")
        assert mail.envelope_to == [ME] and mail.mail["From"] == AGENT
        assert mail.mail["Subject"].startswith("cron: morning — ")
        assert mail.part("text/plain").strip() == "Good morning: **3** meetings today."
        assert "<strong>3</strong>" in mail.part("text/html")
        assert server.logins and all(ok for _, ok in server.logins)

        status = json.loads(run_cli("gateway", "status", "--json").output)
        email = {a["name"]: a for a in status["adapters"]}["email"]
        assert email["state"] == "connected", email
        assert f"sending as {AGENT}" in email["detail"]
        wait_for(lambda: [r["delivery"]["status"] for r in json.loads(run_cli("cron", "runs", "--json").output)]
                 == ["delivered"], timeout=20, what="the run recorded delivered")
    finally:
        gateway.stop()
    logs = "".join(gateway.output) + "".join(p.read_text(errors="replace") for p in (home / "logs").glob("*"))
    assert PASSWORD not in logs


def test_a_mail_stored_before_a_sigkill_is_answered_once_after_the_restart(
    server: SmtpServer, fake_model: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.gateway.adapters.email.imap_server import DOVECOT, ImapServer, mail
    from vigil.testing.scripting import Reply

    if DOVECOT is None:
        pytest.skip("Dovecot is not installed (apt-get install dovecot-imapd)")
    imap = ImapServer(AGENT, PASSWORD).start()
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"email": {
        "enabled": True, "address": AGENT, "smtp_url": server.url, "imap_url": imap.url, "poll_seconds": 1,
        "password_env": PASSWORD_ENV, "allow": [ME]}}))
    fake_model.rule(contains="a slow question", reply=Reply.text("too late", delay=15.0), times=1)
    fake_model.rule(contains="a slow question", reply="the answer, once")
    monkeypatch.setenv("VIGIL_HOME", str(home))
    gateway = GatewayProcess(home, fake_model, env={PASSWORD_ENV: PASSWORD})
    try:
        gateway.start()
        wait_for(lambda: {a["name"]: a["state"] for a in json.loads(run_cli("gateway", "status", "--json").output)
                          ["adapters"]}.get("email") == "connected", timeout=20, what="email connected")
        uid = imap.append(mail(ME, AGENT, "Slow", "a slow question", "<slow@example.com>"))
        wait_for(lambda: imap.seen(uid), timeout=20, what="the mail stored and flagged read")
        wait_for(lambda: any("a slow question" in r.last_user_text for r in fake_model.requests), timeout=20,
                 what="the turn under way")
        gateway.kill()
        assert server.mails == []
        gateway.start()
        [answer] = wait_for(lambda: server.mails, timeout=40, what="the answer after the restart")
        assert answer.part("text/plain").strip() == "the answer, once"
        assert answer.mail["In-Reply-To"] == "<slow@example.com>"
        fake_model.rule(contains="and now", reply="next")
        imap.append(mail(ME, AGENT, "Re: Slow", "and now?", "<next@example.com>", in_reply_to="<slow@example.com>"))
        wait_for(lambda: len(server.mails) == 2, timeout=20, what="the next answer")
        assert [m.part("text/plain").strip() for m in server.mails] == ["the answer, once", "next"]
    finally:
        if gateway.process is not None and gateway.process.poll() is None:
            gateway.stop()
        imap.stop()
