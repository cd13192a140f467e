"""Signatures of hook requests and deliveries, as Standard Webhooks makes them.

A message carries three headers: ``webhook-id`` (the delivery's id, the same on every retry),
``webhook-timestamp`` (Unix seconds when it was signed) and ``webhook-signature``: one or
more space-separated ``v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>``. The key
of a secret written ``whsec_<base64>`` (as Standard Webhooks libraries make them) is its
decoded bytes; any other secret is its own UTF-8 bytes, so that ``openssl dgst -sha256 -hmac
"$SECRET" -binary | base64`` signs a request.

Only the standard library's ``hmac`` is used: the ``standardwebhooks`` package does the same
few lines and brings its own HTTP client and date libraries with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

ID = "webhook-id"
TIMESTAMP = "webhook-timestamp"
SIGNATURE = "webhook-signature"
PREFIX = "whsec_"
VERSION = "v1"


def key_of(secret: str) -> bytes:
    """The HMAC key of ``secret`` (see the module docstring)."""
    secret = secret.strip()
    if secret.startswith(PREFIX):
        try:
            decoded = base64.b64decode(secret[len(PREFIX):], validate=True)
        except (binascii.Error, ValueError):
            decoded = b""  # not base64 after all: the text itself is the key
        if decoded:
            return decoded
    return secret.encode("utf-8")


def signature(key: bytes, delivery: str, timestamp: str, body: bytes) -> str:
    """The ``v1,<base64>`` signature of one message."""
    content = delivery.encode("utf-8") + b"." + timestamp.encode("utf-8") + b"." + body
    digest = hmac.new(key, content, hashlib.sha256).digest()
    return f"{VERSION},{base64.b64encode(digest).decode('ascii')}"


def headers(key: bytes, delivery: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers that sign ``body`` as delivery ``delivery`` at ``timestamp``."""
    stamp = str(timestamp)
    return {ID: delivery, TIMESTAMP: stamp, SIGNATURE: signature(key, delivery, stamp, body)}


def matches(key: bytes, delivery: str, timestamp: str, body: bytes, given: str) -> bool:
    """Whether one of the signatures in ``given`` (space-separated) signs this message; each
    is compared in constant time."""
    expected = signature(key, delivery, timestamp, body).encode("ascii")
    found = False
    for candidate in given.split():
        found |= hmac.compare_digest(expected, candidate.encode("utf-8", "replace"))
    return found
