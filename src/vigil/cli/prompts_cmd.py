"""``vigil sessions refresh-prompts`` and ``vigil sessions repair-prompts``."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Attach the prompt maintenance commands to ``vigil sessions``."""
