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
* ``key:<key>`` — a client that names its conversation (``X-Vigil-Conversation``,
  ``metadata.conversation``) always reaches the same one; a key that is a vigil session id
  continues that conversation, whatever its source.
* ``response:<id>`` — each answer of ``/v1/responses``, for ``previous_response_id``.
* ``new:<random>`` — a history the API never answered starts a new conversation.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Sequence

from vigil.gateway.adapters.openai_api.parsing import Message
from vigil.store.gateway_tables import RouteKey

ADAPTER = "api"
"""The adapter's name: the ``source`` of its conversations and the ``adapter`` of its routes."""


def exchange_hash(messages: Sequence[Message]) -> str:
    """The hash of a chat's user and assistant messages, as resent by a client."""
    canonical = [[m.role, " ".join(m.text.split())] for m in messages if m.role in ("user", "assistant")]
    canonical = [pair for pair in canonical if pair[1]]
    return hashlib.sha256(json.dumps(canonical, ensure_ascii=False).encode("utf-8")).hexdigest()


def history_route(messages: Sequence[Message]) -> RouteKey:
    return RouteKey(ADAPTER, "chat:" + exchange_hash(messages))


def key_route(key: str) -> RouteKey:
    return RouteKey(ADAPTER, "key:" + key)


def response_route(response_id: str) -> RouteKey:
    return RouteKey(ADAPTER, "response:" + response_id)


def session_route(session_id: str) -> RouteKey:
    return RouteKey(ADAPTER, "session:" + session_id)


def new_route() -> RouteKey:
    return RouteKey(ADAPTER, "new:" + secrets.token_urlsafe(12))


def answered_routes(prior: Sequence[Message], text: str, answers: Sequence[str]) -> list[RouteKey]:
    """The routes a chat that resends this exchange comes back on: one per form of the answer
    the client may have kept (the answer as stored, the text it was streamed)."""
    routes = []
    for answer in dict.fromkeys(answers):
        routes.append(history_route([*prior, Message("user", text), Message("assistant", answer)]))
    return list(dict.fromkeys(routes))
