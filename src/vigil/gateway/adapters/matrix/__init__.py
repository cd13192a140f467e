"""The Matrix adapter (``pip install 'vigil[matrix]'``): see :mod:`.adapter`.

Setting it up: make an account for the agent on a homeserver (``@vigil:example.org``), get its
access token (``curl -XPOST https://HOMESERVER/_matrix/client/v3/login`` with the password, or
Element's Settings → Help & About → Access Token), put it in ``MATRIX_ACCESS_TOKEN`` (the
variable ``matrix.token_env`` names; never in config.yaml), and in config.yaml::

    matrix:
      enabled: true
      homeserver: https://matrix.example.org
      user_id: "@vigil:example.org"
      allow: ["@me:example.org"]     # who may talk to the agent (and invite it)

Then invite the agent to a direct chat or a room: it joins when an allowed person invites it.
In a room it answers when mentioned, each thread its own conversation.
"""

from typing import Any

from vigil.gateway.adapters.matrix.adapter import MatrixAdapter


def create(settings: Any) -> MatrixAdapter:
    """The adapter for a profile's settings (the platform registry's factory)."""
    return MatrixAdapter(settings.matrix)


__all__ = ["MatrixAdapter", "create"]
