"""The web chat: a page served by the gateway, logged into with the profile's token.

Routes (all but ``/login``, ``/healthz`` and ``/static/*`` need the session cookie or
``Authorization: Bearer <token>``; state-changing requests by cookie must come from the page's
own origin):

* ``GET /login`` (form; ``?token=`` logs in at once, or fills the form in when another site's
  page opened the link), ``POST /login`` (refused from another site's page), ``POST /logout``
* ``GET /`` the page, ``GET /static/...`` its files
* ``GET|POST /api/conversations``, ``GET /api/conversations/{id}``,
  ``POST /api/conversations/{id}/messages``, ``GET /api/conversations/{id}/events`` (SSE),
  ``POST /api/conversations/{id}/files``, ``POST /api/approvals/{id}``,
  ``GET /api/files/{outbox_id}`` (a file the agent sent, as an attachment)
* ``POST /api/conversations/{id}/stop`` (end the running turn), ``GET /api/conversations/{id}/queue``
  and ``DELETE /api/conversations/{id}/queue/{inbox_id}`` (what waits behind it; withdraw one),
  ``PATCH /api/conversations/{id}``
  (rename, archive), ``DELETE /api/conversations/{id}`` (delete for good), ``GET /api/search?q=``
  (message matches with snippets), see :mod:`.conversation_api`; ``GET /api/conversations?archived=1``
  lists the archived conversations
"""

from __future__ import annotations

from typing import Any

from vigil.gateway.adapters.web.adapter import WebAdapter


def create(settings: Any) -> WebAdapter:
    """The adapter for a profile's settings (the platform registry's factory)."""
    return WebAdapter()


__all__ = ["WebAdapter", "create"]
