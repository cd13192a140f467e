"""The OpenAI-compatible API: existing chat clients (Open WebUI, LibreChat, editors, the
``openai`` SDK) talk to the agent on the web chat's port, with the gateway token as the key.

Routes (each needs ``Authorization: Bearer <gateway token>``; errors are OpenAI's
``{"error": {"message", "type", "code", "param"}}``, 401 for a wrong key):

* ``GET /v1/models`` — ``vigil`` and ``vigil/<profile>``; a request may name any model: the
  agent answers with its own model settings, tools and memory.
* ``POST /v1/chat/completions`` — plain or ``stream: true`` (``stream_options.include_usage``
  adds the usage chunk); the answer's ``usage`` is the turn's, cached input included.
* ``POST /v1/responses`` — ``input`` as text or messages, ``instructions``,
  ``previous_response_id``; streamed as the Responses API's events.

Each client chat is one persistent vigil conversation (source ``api``): listed in the web chat
and ``vigil sessions``, with its stored prompt, tools, memory, heartbeats and cron, and slash
commands (``/heartbeat every 10m …``). Which conversation a request continues:
:mod:`.matching`; what the agent is shown of the client's system message: :mod:`.context`;
how the message is stored before the model is called and answered even when the client went
away: :mod:`.exchange`. Every response names its conversation in ``X-Vigil-Conversation``.
"""

from __future__ import annotations

from typing import Any

from vigil.gateway.adapters.openai_api.adapter import ApiAdapter


def create(settings: Any) -> ApiAdapter:
    """The adapter for a profile's settings (the platform registry's factory)."""
    return ApiAdapter()


__all__ = ["ApiAdapter", "create"]
