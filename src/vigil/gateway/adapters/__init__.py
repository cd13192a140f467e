"""Platform adapters of the gateway: one module (or package) per platform behind
:class:`vigil.gateway.adapters.base.Adapter`."""
