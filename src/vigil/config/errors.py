"""The config error, apart from the config models: the CLI catches it without loading them."""

from __future__ import annotations


class ConfigError(Exception):
    """config.yaml cannot be read or does not validate; the message names file and line."""
