"""What the API's routes share: the running gateway, the token, the waiting exchanges."""

from __future__ import annotations

from dataclasses import dataclass, field

from vigil.gateway.adapters.base import GatewayClosed, GatewayPort
from vigil.gateway.adapters.openai_api.exchange import Exchanges

MODEL = "vigil"
"""The model name ``/v1/models`` lists first; any name a client sends reaches the agent."""


@dataclass
class ApiState:
    gateway_port: GatewayPort | None = None
    token: str | None = None
    exchanges: Exchanges = field(default_factory=Exchanges)

    @property
    def gateway(self) -> GatewayPort:
        """The running gateway; ``GatewayClosed`` (a 503) before start and after stop."""
        if self.gateway_port is None:
            raise GatewayClosed("the gateway is starting or stopping")
        return self.gateway_port

    def model_names(self) -> list[str]:
        names = [MODEL]
        if self.gateway_port is not None:
            names.append(f"{MODEL}/{self.gateway_port.profile.name}")
        return names
