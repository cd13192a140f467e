"""Handing a mail to the SMTP server (stdlib :mod:`smtplib`, blocking: the adapter runs it in
a thread), and what a failure means for the outbox.

``smtps://`` speaks TLS from the first byte; ``smtp://`` upgrades with STARTTLS whenever the
server offers it. A password is never sent over a connection that is not encrypted, except to
a server on this machine. The server's certificate is checked against the system's trusted
authorities (``SSL_CERT_FILE`` names others).

A reply code decides: 4xx (greylisting, a full mailbox for now, too many connections) is tried
again later, 5xx (no such user, refused, a wrong password) is final. A connection that cannot
be made or breaks off is tried again; a certificate that does not verify is final.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage

from vigil.gateway.adapters.base import DeliveryError
from vigil.platforms.email import Endpoint

TIMEOUT = 30.0
"""Seconds a connection or one exchange with the server may take."""


@dataclass(frozen=True, slots=True)
class Login:
    """Who logs in (``password`` ``None``: nobody, a relay on this machine)."""

    username: str
    password: str | None = field(repr=False)


def _connect(server: Endpoint, timeout: float) -> smtplib.SMTP:
    context = ssl.create_default_context()
    client: smtplib.SMTP
    if server.tls:
        client = smtplib.SMTP_SSL(server.host, server.port, timeout=timeout, context=context)
        client.ehlo()
        return client
    client = smtplib.SMTP(server.host, server.port, timeout=timeout)
    try:
        client.ehlo()
        if client.has_extn("starttls"):
            client.starttls(context=context)
            client.ehlo()
    except BaseException:
        _close(client)
        raise
    return client


def _encrypted(client: smtplib.SMTP) -> bool:
    return isinstance(client.sock, ssl.SSLSocket)


def _close(client: smtplib.SMTP) -> None:
    try:
        client.quit()
    except Exception:
        client.close()


def _session(server: Endpoint, login: Login, timeout: float) -> smtplib.SMTP:
    """A connected, greeted and (where there is a password) logged-in client."""
    client = _connect(server, timeout)
    try:
        if login.password is not None and client.has_extn("auth"):  # a server without AUTH takes mail as it is
            if not _encrypted(client) and not server.local:
                raise DeliveryError(f"{server} offers no STARTTLS: the password is not sent unencrypted "
                                    "(use smtps:// or a server with STARTTLS)", retryable=False)
            client.login(login.username, login.password)
    except BaseException:
        _close(client)
        raise
    return client


def send(server: Endpoint, login: Login, mail: EmailMessage, *, timeout: float = TIMEOUT) -> None:
    """Hand ``mail`` over (envelope from its From, to its To); raise :class:`DeliveryError`."""
    try:
        client = _session(server, login, timeout)
        try:
            client.send_message(mail)
        finally:
            _close(client)
    except DeliveryError:
        raise
    except Exception as exc:
        raise failure(exc, server) from None


def probe(server: Endpoint, login: Login, *, timeout: float = TIMEOUT) -> None:
    """Connect, greet and log in as a send would, then leave; raise :class:`DeliveryError`."""
    try:
        _close(_session(server, login, timeout))
    except DeliveryError:
        raise
    except Exception as exc:
        raise failure(exc, server) from None


def _reply(code: int, text: bytes | str) -> str:
    said = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return f"{code} {' '.join(said.split())}".strip()


def failure(exc: BaseException, server: Endpoint) -> DeliveryError:
    """``exc`` of a try as the outbox's error: retryable unless the server or TLS said no for good."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [(code, text) for code, text in exc.recipients.values()]
        final = any(code >= 500 for code, _ in codes)
        said = "; ".join(_reply(code, text) for code, text in codes)
        return DeliveryError(f"the server refused the recipient: {said}", retryable=not final)
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return DeliveryError(f"the server refused the login: {_reply(exc.smtp_code, exc.smtp_error)}",
                             retryable=exc.smtp_code < 500)
    if isinstance(exc, smtplib.SMTPResponseException):
        return DeliveryError(f"the server refused the mail: {_reply(exc.smtp_code, exc.smtp_error)}",
                             retryable=exc.smtp_code < 500)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return DeliveryError(f"the certificate of {server} does not verify: {exc.verify_message}", retryable=False)
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return DeliveryError(f"{server} cannot do what sending needs: {exc}", retryable=False)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return DeliveryError(f"{server} did not answer within {TIMEOUT:g} s")
    if isinstance(exc, (smtplib.SMTPException, OSError)):
        return DeliveryError(f"cannot reach {server}: {' '.join(str(exc).split()) or type(exc).__name__}")
    return DeliveryError(f"sending through {server} failed: {type(exc).__name__}: {exc}")
