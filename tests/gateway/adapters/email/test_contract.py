"""The adapter contract on the Email adapter, inside a real gateway, with real servers as the
platform side: Dovecot (IMAP) holds the agent's mailbox and aiosmtpd (SMTP) takes its mail. A
delivery is a mail put into the mailbox, acknowledged when the adapter flags it read (only
once it is stored); a redelivery is a copy with the same Message-ID.

For the messaging part the bot's messages are the mails in the thread of a delivered mail
(an answer, or a file ``send_file`` attached to one); a file goes in attached to a mail whose
text is its caption, and aiosmtpd answers the next mail 451 (put off: retried) or 550 (refused
for good). Email declares no edits, buttons or message limit (a mail holds an answer whole).

Send-only (no ``email.imap_url``), the contract's parts about receiving are skipped with that
reason; starting, stopping, reloading, routes and sending are held to it all the same."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from email.message import EmailMessage
from typing import ClassVar, Mapping

import pytest

from tests.gateway.adapter_contract import Ack, AdapterContract, ContractHarness
from tests.gateway.adapters.email.conftest import AGENT, ME, Reading, StartGateway, email_settings
from tests.gateway.adapters.email.imap_server import ImapServer, mail
from tests.gateway.adapters.email.smtp_server import SmtpServer
from tests.gateway.adapters.harness import inbox_entry, outbox_to
from tests.gateway.messaging_contract import Shown
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import Adapter, GatewayPort
from vigil.store.gateway.gateway_tables import InboxEntry, OutboxEntry, RouteKey
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.waiting import eventually

SEND_ONLY = "send-only (no email.imap_url): the adapter receives no messages to deliver"
NO_LIMIT = "a mail holds an answer whole, however long"


@dataclass
class EmailContract:
    adapter: Adapter
    gateway: GatewayPort
    settings: Settings
    refuses_unknown_conversation: bool = True
    not_driven: ClassVar[Mapping[str, str]] = {"a message limit": NO_LIMIT, "files": SEND_ONLY,
                                               "delivery errors": SEND_ONLY}

    async def deliver(self, text: str, external_id: str) -> Ack:
        pytest.skip(SEND_ONLY)

    def stored(self, external_id: str) -> InboxEntry | None:
        pytest.skip(SEND_ONLY)

    def unknown_conversation(self) -> OutboxEntry:
        """A route that is no mail address: nothing could ever deliver to it."""
        return outbox_to(RouteKey("email", "no-such-conversation"))

    async def open_stream(self) -> asyncio.Task[None] | None:
        return None  # a mail is sent whole

    def new_settings(self) -> Settings:
        section = self.settings.email.copy_with(update={"allow": ["friend@example.com"]})
        return self.settings.copy_with(update={"email": section})

    async def answers(self, ack: Ack) -> list[str]:
        pytest.skip(SEND_ONLY)


@dataclass
class ReceivingContract(EmailContract):
    """Both ways: see the module docstring."""

    imap: ImapServer | None = None
    smtp: SmtpServer | None = None
    state_db: str = ""
    model: FakeModelServer | None = None
    lines: list[str] = field(default_factory=list)
    """What the gateway said."""
    not_driven: ClassVar[Mapping[str, str]] = {"a message limit": NO_LIMIT}
    _delivered: set[str] = field(default_factory=set)

    @staticmethod
    def message_id(external_id: str) -> str:
        return f"<{external_id}@contract.example.com>"

    async def deliver(self, text: str, external_id: str) -> Ack:
        return await self._put(mail(ME, AGENT, "Contract", text, self.message_id(external_id)), external_id)

    async def _put(self, raw: bytes, external_id: str) -> Ack:
        """Put ``raw`` into the mailbox; back once the adapter flagged it read (it is stored)."""
        assert self.imap is not None
        duplicate = external_id in self._delivered
        self._delivered.add(external_id)
        uid = await asyncio.to_thread(self.imap.append, raw)
        await eventually(lambda: asyncio.to_thread(self.imap.seen, uid), what="the mail flagged read")  # type: ignore[union-attr]
        entry = self.stored(external_id)
        return Ack(f"mid:{self.message_id(external_id)}", duplicate, entry.id if entry else None)

    def stored(self, external_id: str) -> InboxEntry | None:
        key = external_id if external_id.startswith("mid:") else f"mid:{self.message_id(external_id)}"
        return inbox_entry(self.state_db, "email", key)

    async def answers(self, ack: Ack) -> list[str]:
        assert self.smtp is not None
        wanted = ack.external_id.removeprefix("mid:")
        return [m.part("text/plain") for m in self.smtp.mails if m.mail["In-Reply-To"] == wanted]

    # -- the messaging part (tests/gateway/messaging_contract.py): files, delivery errors ----
    async def messages(self, ack: Ack) -> list[Shown]:
        """The mails in the thread of the delivered mail, as a mail client shows them: the text
        (without the line break ending every mail) and the file attached, if any."""
        assert self.smtp is not None
        wanted = ack.external_id.removeprefix("mid:")
        shown = []
        for received in self.smtp.mails:
            if received.mail["In-Reply-To"] == wanted:
                text = received.part("text/plain").removesuffix("\n")
                files = [(str(part.get_filename()), part.get_payload(decode=True))
                         for part in received.mail.iter_attachments()]
                shown.append(Shown(text, [text], file=files[0] if files else None, ref=received))
        return shown

    async def deliver_file(self, name: str, data: bytes, caption: str, external_id: str) -> Ack:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = ME, AGENT, "A file"
        message["Message-ID"] = self.message_id(external_id)
        message.set_content(caption)
        message.add_attachment(data, maintype="text", subtype="plain", filename=name)
        return await self._put(message.as_bytes(), external_id)

    async def fail_next_answer(self, ack: Ack, *, permanent: bool) -> None:
        """The SMTP server answers the next mail 550 (refused for good) or 451 (put off)."""
        assert self.smtp is not None
        self.smtp.answer("550 5.1.1 No such user here" if permanent else "451 4.7.1 Try again later")


class TestEmailAdapterContract(AdapterContract):
    @pytest.fixture
    async def contract(self, reading: Reading, smtp: SmtpServer, imap: ImapServer) -> ContractHarness:
        running = await reading()
        return ReceivingContract(running.adapter.inner, running.run.gateway, running.settings, imap=imap, smtp=smtp,
                                 state_db=str(running.profile.state_db), model=running.model, lines=running.lines)


class TestSendOnlyEmailAdapterContract(AdapterContract):
    @pytest.fixture
    async def contract(self, email_gateway: StartGateway, smtp: SmtpServer,
                       fake_model: FakeModelServer) -> ContractHarness:
        settings = email_settings(fake_model, smtp.url)
        running = await email_gateway(settings)
        return EmailContract(running.adapter.inner, running.run.gateway, settings)


async def test_a_reload_keeps_sending_and_a_second_start_and_stop_are_harmless(
    email_gateway: StartGateway, smtp: SmtpServer, fake_model: FakeModelServer
) -> None:
    """What the skipped halves of the contract's start/stop and reload tests check, for sending."""
    settings = email_settings(fake_model, smtp.url)
    running = await email_gateway(settings)
    gateway = running.run.gateway
    adapter = running.adapter.inner
    contract = EmailContract(adapter, gateway, settings)
    to_me = replace(contract.unknown_conversation(), route=RouteKey("email", "me@example.com"))
    await adapter.start(gateway)
    await adapter.send(to_me)
    await adapter.reload(contract.new_settings())
    assert adapter.health().ok
    await adapter.send(to_me)
    await adapter.stop()
    await adapter.stop()
    assert not adapter.health().ok
    await adapter.start(gateway)
    assert adapter.health().ok
    assert [m.envelope_to for m in smtp.mails] == [["me@example.com"]] * 2
