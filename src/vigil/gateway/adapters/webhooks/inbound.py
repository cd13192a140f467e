"""One request to ``POST /hooks/NAME``, checked: its signature, its freshness, its body.

Nothing here stores anything: a request that fails a check is refused with a
:class:`Refused` (an HTTP status, a code and a sentence), and only a :class:`HookMessage` is
handed to the gateway. The checks, in order: the three signature headers are there and well
formed (400), a signature matches the hook's secret (401), the timestamp is within
``webhooks.tolerance`` of the gateway's clock (401: an old request replayed), then the body
is a JSON object (400) of known fields with a text (422)::

    {"text": "the lights went off", "conversation": "kitchen", "data": {...}}

``conversation`` names the conversation to continue (the same key, the same conversation);
without one the request starts a conversation of its own, whose key is the delivery id.
``data``, any JSON, is shown to the agent after the text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from vigil.gateway.adapters.webhooks import signing
from vigil.platforms.webhooks import KEY

MAX_TEXT = 100_000
"""Characters a request's text may have."""
FIELDS = ("text", "conversation", "data")
_STAMP = re.compile(r"\d{1,12}")
_SIGNATURE_MAX = 2_000


class Refused(Exception):
    """A request answered with HTTP ``status`` and nothing stored: ``{"error": {"code", "message"}}``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True, slots=True)
class HookMessage:
    """A signed, fresh, well-formed request."""

    delivery: str
    """Its ``webhook-id``: the same on a redelivery, which is answered once."""
    conversation: str
    """The conversation key (the delivery id when the request named none)."""
    text: str
    """What the agent is told: the text, and the data after it."""


def verify(key: bytes, headers: Mapping[str, str], body: bytes, *, now: float, tolerance: int) -> str:
    """The delivery id of a request signed with ``key`` within ``tolerance`` seconds of
    ``now``; :class:`Refused` otherwise."""
    delivery = headers.get(signing.ID, "")
    stamp = headers.get(signing.TIMESTAMP, "")
    given = headers.get(signing.SIGNATURE, "")
    missing = [name for name, value in ((signing.ID, delivery), (signing.TIMESTAMP, stamp),
                                        (signing.SIGNATURE, given)) if not value]
    if missing:
        raise Refused(401, "unsigned", f"the request is not signed: {', '.join(missing)} missing "
                      "(Standard Webhooks headers; see the README's Webhooks section)")
    if not KEY.fullmatch(delivery):
        raise Refused(400, "bad_id", f"{signing.ID} must be 1-128 letters, digits and ._@- (a unique id per delivery)")
    if not _STAMP.fullmatch(stamp):
        raise Refused(400, "bad_timestamp", f"{signing.TIMESTAMP} must be the Unix time in whole seconds")
    if len(given) > _SIGNATURE_MAX or not signing.matches(key, delivery, stamp, body, given):
        raise Refused(401, "bad_signature", "the signature does not match the hook's secret")
    if abs(now - int(stamp)) > tolerance:
        raise Refused(401, "stale", f"{signing.TIMESTAMP} is more than {tolerance} seconds from the gateway's "
                      "clock: an old request is not taken again (sign each request when it is sent)")
    return delivery


def parse(delivery: str, body: bytes) -> HookMessage:
    """The message a verified request's ``body`` carries; :class:`Refused` (400, 422) otherwise."""
    try:
        payload = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise Refused(400, "not_utf8", "the body is not UTF-8 text") from None
    except (ValueError, RecursionError):
        raise Refused(400, "not_json", "the body is not JSON") from None
    if not isinstance(payload, dict):
        raise Refused(400, "not_object", 'the body must be a JSON object such as {"text": "..."}')
    unknown = [str(name) for name in payload if name not in FIELDS]
    if unknown:
        raise Refused(422, "unknown_field", f"unknown field '{unknown[0][:60]}' (a hook takes {', '.join(FIELDS)})")
    text = payload.get("text")
    if not isinstance(text, str) or not text.strip():
        raise Refused(422, "no_text", '"text" must be a non-empty string: what the agent is told')
    if len(text) > MAX_TEXT:
        raise Refused(422, "too_long", f'"text" has more than {MAX_TEXT:,} characters')
    conversation = payload.get("conversation", None)
    if conversation is None:
        conversation = delivery
    elif not isinstance(conversation, str) or not KEY.fullmatch(conversation):
        raise Refused(422, "bad_conversation", '"conversation" must be 1-128 letters, digits and ._@- '
                      "(the same key continues the same conversation)")
    if "data" in payload:
        text = f"{text}\n\n```json\n{_shown(payload['data'])}\n```"
    if not _encodable(text):
        raise Refused(422, "not_text", "the text holds characters that are not Unicode text (a lone surrogate) or a NUL")
    return HookMessage(delivery, conversation, text)


def _shown(data: Any) -> str:
    try:
        return json.dumps(data, ensure_ascii=False, indent=2)
    except (ValueError, RecursionError):  # a float json.loads took but cannot give back
        raise Refused(422, "bad_data", '"data" cannot be shown as JSON') from None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text
