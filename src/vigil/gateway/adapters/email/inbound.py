"""A received mail as the gateway's :class:`Inbound`: who wrote it, which thread it belongs
to, and the words of it.

A mail thread is a conversation: the route is ``(email, sender, root)`` where ``root`` is the
first Message-ID of its ``References`` (else its ``In-Reply-To``, else its own Message-ID), so
every reply in the thread, by either side, finds the same conversation. The Message-ID is the
inbox's external id: the same mail read twice (a crash before it was marked handled, a copy
in another folder) is answered once.

The text is the plain-text part (else the HTML part's text), without the quoted mail a reply
carries below "On … wrote:". Mails no person wrote for the agent are left alone: the agent's
own, automatic ones (``Auto-Submitted``, ``Precedence: bulk``, bounces), so two robots never
answer each other for ever.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import getaddresses
from html.parser import HTMLParser

from vigil.gateway.adapters.base import Inbound
from vigil.gateway.adapters.email.attachments import files_of
from vigil.platforms.email import ADDRESS
from vigil.store.gateway.gateway_tables import RouteKey

MAX_TEXT = 100_000
"""Characters of a mail's text handed to the agent (a longer mail is cut, and says so)."""
_ID = re.compile(r"<[!-;=?-~]{1,250}>")
"""A Message-ID: printable ASCII between angle brackets (what can key a route and an inbox entry)."""
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters other than tab and newline (PostgreSQL stores no NUL in text)."""
_QUOTE_HEAD = re.compile(r"^(On .{0,300} wrote:|-----\s*Original Message\s*-----)\s*$", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Mail:
    """What the adapter needs of a received mail."""

    sender: str
    """The From address, in lower case."""
    message_id: str
    subject: str
    references: list[str]
    """The thread's ids, oldest first, this mail's own last."""
    text: str
    automatic: bool
    files: list[tuple[str, bytes]] = field(default_factory=list)
    """Its attachments, ``(name, content)``."""

    @property
    def root(self) -> str:
        return self.references[0]

    @property
    def route(self) -> RouteKey:
        return RouteKey("email", self.sender, self.root)

    def inbound(self, notes: str = "") -> Inbound:
        """The mail as gateway input; ``notes`` name its saved attachments."""
        meta = {"subject": self.subject, "message_id": self.message_id, "references": self.references[-20:]}
        text = f"{self.text}\n\n{notes}" if notes and self.text else notes or self.text
        return Inbound(self.route, f"mid:{self.message_id}", text, sender=self.sender, meta=meta)


def _ids(value: object) -> list[str]:
    return _ID.findall(str(value or ""))


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in ("br", "p", "div", "li", "tr", "h1", "h2", "h3"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def _body(mail: EmailMessage) -> str:
    part = mail.get_body(("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except Exception:  # an undeclared or broken charset: the bytes as best they go
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if part.get_content_subtype() == "html":
        parser = _Text()
        parser.feed(str(content))
        content = "".join(parser.parts)
    return str(content)


def without_quote(text: str) -> str:
    """``text`` without the quoted mail below it and the trailing ``>`` lines."""
    text = _CONTROLS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    head = _QUOTE_HEAD.search(text)
    if head is not None and head.start() > 0:
        text = text[: head.start()]
    lines = text.rstrip().split("\n")
    while lines and lines[-1].lstrip().startswith(">"):
        lines.pop()
    return "\n".join(lines).strip()


def _automatic(mail: EmailMessage) -> bool:
    auto = str(mail.get("Auto-Submitted", "no")).strip().lower()
    precedence = str(mail.get("Precedence", "")).strip().lower()
    return (auto != "no" or precedence in ("bulk", "junk", "list") or mail.get_content_type() == "multipart/report"
            or "X-Autoreply" in mail or "X-Autorespond" in mail)


def parse(raw: bytes, *, uid_key: str) -> Mail | None:
    """The mail in ``raw``, or ``None`` when it has no usable sender. ``uid_key`` stands for a
    missing Message-ID (``<uid.VALIDITY.UID@imap>``)."""
    mail = message_from_bytes(raw, policy=policy.default)
    assert isinstance(mail, EmailMessage)
    try:
        senders = getaddresses([str(mail.get("From", ""))])
    except Exception:
        return None
    sender = (senders[0][1] if senders else "").strip().lower()
    if not ADDRESS.fullmatch(sender):
        return None
    own = _ids(mail.get("Message-ID"))
    message_id = own[0] if own else uid_key
    references = [ref for ref in _ids(mail.get("References")) or _ids(mail.get("In-Reply-To")) if ref != message_id]
    text = without_quote(_body(mail))
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + "\n[the rest of this mail was cut]"
    subject = " ".join(_CONTROLS.sub(" ", str(mail.get("Subject", ""))).split())[:300]
    try:
        files = files_of(mail)
    except Exception:  # a broken MIME structure: the words still count
        files = []
    return Mail(sender, message_id, subject, [*references, message_id], text or subject, _automatic(mail), files)
