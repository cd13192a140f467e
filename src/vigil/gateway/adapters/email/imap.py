"""Reading new mail over IMAP (stdlib :mod:`imaplib`, blocking: the receiver runs it in a
thread): one logged-in connection with the mailbox selected, the mails that came after a UID,
and the ``\\Seen`` flag once a mail is handled.

``imaps://`` speaks TLS from the first byte; ``imap://`` upgrades with STARTTLS whenever the
server offers it, and the password is never sent unencrypted except to a server on this
machine. Mails are read with ``BODY.PEEK[]``, which leaves them unread until they are stored.

Between looks, :meth:`Mailbox.wait` holds an IDLE command open where the server has IDLE
(RFC 2177), so new mail is seen as it comes; imaplib of Python 3.11 has no IDLE, so the few
lines of it are written here. Without IDLE the caller waits out its poll interval.
"""

from __future__ import annotations

import imaplib
import itertools
import re
import select
import socket
import ssl
import time
from dataclasses import dataclass

from vigil.gateway.adapters.email.smtp import Login
from vigil.platforms.email import Endpoint

TIMEOUT = 30.0
_TAGS = itertools.count(1)
FETCH_BATCH = 50
"""Mails read per look (the rest come at the next one)."""


class ImapError(Exception):
    """The IMAP server could not be reached or said no; ``final`` when trying again cannot help
    (a refused login, a certificate that does not verify, no such mailbox)."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


@dataclass(frozen=True, slots=True)
class Position:
    """Where the mailbox stands: its UIDVALIDITY (UIDs mean nothing across a change of it)
    and the UID the next mail will get."""

    validity: int
    next_uid: int


def _quote(mailbox: str) -> str:
    return '"' + mailbox + '"'


class Mailbox:
    """One connection to ``server`` with ``mailbox`` selected (see the module docstring)."""

    def __init__(self, server: Endpoint, login: Login, mailbox: str, *, timeout: float = TIMEOUT) -> None:
        self.server, self.login, self.mailbox, self.timeout = server, login, mailbox, timeout
        self.client: imaplib.IMAP4 | None = None
        self.position: Position | None = None

    def open(self) -> Position:
        """Connect, log in, select the mailbox; its :class:`Position`."""
        try:
            self.client = self._connect()
            if self.login.password is not None:
                if not isinstance(self.client.sock, ssl.SSLSocket) and not self.server.local:
                    raise ImapError(f"{self.server} offers no STARTTLS: the password is not sent unencrypted "
                                    "(use imaps://)", final=True)
                self.client.login(self.login.username, self.login.password)
            return self._select()
        except ImapError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise _failure(exc, self.server) from None

    def _connect(self) -> imaplib.IMAP4:
        context = ssl.create_default_context()
        if self.server.tls:
            return imaplib.IMAP4_SSL(self.server.host, self.server.port, ssl_context=context, timeout=self.timeout)
        client = imaplib.IMAP4(self.server.host, self.server.port, timeout=self.timeout)
        if "STARTTLS" in client.capabilities:
            client.starttls(ssl_context=context)
        return client

    def _select(self) -> Position:
        assert self.client is not None
        kind, data = self.client.select(_quote(self.mailbox))
        if kind != "OK":
            raise ImapError(f"the mailbox {self.mailbox!r} cannot be opened: {_said(data)}", final=True)
        validity = _number(self.client.untagged_responses.get("UIDVALIDITY"))
        next_uid = _number(self.client.untagged_responses.get("UIDNEXT"))
        if next_uid is None:
            kind, data = self.client.status(_quote(self.mailbox), "(UIDNEXT)")
            found = re.search(rb"UIDNEXT (\d+)", data[0] or b"") if kind == "OK" and data else None
            next_uid = int(found.group(1)) if found else 1
        self.position = Position(validity or 0, next_uid)
        return self.position

    def new_mail(self, after: int) -> list[tuple[int, bytes]]:
        """``(uid, raw mail)`` of up to :data:`FETCH_BATCH` mails with a UID above ``after``, oldest first."""
        client = self._require()
        try:
            client.noop()  # the server tells of mail that came since the last look
            kind, data = client.uid("SEARCH", f"UID {after + 1}:*")
            if kind != "OK":
                raise ImapError(f"searching {self.mailbox!r} failed: {_said(data)}")
            uids = sorted(uid for uid in (int(x) for x in (data[0] or b"").split()) if uid > after)[:FETCH_BATCH]
            found: list[tuple[int, bytes]] = []
            for uid in uids:
                kind, parts = client.uid("FETCH", str(uid), "(BODY.PEEK[])")
                raw = next((part[1] for part in parts if isinstance(part, tuple) and len(part) > 1), None)
                if kind == "OK" and isinstance(raw, bytes):
                    found.append((uid, raw))
            return found
        except ImapError:
            raise
        except Exception as exc:
            raise _failure(exc, self.server) from None

    @property
    def idles(self) -> bool:
        """Whether the server has IDLE."""
        return self.client is not None and "IDLE" in self.client.capabilities

    def wait(self, seconds: float) -> None:
        """Return when the server tells of new mail, or after ``seconds`` (IDLE)."""
        client = self._require()
        tag = f"VIDLE{next(_TAGS)}".encode()
        try:
            client.send(tag + b" IDLE\r\n")
            if not client.readline().startswith(b"+"):
                raise ImapError(f"{self.server} refused IDLE")
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                if not self._readable(client, left):
                    break
                line = client.readline()
                if not line:
                    raise ImapError(f"{self.server} closed the connection")
                if re.match(rb"\* \d+ (EXISTS|RECENT)", line):
                    break
            client.send(b"DONE\r\n")
            while not (line := client.readline()).startswith(tag):
                if not line:
                    raise ImapError(f"{self.server} closed the connection")
        except ImapError:
            raise
        except Exception as exc:
            raise _failure(exc, self.server) from None

    @staticmethod
    def _readable(client: imaplib.IMAP4, seconds: float) -> bool:
        sock = client.sock
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        return bool(select.select([sock], [], [], seconds)[0])

    def mark_seen(self, uid: int) -> None:
        """Flag the mail ``\\Seen``: it is handled (stored, or deliberately left alone)."""
        try:
            self._require().uid("STORE", str(uid), "+FLAGS.SILENT", r"(\Seen)")
        except Exception as exc:
            raise _failure(exc, self.server) from None

    def _require(self) -> imaplib.IMAP4:
        if self.client is None:
            raise ImapError("not connected")
        return self.client

    def close(self) -> None:
        client, self.client = self.client, None
        if client is None:
            return
        try:
            client.logout()
        except Exception:
            try:
                client.shutdown()
            except Exception:
                pass


def _number(values: list[bytes] | None) -> int | None:
    if not values:
        return None
    try:
        return int(values[-1])
    except (TypeError, ValueError):
        return None


def _said(data: object) -> str:
    if isinstance(data, list) and data and isinstance(data[0], bytes):
        return " ".join(data[0].decode("utf-8", "replace").split())
    return str(data)


def _failure(exc: BaseException, server: Endpoint) -> ImapError:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ImapError(f"the certificate of {server} does not verify: {exc.verify_message}", final=True)
    if isinstance(exc, imaplib.IMAP4.abort):
        return ImapError(f"{server} closed the connection: {exc}")
    if isinstance(exc, imaplib.IMAP4.error):
        text = " ".join(str(exc).split())
        final = "AUTHENTICATIONFAILED" in text or "authentication failed" in text.lower()
        return ImapError(f"{server} said no: {text}", final=final)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return ImapError(f"{server} did not answer within {TIMEOUT:g} s")
    if isinstance(exc, OSError):
        return ImapError(f"cannot reach {server}: {' '.join(str(exc).split()) or type(exc).__name__}")
    return ImapError(f"reading mail from {server} failed: {type(exc).__name__}: {exc}")
