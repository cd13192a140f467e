"""Pairing codes: how they are made, read back and worded (standard library only, so that
``vigil pairing`` loads none of the gateway).

A code is 8 characters of an alphabet without look-alikes (no 0/O, 1/I/L): 31**8, about
8.5e11 codes. The store keeps only its SHA-256, plus a random nonce; the code itself is an HMAC
of the nonce under the profile's pairing key (``pairing.key``, 0600, never in the store), so
the gateway can send a user their pending code again without the database holding it, and a
copy of the database alone does not reveal it.

Brute force: the person who wants in is a platform user; they cannot run ``vigil pairing
approve``, so guessing is not theirs to do — what they can do is ask for codes. They get one
pending code (sent again when they ask again), a platform has at most three pending, codes
expire after an hour, and past five requests in fifteen minutes a user is answered with
silence. The owner's side: five wrong codes in fifteen minutes lock approvals (correct codes
too) until the oldest of them is fifteen minutes old.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from vigil.store.gateway.pairing_tables import Limits

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
KEY_FILE = "pairing.key"
LIMITS = Limits()
"""The limits of the issue: 1-hour codes, 3 pending per platform, 5 requests and 5 wrong codes
per 15 minutes."""


class NotACode(ValueError):
    """The text cannot be a pairing code (wrong length or characters); nothing is counted."""


def normalize(text: str) -> str:
    """The code ``text`` spells: case, spaces and dashes do not matter (``abcd-efgh``).
    Raises :class:`NotACode` for anything that is not 8 characters of :data:`ALPHABET`."""
    if not isinstance(text, str):
        raise NotACode("a pairing code is text")
    code = "".join(text.split()).replace("-", "").upper()
    if len(code) != CODE_LENGTH or any(c not in ALPHABET for c in code):
        shown = text if len(text) <= 20 else text[:20] + "…"
        raise NotACode(
            f"{shown!r} is not a pairing code: a code is {CODE_LENGTH} letters and digits such as "
            f"K7QM3XPA (no 0, O, 1, I or L)"
        )
    return code


def code_hash(code: str) -> str:
    """The SHA-256 (hex) the store keeps for a normalized code."""
    return hashlib.sha256(code.encode("ascii")).hexdigest()


def new_nonce() -> str:
    return secrets.token_hex(16)


def derive(key: bytes, nonce: str, platform: str, user_id: str) -> str:
    """The code of a nonce for a user (uniform over :data:`ALPHABET`: rejection sampling)."""
    out: list[str] = []
    counter = 0
    limit = 256 - 256 % len(ALPHABET)
    while len(out) < CODE_LENGTH:
        message = "\0".join((nonce, platform, user_id, str(counter))).encode()
        for byte in hmac.new(key, message, hashlib.sha256).digest():
            if byte < limit and len(out) < CODE_LENGTH:
                out.append(ALPHABET[byte % len(ALPHABET)])
        counter += 1
    return "".join(out)


def load_or_create_key(home: Path) -> bytes:
    """The profile's pairing key, created (0600, never replacing another's) if missing."""
    path = home / KEY_FILE
    try:
        existing = path.read_bytes().strip()
    except FileNotFoundError:
        existing = b""
    if len(existing) >= 32:
        return existing
    home.mkdir(parents=True, exist_ok=True)
    key = secrets.token_hex(32).encode("ascii")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes().strip() or key
    try:
        os.write(fd, key + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def approve_command(code: str) -> str:
    return f"vigil pairing approve {code}"


def code_message(code: str, minutes: int, *, again: bool = False) -> str:
    """What an unknown user is told (kind ``pairing``)."""
    first = "You already have a pairing code" if again else "Hi! I don't know you yet, so I can't answer here"
    return (
        f"{first}. Your pairing code is {code} (valid for {minutes} more minute{'s' if minutes != 1 else ''}).\n"
        f"Ask the owner of this assistant to run:\n    {approve_command(code)}\n"
        "Your messages are answered once they have."
    )


FULL_MESSAGE = (
    "Hi! I can't answer here yet, and too many people are waiting to be paired right now. "
    "Please try again later."
)
LIMITED_MESSAGE = (
    "You have asked for a pairing code too often. Please wait a while before writing again "
    "(messages until then get no answer)."
)
