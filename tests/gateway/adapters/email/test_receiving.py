"""Email both ways, against real servers: Dovecot holds the agent's mailbox (IMAP), aiosmtpd
takes its mail (SMTP). A mail from an allowed sender is answered by a reply in its thread; a
reply in that thread continues the same conversation; the same mail read again is answered
once; a stranger gets a pairing code and nothing reaches the model; automatic mail and mail
that was there before the first start are left alone; a mail is flagged read only once stored."""

from __future__ import annotations

import sqlite3

import pytest

from tests.gateway.adapters.email.conftest import AGENT, ME, Reading, StartGateway, receiving_settings
from tests.gateway.adapters.email.imap_server import ImapServer, mail
from tests.gateway.adapters.email.smtp_server import SmtpServer
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually


def _inbox(running) -> list[tuple[str, str, str | None]]:  # noqa: ANN001
    with sqlite3.connect(running.profile.state_db) as db:
        return db.execute("SELECT external_id, status, session_id FROM gateway_inbox WHERE adapter = 'email' "
                          "ORDER BY id").fetchall()


async def test_a_mail_is_answered_in_its_thread_and_the_thread_is_one_conversation(
    reading: Reading, smtp: SmtpServer, imap: ImapServer, fake_model: FakeModelServer
) -> None:
    old = imap.append(mail(ME, AGENT, "old news", "from before the agent", "<old@example.com>"))
    running = await reading()
    assert "reading INBOX at 127.0.0.1" in running.adapter.health().detail

    fake_model.rule(contains="what is on today", reply="Two **meetings**.")
    fake_model.rule(contains="and tomorrow", reply="Nothing yet.")
    first = imap.append(mail(ME, AGENT, "Plans", "what is on today?\n", "<q1@example.com>"))
    [answer] = await eventually(lambda: smtp.mails, what="the answer by mail")
    assert answer.envelope_to == [ME] and answer.mail["Subject"] == "Re: Plans"
    assert answer.mail["In-Reply-To"] == "<q1@example.com>" and answer.mail["References"] == "<q1@example.com>"
    assert answer.part("text/plain").strip() == "Two **meetings**."
    assert "<strong>meetings</strong>" in answer.part("text/html")
    assert imap.seen(first) and not imap.seen(old)  # what was there before the first start is left alone

    reply = mail(ME, AGENT, "Re: Plans", "and tomorrow?\n\nOn Thu, agent wrote:\n> Two meetings.",
                 "<q2@example.com>", in_reply_to=answer.mail["Message-ID"])
    reply = reply.replace(b"References: " + answer.mail["Message-ID"].encode(),
                          b"References: <q1@example.com> " + answer.mail["Message-ID"].encode())
    imap.append(reply)
    await eventually(lambda: len(smtp.mails) == 2, what="the second answer")
    second = smtp.mails[1].mail
    assert second["Subject"] == "Re: Plans" and second["In-Reply-To"] == "<q2@example.com>"
    assert second["References"].split() == ["<q1@example.com>", answer.mail["Message-ID"], "<q2@example.com>"]
    sessions = {session for _, _, session in _inbox(running)}
    assert len(sessions) == 1 and None not in sessions  # one thread, one conversation
    assert "On Thu, agent wrote" not in fake_model.requests[-1].last_user_text  # the quote is not the question
    assert [m.part("text/plain").strip() for m in smtp.mails] == ["Two **meetings**.", "Nothing yet."]
    assert [ext for ext, _, _ in _inbox(running)] == ["mid:<q1@example.com>", "mid:<q2@example.com>"]


async def test_the_same_mail_read_again_is_answered_once_and_a_restart_rereads_nothing(
    reading: Reading, smtp: SmtpServer, imap: ImapServer, fake_model: FakeModelServer
) -> None:
    running = await reading()
    adapter = running.adapter
    fake_model.set_default_reply("once")
    raw = mail(ME, AGENT, "Twice", "are you there?", "<twice@example.com>")
    imap.append(raw)
    await eventually(lambda: smtp.mails, what="the answer")
    again = imap.append(raw)  # a copy of the same mail (same Message-ID)
    await eventually(lambda: imap.seen(again), what="the copy handled")
    inner = adapter.inner
    await inner.stop()
    await inner.start(running.run.gateway)
    fake_model.rule(contains="after the restart", reply="still once")
    imap.append(mail(ME, AGENT, "Later", "after the restart", "<later@example.com>"))
    await eventually(lambda: len(smtp.mails) == 2, what="the next answer")
    assert [m.part("text/plain").strip() for m in smtp.mails] == ["once", "still once"]
    assert sum("are you there" in r.last_user_text for r in fake_model.requests) == 1


async def test_a_stranger_gets_a_pairing_code_and_automatic_mail_is_left_alone(
    reading: Reading, smtp: SmtpServer, imap: ImapServer, fake_model: FakeModelServer
) -> None:
    running = await reading()
    asked = len(fake_model.requests)
    robot = imap.append(mail("robot@example.com", AGENT, "Out of office", "away", "<auto@example.com>",
                             headers={"Auto-Submitted": "auto-replied"}))
    own = imap.append(mail(AGENT, AGENT, "Loop", "my own", "<own@example.com>"))
    stranger = imap.append(mail("Stranger <Who@Example.org>", AGENT, "Hello", "let me in", "<s1@example.org>"))
    [notice] = await eventually(lambda: smtp.mails, what="the pairing code")
    assert notice.envelope_to == ["who@example.org"] and notice.mail["In-Reply-To"] == "<s1@example.org>"
    assert notice.mail["Subject"] == "Re: Hello"
    assert "pairing" in notice.part("text/plain").lower()
    assert imap.seen(stranger) and not imap.seen(robot) and not imap.seen(own)
    assert len(fake_model.requests) == asked  # nothing reached the model
    assert _inbox(running) == []  # a denied mail is not stored


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
async def test_a_wrong_imap_password_is_shown_while_sending_goes_on(
    email_gateway: StartGateway, smtp: SmtpServer, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.gateway.adapters.email.conftest import PASSWORD_ENV
    from tests.gateway.adapters.email.imap_server import DOVECOT

    if DOVECOT is None:
        pytest.skip("Dovecot is not installed (apt-get install dovecot-imapd)")
    server = ImapServer(AGENT, "the-right-one").start()
    try:
        monkeypatch.setenv(PASSWORD_ENV, "a-wrong-one")
        running = await email_gateway(receiving_settings(fake_model, smtp, server))
        health = await eventually(lambda: (h := running.adapter.health()).last_error and h, what="the refused login")
        assert not health.ok and health.state == "retrying" and "said no" in (health.last_error or "")
        assert "a-wrong-one" not in str(health)
    finally:
        server.stop()


async def test_a_heartbeat_set_by_mail_fires_into_the_thread(
    reading: Reading, smtp: SmtpServer, imap: ImapServer, fake_model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    monkeypatch.setenv("VIGIL_TEST_SCHEDULE_POLL_SECONDS", "0.2")
    await reading()
    fake_model.rule(contains="check the deploy", reply="deploy green")
    imap.append(mail(ME, AGENT, "Deploy", "/heartbeat every 2s check the deploy", "<hb@example.com>"))
    fired = await eventually(lambda: [m for m in smtp.mails if "deploy green" in m.part("text/plain")], timeout=30,
                             what="a heartbeat's answer by mail")
    notes = [m for m in smtp.mails if "Heartbeat set" in m.part("text/plain")]
    assert notes and notes[0].mail["In-Reply-To"] == "<hb@example.com>"
    assert fired[0].envelope_to == [ME] and fired[0].mail["In-Reply-To"] == "<hb@example.com>"
    assert fired[0].mail["Subject"].startswith("Re: ")


def _with_file(sender: str, message_id: str, name: str, content: bytes) -> bytes:
    from email.message import EmailMessage

    message = EmailMessage()
    message["From"], message["To"], message["Subject"], message["Message-ID"] = sender, AGENT, "A file", message_id
    message.set_content("please read the attached file")
    message.add_attachment(content, maintype="application", subtype="octet-stream", filename=name)
    return message.as_bytes()


async def test_an_allowed_senders_attachment_is_saved_into_the_conversation_and_a_strangers_is_not(
    reading: Reading, smtp: SmtpServer, imap: ImapServer, fake_model: FakeModelServer
) -> None:
    running = await reading()
    fake_model.rule(contains="please read the attached file", reply="read it")
    imap.append(_with_file("stranger@example.org", "<f0@example.org>", "evil.sh", b"rm -rf /"))
    imap.append(_with_file(ME, "<f1@example.com>", "../notes.txt", b"the secret plan\n"))
    await eventually(lambda: [m for m in smtp.mails if m.part("text/plain").strip() == "read it"], what="the answer")
    asked = [r.last_user_text for r in fake_model.requests if "attached file" in r.last_user_text]
    assert len(asked) == 1 and "[The user attached a file, saved as " in asked[0]
    saved = asked[0].split("saved as ")[1].split(" (")[0]
    from pathlib import Path

    path = Path(saved)
    assert path.name == "notes.txt" and path.read_bytes() == b"the secret plan\n"
    assert path.parent == running.run.gateway.workdir(_inbox(running)[0][2])  # the conversation's own directory
    workspaces = running.profile.home / "workspaces"
    assert not [p for p in workspaces.rglob("evil.sh")]  # a stranger's file is never written



async def test_new_mail_is_seen_as_it_comes_through_idle(
    reading: Reading, smtp: SmtpServer, imap: ImapServer, fake_model: FakeModelServer
) -> None:
    await reading(poll_seconds=3600)
    fake_model.rule(contains="are you awake", reply="awake")
    for number in (1, 2):  # the second while the first look's IDLE is long over
        imap.append(mail(ME, AGENT, f"Ping {number}", "are you awake?", f"<idle{number}@example.com>"))
        await eventually(lambda: len(smtp.mails) == number, what=f"answer {number} within the hour's poll")


async def test_a_mail_with_a_broken_message_id_does_not_stop_the_mail_after_it(
    reading: Reading, smtp: SmtpServer, imap: ImapServer, fake_model: FakeModelServer
) -> None:
    await reading()
    fake_model.rule(contains="still reading", reply="yes")
    broken = imap.append(mail("odd@example.org", AGENT, "Odd", "hello", "<a\x01b@example.org>"))
    imap.append(mail(ME, AGENT, "Next", "still reading?", "<next@example.com>"))
    await eventually(lambda: [m for m in smtp.mails if m.envelope_to == [ME]], what="the next mail answered")
    assert imap.seen(broken)  # read as a mail of its own (a pairing code went back)
    assert [m.envelope_to for m in smtp.mails] == [["odd@example.org"], [ME]]
