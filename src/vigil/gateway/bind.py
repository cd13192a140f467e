"""Which address the gateway's HTTP server may listen on without being told twice.

The web chat answers anyone who has the login token, and can run commands on this machine: it
listens on loopback unless ``vigil gateway run --bind ADDR`` asks for more on the command line.
A non-loopback ``gateway.web.host`` in config.yaml alone is refused, so that a copied config
file cannot open the gateway to the network by itself.
"""

from __future__ import annotations

import ipaddress

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost", "ip6-loopback"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine: ``localhost``, ``127.0.0.0/8``,
    ``::1`` (bracketed or not) or an IPv4-mapped loopback address. An empty host, a wildcard
    (``0.0.0.0``, ``::``) and any other name are not."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if text.lower() in _LOOPBACK_NAMES or text.lower().endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def check_bind(host: str, explicit: bool) -> None:
    """Refuse to listen on ``host`` unless it is loopback or was given explicitly (``--bind``).

    Raises ``ValueError`` with a one-line message that says what to do; an explicit address
    must still be one word (no spaces, no control characters)."""
    if not host or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in host):
        raise ValueError(f"{host!r} is not an address to listen on (give an address or a host name without spaces)")
    if explicit or is_loopback(host):
        return
    raise ValueError(
        f"gateway.web.host is {host!r}, which is not a loopback address: the web chat would be "
        f"reachable from other machines. Pass --bind {host} to mean it, or set gateway.web.host "
        "to 127.0.0.1"
    )
