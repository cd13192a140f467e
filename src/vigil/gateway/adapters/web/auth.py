"""Who may use the web chat: the login token, the signed session cookie, the Origin check,
and whether a request was made by another site's page.

The cookie is ``v1.<issued>.<signature>``: the issue time (Unix seconds) signed with
HMAC-SHA256 under a key derived from the login token. Nothing about the cookie is stored, so it
survives gateway restarts, and a new token (the token file deleted) invalidates every cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

COOKIE_NAME = "vigil_session"
COOKIE_MAX_AGE = 30 * 24 * 3600
"""Seconds a session cookie stays valid (30 days)."""
_VERSION = "v1"
_KEY_LABEL = b"vigil web chat session cookie v1"
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OWN_FETCHES = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values of a request this server's page made, or the browser made for
no page at all (a typed URL, a bookmark, a link opened from a terminal)."""


def _cookie_key(token: str) -> bytes:
    return hmac.new(token.encode("utf-8"), _KEY_LABEL, hashlib.sha256).digest()


def _signature(key: bytes, issued: int) -> str:
    return hmac.new(key, f"{_VERSION}.{issued}".encode("ascii"), hashlib.sha256).hexdigest()


class SessionSigner:
    """Issues and checks session cookies and bearer tokens for one login token."""

    def __init__(self, token: str, *, now: Callable[[], float] = time.time) -> None:
        self._token = token
        self._key = _cookie_key(token)
        self._now = now

    def token_matches(self, candidate: str) -> bool:
        """Whether ``candidate`` is the login token (constant time)."""
        return hmac.compare_digest(candidate.encode("utf-8"), self._token.encode("utf-8"))

    def issue(self) -> str:
        """A fresh cookie value."""
        issued = int(self._now())
        return f"{_VERSION}.{issued}.{_signature(self._key, issued)}"

    def valid(self, cookie: str) -> bool:
        """Whether ``cookie`` was issued under this token within the last 30 days."""
        parts = cookie.split(".")
        if len(parts) != 3 or parts[0] != _VERSION or not parts[1].isdigit():
            return False
        issued = int(parts[1])
        expected = _signature(self._key, issued)
        if not hmac.compare_digest(parts[2].encode("ascii", "replace"), expected.encode("ascii")):
            return False
        age = self._now() - issued
        return -300 <= age <= COOKIE_MAX_AGE  # a little clock skew forward is tolerated

    def bearer_valid(self, header: str) -> bool:
        """Whether an ``Authorization`` header carries the login token as a bearer token."""
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and bool(value) and self.token_matches(value.strip())


def _origin_of(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def same_origin(origin: str | None, referer: str | None, *, scheme: str, host: str) -> bool:
    """Whether a state-changing request comes from this server's own page: its ``Origin``
    (or, if absent, ``Referer``) has the scheme, host and port of ``scheme://host``."""
    claimed = origin if origin else referer
    if not claimed or not host:
        return False
    own = _origin_of(f"{scheme}://{host}")
    return own is not None and _origin_of(claimed) == own


def cross_origin(fetch_site: str | None, origin: str | None, referer: str | None, *, scheme: str, host: str) -> bool:
    """Whether a browser says another origin's page made this request: ``Sec-Fetch-Site``
    other than :data:`OWN_FETCHES` (``cross-site``, ``same-site``), or, from a browser too old
    to send it, an ``Origin`` (else ``Referer``) that is not ``scheme://host``. A request with
    none of them (a script, curl) is not: it cannot be told apart from the owner's."""
    if fetch_site:  # a page cannot forge it, and a script that does only refuses itself
        return fetch_site.strip().lower() not in OWN_FETCHES
    if not (origin or referer):
        return False
    return not same_origin(origin, referer, scheme=scheme, host=host)


@dataclass
class LoginThrottle:
    """Slows token guessing: at most ``limit`` failed logins per ``window`` seconds (from
    anywhere; the gateway has one user), and each failure answers after ``delay`` seconds."""

    limit: int = 10
    window: float = 60.0
    delay: float = 1.0
    now: Callable[[], float] = time.monotonic
    _failures: deque[float] = field(default_factory=deque)

    def blocked(self) -> bool:
        """Whether logins are refused for now (too many recent failures)."""
        cutoff = self.now() - self.window
        while self._failures and self._failures[0] < cutoff:
            self._failures.popleft()
        return len(self._failures) >= self.limit

    def failed(self) -> None:
        self._failures.append(self.now())
