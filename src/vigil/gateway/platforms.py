"""Which adapters a profile's configuration turns on: one for each platform of the registry
(:mod:`vigil.platforms`) whose settings enable it, made by the factory it declares."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vigil import platforms as registry
from vigil.config.settings import Settings
from vigil.profiles import Profile

if TYPE_CHECKING:
    from vigil.gateway.adapters.base import Adapter


def configured_adapters(settings: Settings, profile: Profile) -> "dict[str, Adapter]":
    """An adapter for every enabled platform, by name, in registry order."""
    adapters: dict[str, Adapter] = {}
    for platform in registry.platforms():
        if platform.enabled(settings):
            adapter = factory(platform)(settings)
            adapters[adapter.name] = adapter
    return adapters


def factory(platform: registry.Platform) -> Any:
    """The callable ``platform.adapter`` names (``module:function``)."""
    module, _, name = platform.adapter.partition(":")
    return getattr(importlib.import_module(module), name)
