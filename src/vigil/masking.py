"""Text about to be shown or stored: credentials inside URLs masked, unprintable text escaped.

``mask_secrets`` hides ``http://user:pass@host`` and ``?api-key=...`` wherever a configured URL
or an error text that may quote one is shown or stored: ``vigil config show``/``get``, the
model clients' error messages, cron run records. ``printable`` makes user-supplied text safe
to echo in a one-line message.
"""

from __future__ import annotations

import re

MASK = "***"

# The authority's user information: everything between "scheme://" and the last "@" before
# the path. Greedy, so a password with an unencoded "@" is masked whole.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<info>[^/?#\s]*)@")
# A query or fragment parameter whose name says it carries a secret.
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;#](?:[^=&;#\s]*?)"
    r"(?:key|token|secret|passw|pwd|pass|auth|sig|credential|session|code)"
    r"[^=&;#\s]*=)(?P<value>[^&;#\s\"<>]*)",
    re.IGNORECASE,
)


def mask_secrets(text: str) -> str:
    """``text`` with every URL password, user-name token and secret-named query value replaced
    by ``***``. Safe on any text: what is not a URL is left as it is."""
    if "://" not in text and "=" not in text:
        return text

    def userinfo(match: re.Match[str]) -> str:
        info = match.group("info")
        user, colon, _ = info.partition(":")
        # "user:password@" keeps the user; a lone "token@" is itself the secret.
        shown = f"{user}:{MASK}" if colon and user else MASK
        return f"{match.group('scheme')}{shown}@"

    text = _USERINFO.sub(userinfo, text)
    return _SECRET_PARAM.sub(
        lambda m: m.group("name") + (MASK if m.group("value") else ""), text
    )


def printable(text: str, limit: int = 80) -> str:
    """``text`` safe to print on one line: undecodable bytes (lone surrogates), control
    characters and line separators escaped, and at most ``limit`` characters."""
    shown = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if not shown.isprintable():
        shown = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in shown)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def is_text(value: str) -> bool:
    """``False`` for a string holding lone surrogates (undecodable bytes from the command line)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
