"""The ``gateway`` section of a profile's config.yaml (read by :mod:`vigil.config.settings`)."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from vigil.masking import printable
from vigil.config.schema import Section, ValueProblem, setting, validates

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"^(?=.{{1,254}}$){_LABEL}(?:\.{_LABEL})*\.?$")


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text[1:-1] if text.startswith("[") and text.endswith("]") else text)
    except ValueError:
        return False
    return True


class WebSettings(Section):
    """The gateway's HTTP server: the web chat, the OpenAI-compatible API, webhooks, /healthz and /metrics."""

    host: str = setting(
        "127.0.0.1",
        max_length=255,
        description="address to listen on; anything but loopback also needs --bind on the command line",
    )
    port: int = setting(
        8787, ge=1, le=65_535, description="port of the web chat, the OpenAI-compatible API and webhooks"
    )
    enabled: bool = setting(True, description="serve the web chat")
    allowed_hosts: list[str] = setting(
        default_factory=list, max_length=100,
        description=(
            "further host names the HTTP server answers to (a proxy's or load balancer's public name, "
            "for webhooks too); localhost, loopback and the address a request arrives at always work"
        ),
    )

    @validates("host")
    @classmethod
    def _one_word(cls, value: str) -> str:
        if not value or any(ch.isspace() or ord(ch) < 32 for ch in value):
            raise ValueError("host must be an address or a host name without spaces")
        return value

    @validates("allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        for index, name in enumerate(value):
            if not (_HOST_NAME.match(name) or _is_address(name)):
                raise ValueProblem(
                    f"'{printable(name)}' is not a host name: write the name alone, without scheme, "
                    "port or path (for example chat.example.org)", at=(index,),
                )
        return value


class ApiSettings(Section):
    """The OpenAI-compatible API on the gateway's HTTP server."""

    enabled: bool = setting(
        True,
        description=(
            "serve the OpenAI-compatible API (/v1/models, /v1/chat/completions, /v1/responses) on the "
            "web chat's port, with the gateway token as the API key"
        ),
    )


class GatewaySettings(Section):
    """The long-running process (``vigil gateway run``)."""

    web: WebSettings = setting(default_factory=WebSettings)
    api: ApiSettings = setting(default_factory=ApiSettings)
    busy: Literal["queue", "interrupt"] = setting(
        "queue", description="a message arriving during a turn waits (queue) or stops the turn (interrupt)"
    )
    stop_timeout: float = setting(
        30.0, ge=0, le=3_600, allow_inf_nan=False,
        description="seconds running turns may take to finish on SIGTERM before they are interrupted",
    )
    approval_timeout: float = setting(
        120.0, gt=0, le=86_400, allow_inf_nan=False,
        description="seconds to wait for a dangerous command's approval; no answer means denied",
    )
    upload_max_bytes: int = setting(
        25 * 1024 * 1024, ge=1, le=2**34, description="largest file accepted into a conversation's working directory"
    )
    outbox_attempts: int = setting(
        8, ge=1, le=100, description="tries to deliver a reply before it is marked failed"
    )
    retry_window: float = setting(
        3_600.0, ge=0, le=7 * 86_400, allow_inf_nan=False,
        description=(
            "seconds a message keeps waiting for a model endpoint that is down, slow or rate limiting "
            "(or a store that is busy) before it is failed; retried with back-off meanwhile"
        ),
    )
    retry_max_delay: float = setting(
        60.0, gt=0, le=3_600, allow_inf_nan=False,
        description=(
            "longest pause between two tries of a message that waits for the model; a message the "
            "process died under also waits this long (at most 5 s) after a restart before it runs again"
        ),
    )
    keep_days: int = setting(
        30, ge=1, le=3_650,
        description=(
            "days the gateway keeps answered messages and sent replies in its inbox and outbox "
            "(to know a platform's redelivery, to answer a resent request again) before deleting them; "
            "conversations themselves are never deleted by it"
        ),
    )
    lease_seconds: float = setting(
        30.0, ge=1, le=600, allow_inf_nan=False,
        description=(
            "with several gateways on one PostgreSQL store: how long a dead worker's conversations, "
            "heartbeats and polling adapters stay its own before the others take them over"
        ),
    )
