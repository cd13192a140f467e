"""The Slack adapter (``pip install 'vigil[slack]'``): see :mod:`.adapter`.

Setting up the Slack app (api.slack.com/apps):

- Bot token scopes: ``chat:write``, ``app_mentions:read``, ``im:history``,
  ``channels:history`` (and ``groups:history`` for private channels), ``files:read``,
  ``files:write``, ``commands``.
- Event subscriptions (Request URL ``https://<public host>/slack/events``): ``message.im``,
  ``app_mention``, ``message.channels`` (thread replies without a mention).
- Interactivity and the slash command (``/vigil`` or ``slack.command``): the same URL.
- Or turn on Socket Mode (``slack.socket_mode: true``) and create an app-level token with
  ``connections:write``: no public URL needed.

Environment: ``SLACK_BOT_TOKEN`` (``xoxb-…``), ``SLACK_SIGNING_SECRET`` (HTTP events) or
``SLACK_APP_TOKEN`` (``xapp-…``, Socket Mode); the names are ``slack.*_env``. Who may talk to
the agent: ``slack.allow`` (user ids) or pairing.
"""

from typing import Any

from vigil.gateway.adapters.slack.adapter import SlackAdapter


def create(settings: Any) -> SlackAdapter:
    """The adapter for a profile's settings (the platform registry's factory)."""
    return SlackAdapter(settings.slack)


__all__ = ["SlackAdapter", "create"]
