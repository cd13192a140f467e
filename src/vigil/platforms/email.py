"""Email: its config.yaml section and its declaration in the platform registry.

With ``email.address`` (the agent's own address) and ``email.smtp_url`` set, the agent sends
mail: cron answers (``--deliver email:ADDRESS``) go out through the gateway's outbox. With
``email.imap_url`` too, it reads its mailbox: a mail thread is a conversation, answered in the
thread, and only the addresses of ``email.allow`` (or paired) are answered. The login password (an app password) comes from the environment variable
``email.password_env`` names, never from config.yaml; without ``password_env`` vigil sends
without logging in (a relay on this machine).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from vigil.config.schema import Section, setting, validates
from vigil.platforms.fields import env_name
from vigil.platforms.spec import Capabilities, Check, TargetForm, sectioned, unset

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
ADDRESS = re.compile(rf"(?=[^@]{{1,64}}@)(?=.{{3,254}}$){_ATOM}(?:\.{_ATOM})*@(?:{_LABEL}\.)+[A-Za-z][A-Za-z0-9-]{{0,61}}[A-Za-z0-9]")
"""A plain mail address (``me@example.com``): dot-atoms before the ``@``, a domain with a
top-level name after it, nothing quoted, no display name, no spaces or line breaks."""

PORTS = {"smtp": 587, "smtps": 465, "imap": 143, "imaps": 993}
"""Default ports: SMTP submission and IMAP with STARTTLS, and both over TLS."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A mail server: ``tls`` means TLS from the first byte (``smtps://``, ``imaps://``);
    otherwise STARTTLS is used when the server offers it."""

    host: str
    port: int
    tls: bool

    @property
    def local(self) -> bool:
        """Whether the server is on this machine (a relay without login is fine there)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def endpoint(url: str, protocol: str = "smtp") -> Endpoint:
    """The server of a ``PROTOCOL://host[:port]`` or ``PROTOCOLs://host[:port]`` URL (``smtp``
    or ``imap``); ``ValueError`` naming the form otherwise (no user, password, path or query:
    secrets live in the environment)."""
    shape = f"must be {protocol}://HOST[:PORT] (STARTTLS when offered) or {protocol}s://HOST[:PORT] (TLS)"
    if not isinstance(url, str) or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise ValueError(shape)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(shape) from None
    if parts.scheme not in (protocol, protocol + "s") or not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(shape)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError("must not hold a user or password: put the password in the variable email.password_env names")
    host = parts.hostname
    if not re.fullmatch(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?)+|[0-9a-fA-F:.]+", host) or len(host) > 253:
        raise ValueError(shape)
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(shape) from None
    if port == 0:
        raise ValueError("the port must be between 1 and 65535")
    return Endpoint(host, port or PORTS[parts.scheme], parts.scheme.endswith("s"))


def address(value: str) -> str:
    """``value`` if it is a plain mail address (see :data:`ADDRESS`)."""
    if not ADDRESS.fullmatch(value):
        raise ValueError(f"'{value[:80]}' is not a mail address such as me@example.com")
    return value


class EmailSettings(Section):
    """Email: mail threads as conversations (IMAP in, SMTP out); send-only without ``imap_url``."""

    enabled: bool = setting(False, description="serve email (send-only with just address and smtp_url)")
    address: str | None = setting(None, max_length=254, description="the agent's own mail address (the From of its mail)")
    smtp_url: str | None = setting(
        None, max_length=300,
        description="outgoing server: smtp://HOST:PORT (STARTTLS when offered, default port 587) or smtps://HOST:PORT (TLS, 465)",
    )
    imap_url: str | None = setting(
        None, max_length=300,
        description="incoming server: imap://HOST:PORT (STARTTLS when offered, default 143) or imaps://HOST:PORT (TLS, 993); unset: send-only",
    )
    mailbox: str = setting("INBOX", max_length=200, description="the IMAP folder read for new mail")
    poll_seconds: int = setting(30, ge=1, le=3600, description="seconds between looks for new mail")
    username: str | None = setting(None, max_length=254, description="login name at the server (default: the address)")
    password_env: str | None = setting(
        None, max_length=128,
        description="environment variable holding the login password (an app password); unset: send without logging in",
    )
    allow: list[str] = setting(default_factory=list, max_length=10_000, description="mail addresses allowed to talk to the agent")

    @validates("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return None if value is None else address(value)

    @validates("smtp_url")
    @classmethod
    def _smtp(cls, value: str | None) -> str | None:
        if value is not None:
            endpoint(value)
        return value

    @validates("imap_url")
    @classmethod
    def _imap(cls, value: str | None) -> str | None:
        if value is not None:
            endpoint(value, "imap")
        return value

    @validates("mailbox")
    @classmethod
    def _mailbox(cls, value: str) -> str:
        if not value or any(not ch.isprintable() or ch in '"\\' for ch in value):
            raise ValueError("must be a folder name without quotes, backslashes or control characters")
        return value

    @validates("username")
    @classmethod
    def _username(cls, value: str | None) -> str | None:
        if value is not None and (not value or any(ch.isspace() or ord(ch) < 32 for ch in value)):
            raise ValueError("must be a login name without spaces")
        return value

    @validates("password_env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        return None if value is None else env_name(value)

    @validates("allow")
    @classmethod
    def _allow(cls, value: list[str]) -> list[str]:
        return [address(item).lower() for item in value]


def _secrets(settings: Any) -> list[str]:
    section = settings.email
    return [section.password_env] if section.password_env else []


def _checks(settings: Any) -> list[Check]:
    section = settings.email
    found = unset(settings, "email", {
        "address": ("address", ": the agent's own address", "agent@example.com"),
        "smtp_url": ("smtp", ": no mail can be sent", "smtps://smtp.example.com:465"),
    })
    if section.smtp_url and not section.password_env and not endpoint(section.smtp_url).local:
        found.append(("email login", f"email.password_env is not set, so vigil sends to {endpoint(section.smtp_url)} "
                                     "without logging in: most mail servers refuse that",
                      "vigil config set email.password_env VIGIL_EMAIL_PASSWORD (and export it, an app password)"))
    if section.imap_url and not section.password_env and not endpoint(section.imap_url, "imap").local:
        found.append(("email imap login", "email.imap_url is set but email.password_env is not: "
                                          "reading a mailbox needs its password",
                      "vigil config set email.password_env VIGIL_EMAIL_PASSWORD (and export it, an app password)"))
    return found


EMAIL = sectioned(
    "email",
    "Email",
    secrets=_secrets,
    checks=_checks,
    target=TargetForm(
        usage="email:<address>",
        chat=ADDRESS,
        chat_needed="a mail address such as me@example.com",
    ),
    # Not a single receiver: workers reading one mailbox store a mail once (its Message-ID is
    # the inbox's key), so it is answered once whoever reads it first.
    # Files both ways: an allowed sender's attachments are saved into the conversation's working
    # directory, and send_file mails a file as an attachment. No message limit: a mail holds the
    # whole answer.
    capabilities=Capabilities(pairing=True, files=True),
)
