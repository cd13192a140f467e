"""The web chat's login token: generated on the gateway's first start, kept 0600 in the profile.

``vigil gateway run`` prints a login URL carrying it and ``vigil gateway status`` shows it;
deleting the file (and restarting the gateway) issues a new one and logs every browser out.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from vigil.profiles import Profile

TOKEN_FILE = "gateway.token"
TOKEN_BYTES = 32


def token_path(profile: Profile) -> Path:
    return profile.home / TOKEN_FILE


def read_token(profile: Profile) -> str | None:
    """The stored token, or ``None`` when there is none yet (or the file is unreadable/empty)."""
    try:
        text = token_path(profile).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def load_or_create_token(profile: Profile) -> str:
    """The stored token, created (0600, atomically) if missing."""
    existing = read_token(profile)
    if existing is not None:
        return existing
    path = token_path(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    temporary = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, (token + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, path)  # never replaces a token another process wrote meanwhile
    except FileExistsError:
        pass
    finally:
        os.unlink(temporary)
    return read_token(profile) or token
