"""Which vigil conversation a request continues, as routes of the ``api`` adapter.

Every key below is a route in the gateway's durable routing table (``store.gateway``), so the
matching survives restarts, follows compression continuations and is forgotten with its
conversation. The message itself then goes through the conversation's own route
(``session:<id>``), pointed at it first: a lookup key may lead to another conversation later
(two chats whose exchanges are alike), and the gateway keeps a route bound to the
conversation it led to while that runs.

* ``chat:<hash>`` — the exchange so far: after each answer, the hash of the chat's user and
  assistant messages *including that answer* points at the conversation, so a client that
  resends the history with a new message at the end lands in the same conversation. The hash
  is over the text of each message with its whitespace collapsed (clients trim and re-wrap);
  system messages are left out (a client may change its system prompt without starting over).
  It is a chain: the hash up to the question is stored with the message in the inbox, so an
  answer given after a restart (or by another gateway worker) is remembered all the same.
* ``key:<key>`` — a client that names its conversation (``X-Vigil-Conversation``,
  ``metadata.conversation``) always reaches the same one; a key that is a vigil session id
  continues that conversation, whatever its source.
* ``response:<id>`` — each answer of ``/v1/responses``, for ``previous_response_id``.
* ``new:<random>`` — a history the API never answered starts a new conversation.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Sequence

from vigil.gateway.adapters.openai_api.parsing import Message
from vigil.store.gateway.gateway_tables import RouteKey

ADAPTER = "api"
"""The adapter's name: the ``source`` of its conversations and the ``adapter`` of its routes."""


SEED = "vigil-api-exchange-1"


def _normal(text: str) -> str:
    return " ".join(text.split())


def canonical(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """A chat's user and assistant messages as compared: whitespace collapsed, empty ones left
    out, consecutive ones of one role joined (a client may send two user messages in a row)."""
    out: list[tuple[str, str]] = []
    for message in messages:
        text = _normal(message.text)
        if message.role not in ("user", "assistant") or not text:
            continue
        if out and out[-1][0] == message.role:
            out[-1] = (message.role, out[-1][1] + " " + text)
        else:
            out.append((message.role, text))
    return out


def extend(digest: str, role: str, text: str) -> str:
    """The hash of a chat after one more message of ``role`` (unchanged by an empty one)."""
    text = _normal(text)
    if not text:
        return digest
    return hashlib.sha256("\x00".join((digest, role, text)).encode("utf-8")).hexdigest()


def exchange_hash(messages: Sequence[Message]) -> str:
    """The hash of a chat's user and assistant messages, as resent by a client: a chain, so
    that the hash of the question, stored with the message, extends to that of the answer."""
    digest = SEED
    for role, text in canonical(messages):
        digest = extend(digest, role, text)
    return digest


def history_route(messages: Sequence[Message]) -> RouteKey:
    return hash_route(exchange_hash(messages))


def hash_route(digest: str) -> RouteKey:
    return RouteKey(ADAPTER, "chat:" + digest)


def key_route(key: str) -> RouteKey:
    return RouteKey(ADAPTER, "key:" + key)


def response_route(response_id: str) -> RouteKey:
    return RouteKey(ADAPTER, "response:" + response_id)


def session_route(session_id: str) -> RouteKey:
    return RouteKey(ADAPTER, "session:" + session_id)


def new_route() -> RouteKey:
    return RouteKey(ADAPTER, "new:" + secrets.token_urlsafe(12))


def answered_routes(asked: str, answers: Sequence[str], response_id: str | None = None) -> list[RouteKey]:
    """The routes a chat that resends this exchange (``asked``: the hash of the chat up to the
    question) comes back on: one per form of the answer the client may have kept (as stored,
    as streamed), and the response's id."""
    routes = [hash_route(extend(asked, "assistant", answer)) for answer in answers]
    if response_id is not None:
        routes.append(response_route(response_id))
    return list(dict.fromkeys(routes))
