"""A real SMTP server for the tests: aiosmtpd on a free loopback port, in its own thread.

What it receives is kept (:attr:`SmtpServer.mails`); :meth:`SmtpServer.answer` scripts the
replies to the next DATA commands (``451 …`` puts a mail off, ``550 …`` refuses it), and
``password`` makes it require a login (over plain SMTP: the server is on this machine);
``tls`` (``"starttls"`` or ``"smtps"``) makes it speak TLS with a certificate of
:func:`certificate`.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


def certificate(where: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by the openssl command."""
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    return cert, key


@dataclass(frozen=True)
class Received:
    envelope_from: str
    envelope_to: list[str]
    mail: EmailMessage

    def part(self, kind: str) -> str:
        """The body of the ``text/plain`` or ``text/html`` part."""
        body = self.mail.get_body((kind.split("/")[1],))
        assert body is not None and body.get_content_type() == kind, self.mail.as_string()
        return body.get_content().replace("\r\n", "\n")


@dataclass
class SmtpServer:
    password: str | None = None
    user: str = "agent@example.com"
    tls: str | None = None
    certificate: tuple[Path, Path] | None = None
    mails: list[Received] = field(default_factory=list)
    tries: int = 0
    """DATA commands seen (accepted or not)."""
    logins: list[tuple[str, bool]] = field(default_factory=list)
    _replies: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _controller: Controller | None = None

    def answer(self, *replies: str) -> None:
        """Reply to the next DATA commands with these, in order (then ``250`` again)."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def port(self) -> int:
        assert self._controller is not None
        return self._controller.port

    @property
    def url(self) -> str:
        return f"{'smtps' if self.tls == 'smtps' else 'smtp'}://127.0.0.1:{self.port}"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self._lock:
            self.tries += 1
            reply = self._replies.pop(0) if self._replies else "250 OK queued"
            if reply.startswith("250"):
                mail = message_from_bytes(envelope.original_content, policy=policy.default)
                self.mails.append(Received(envelope.mail_from, list(envelope.rcpt_tos), mail))  # type: ignore[arg-type]
        return reply

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        login = data.login.decode() if isinstance(data.login, bytes) else str(data.login)
        password = data.password.decode() if isinstance(data.password, bytes) else str(data.password)
        good = login == self.user and password == self.password
        self.logins.append((login, good))
        return AuthResult(success=good, handled=False)

    def start(self) -> "SmtpServer":
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        options: dict[str, Any] = {}
        if self.password is not None:
            options = {"authenticator": self._authenticate, "auth_require_tls": self.tls == "starttls",
                       "auth_required": True}
        if self.tls is not None:
            assert self.certificate is not None
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.certificate)
            if self.tls == "starttls":
                options |= {"tls_context": context, "require_starttls": True}
            else:
                options |= {"ssl_context": context}
        self._controller = Controller(self, hostname="127.0.0.1", port=port, ready_timeout=10, **options)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
