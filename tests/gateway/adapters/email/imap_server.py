"""A real IMAP server for the tests: Debian's Dovecot (``apt-get install dovecot-imapd``) run
from a temporary configuration as a child process (``dovecot -F``) on a free loopback port,
with one user whose password is plain text in a passwd file. Mail arrives by IMAP APPEND, as a
mail client's copy would; :meth:`ImapServer.seen` reads a mail's ``\\Seen`` flag."""

from __future__ import annotations

import imaplib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DOVECOT = shutil.which("dovecot") or ("/usr/sbin/dovecot" if os.access("/usr/sbin/dovecot", os.X_OK) else None)

_CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = nobody
default_login_user = nobody
default_internal_group = nogroup
first_valid_uid = 1
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid=nobody gid=nogroup home={root}/mail/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {tls_port}
  }}
}}
service anvil {{
  chroot =
}}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ImapServer:
    user: str
    password: str
    port: int = field(default_factory=_free_port)
    root: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    certificate: tuple[Path, Path] | None = None
    """A certificate and key: STARTTLS on the IMAP port, TLS on :attr:`tls_port` (else plain only)."""
    tls_port: int = 0

    @property
    def url(self) -> str:
        return f"imap://127.0.0.1:{self.port}"

    @property
    def tls_url(self) -> str:
        return f"imaps://127.0.0.1:{self.tls_port}"

    def start(self, timeout: float = 20) -> "ImapServer":
        assert DOVECOT is not None
        # Dovecot's processes run as nobody: the directory must be theirs to pass through.
        self.root = Path(tempfile.mkdtemp(prefix="vigil-dovecot-"))
        self.root.chmod(0o755)
        for part in ("run", "state", "mail"):
            (self.root / part).mkdir()
        (self.root / "mail").chmod(0o777)
        (self.root / "passwd").write_text(f"{self.user}:{{PLAIN}}{self.password}\n")
        ssl = "ssl = no"
        if self.certificate is not None:
            self.tls_port = _free_port()
            cert, key = self.certificate
            ssl = f"ssl = yes\nssl_cert = <{cert}\nssl_key = <{key}"
        (self.root / "dovecot.conf").write_text(_CONFIG.format(root=self.root, port=self.port, ssl=ssl,
                                                               tls_port=self.tls_port))
        self.process = subprocess.Popen([DOVECOT, "-F", "-c", str(self.root / "dovecot.conf")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log()
            try:
                self.client().logout()
                return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"dovecot did not come up: {self.log()}")

    def log(self) -> str:
        path = (self.root or Path("/nonexistent")) / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def client(self) -> imaplib.IMAP4:
        client = imaplib.IMAP4("127.0.0.1", self.port, timeout=10)
        client.login(self.user, self.password)
        client.select("INBOX")
        return client

    def append(self, raw: bytes) -> int:
        """Put a mail into the INBOX; its UID."""
        client = self.client()
        try:
            kind, data = client.append("INBOX", None, None, raw)
            assert kind == "OK", data
            return int(data[0].split(b"APPENDUID ")[1].split(b" ")[1].rstrip(b"]"))
        finally:
            client.logout()

    def seen(self, uid: int) -> bool:
        client = self.client()
        try:
            kind, data = client.uid("FETCH", str(uid), "(FLAGS)")
            return kind == "OK" and b"\\Seen" in (data[0] or b"")
        finally:
            client.logout()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


def mail(sender: str, to: str, subject: str, body: str, message_id: str, *,
         in_reply_to: str | None = None, headers: dict[str, str] | None = None) -> bytes:
    """A plain mail as a client sends it."""
    lines = [f"From: {sender}", f"To: {to}", f"Subject: {subject}", f"Message-ID: {message_id}",
             "Date: Thu, 03 Dec 2026 04:00:00 +0000", "Content-Type: text/plain; charset=utf-8"]
    if in_reply_to:
        lines += [f"In-Reply-To: {in_reply_to}", f"References: {in_reply_to}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n" + body.replace("\n", "\r\n") + "\r\n").encode()
