"""Identifiers: session ids (short, random, typed by people) and prompt content hashes."""

from __future__ import annotations

import hashlib
import re
import secrets

SESSION_ID_HEX_CHARS = 12
"""Length of a generated id: 48 random bits, a collision is retried, never expected."""

_HEX = re.compile(r"[0-9a-f]+")


def new_session_id() -> str:
    """A fresh random session id: 12 lowercase hex characters."""
    return secrets.token_hex(SESSION_ID_HEX_CHARS // 2)


def is_session_ref(ref: str) -> bool:
    """Whether ``ref`` could name a session (a whole id or a prefix): lowercase hex, non-empty."""
    return bool(_HEX.fullmatch(ref))


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is a valid explicit id (1 to 64 lowercase hex chars).

    Ids outside this alphabet could never be resolved from a typed reference, so they are
    refused before anything is written.
    """
    if not (is_session_ref(session_id) and len(session_id) <= 64):
        raise ValueError(f"invalid session id {session_id!r}: expected 1-64 lowercase hex characters")
    return session_id


def prompt_hash(text: str) -> str:
    """The content address of a system prompt: sha256 hex of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
