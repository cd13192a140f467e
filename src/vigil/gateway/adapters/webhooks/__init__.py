"""Webhooks: named hooks that start or continue conversations over signed HTTP, and the URLs
their answers, heartbeats and cron results are delivered to — the glue for Home Assistant, n8n,
CI systems and anything else that can send and receive an HTTP request.

- In: ``POST /hooks/NAME`` on the gateway's port, signed as Standard Webhooks are (the secret
  from the variable ``webhooks.hooks.NAME.secret_env`` names), fresh (``webhooks.tolerance``)
  and answered once per ``webhook-id`` (:mod:`.routes`, :mod:`.inbound`, :mod:`.signing`).
- Out: a signed ``POST`` of each answer to ``webhooks.hooks.NAME.url``, retried through the
  gateway's outbox (:mod:`.outbound`); ``vigil cron add --deliver webhooks:NAME`` sends cron
  results there; a command waiting for approval is told there, to be decided in the web chat
  (:mod:`.approvals`).
"""

from typing import Any

from vigil.gateway.adapters.webhooks.adapter import WebhooksAdapter


def create(settings: Any) -> WebhooksAdapter:
    """The adapter for a profile's settings (the platform registry's factory)."""
    return WebhooksAdapter(settings.webhooks)


__all__ = ["WebhooksAdapter", "create"]
