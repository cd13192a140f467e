"""The web chat's declaration in the platform registry (its settings are ``gateway.web``)."""

from __future__ import annotations

from vigil.platforms.spec import Capabilities, Platform, TargetForm

WEB = Platform(
    name="web",
    title="the web chat",
    adapter="vigil.gateway.adapters.web:create",
    enabled=lambda settings: bool(settings.gateway.web.enabled),
    how_to_enable="gateway.web.enabled is false",
    target=TargetForm(usage="web"),
    # A page shows the answer growing in one message, each piece as it is written (the live
    # events): no pace to keep, and no length limit.
    capabilities=Capabilities(edits=True, buttons=True, files=True, edit_interval=0.0),
)
