"""The Slack adapter (``pip install 'vigil[slack]'``): see :mod:`.adapter`."""

from vigil.gateway.adapters.slack.adapter import SlackAdapter

__all__ = ["SlackAdapter"]
