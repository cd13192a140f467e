"""One outbox entry as a mail: the answer as plain text with a Markdown-rendered HTML
alternative, and the headers a mail client expects (Message-ID, Date, From, To, Subject). A
file (``send_file``) is attached to a mail whose text is its caption.

The Message-ID is derived from the entry, so a retried entry (the server took it but the
connection broke before it said so) goes out with the same id and a client shows it once.
Cron answers and heartbeats say ``Auto-Submitted: auto-generated`` (RFC 3834): a vacation
responder does not answer them.

Markdown is rendered by markdown-it-py (CommonMark with tables and strike-through), which
vigil already has through rich; raw HTML in an answer is shown as text, and markdown-it's own
link check leaves out javascript:, vbscript:, file: and data: links.
"""

from __future__ import annotations

import hashlib
import html
import mimetypes
from datetime import datetime, timezone
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

from vigil.store.gateway.gateway_tables import OutboxEntry

AUTOMATIC_KINDS = frozenset({"cron", "heartbeat", "notice", "pairing"})
"""Entries no person wrote an answer to (RFC 3834's auto-generated)."""
SUBJECT_CHARS = 200
DEFAULT_SUBJECT = "A message from vigil"

_HEAD = ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
         '<body style="font-family: sans-serif; line-height: 1.45">\n{body}</body></html>\n')


def subject_line(title: str | None) -> str:
    """One line of at most :data:`SUBJECT_CHARS` characters (a header holds no line break)."""
    words = " ".join("".join(ch if ch.isprintable() else " " for ch in (title or "")).split())
    if not words:
        return DEFAULT_SUBJECT
    return words if len(words) <= SUBJECT_CHARS else words[: SUBJECT_CHARS - 1].rstrip() + "…"


def render_html(text: str, title: str) -> str:
    """``text`` (Markdown) as a small HTML document."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    return _HEAD.format(title=html.escape(title), body=renderer.render(text))


def message_id(entry: OutboxEntry, sender: str) -> str:
    """``<vigil.ID.HASH@domain>``: the same for every try of one entry, unlike any other's."""
    seed = f"{entry.id}|{entry.created_at!r}|{entry.session_id}|{entry.route.chat}|{sender}"
    digest = hashlib.sha256(seed.encode()).hexdigest()[:20]
    return f"<vigil.{entry.id}.{digest}@{sender.rpartition('@')[2]}>"


def reply_subject(subject: str) -> str:
    """``Re: subject`` (once)."""
    line = subject_line(subject)
    return line if line.lower().startswith("re:") else subject_line(f"Re: {line}")


def compose(entry: OutboxEntry, *, sender: str, subject: str, now: float,
            thread: list[str] | None = None, attachment: tuple[str, bytes] | None = None) -> EmailMessage:
    """The mail carrying ``entry`` to ``entry.route.chat`` from ``sender``; ``thread``: the
    Message-IDs of the mail thread it answers, oldest first (``In-Reply-To`` the last);
    ``attachment``: the name and content of a file it carries (the text then is its caption,
    or says the file is attached)."""
    mail = EmailMessage(policy=SMTP)
    mail["From"] = sender
    mail["To"] = entry.route.chat
    mail["Subject"] = reply_subject(subject) if thread else subject_line(subject)
    mail["Date"] = format_datetime(datetime.fromtimestamp(now, timezone.utc))
    mail["Message-ID"] = message_id(entry, sender)
    if thread:
        mail["In-Reply-To"] = thread[-1]
        mail["References"] = " ".join(thread[-20:])
    if entry.kind in AUTOMATIC_KINDS:
        mail["Auto-Submitted"] = "auto-generated"
    words = entry.text if entry.text.strip() or attachment is None else f"{attachment[0]} is attached."
    text = words if words.endswith("\n") else words + "\n"
    mail.set_content(text, subtype="plain", charset="utf-8")
    mail.add_alternative(render_html(words, mail["Subject"]), subtype="html", charset="utf-8")
    if attachment is not None:
        name, content = attachment
        kind = (mimetypes.guess_type(name)[0] or "application/octet-stream").split("/", 1)
        mail.add_attachment(content, maintype=kind[0], subtype=kind[1], filename=name)
    return mail
