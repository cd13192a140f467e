"""The ``ModelClient`` protocol and the provider-neutral request/response records.

The agent speaks only these types; each client translates them to one provider's wire format.
Translation must be deterministic: the same request must serialise to the same bytes every
time, because the provider's prompt cache matches on byte-identical prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, Sequence, runtime_checkable

from vigil.store.records import ToolCall
from vigil.usage import Usage

TextCallback = Callable[[str], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One history entry: ``user``, ``assistant`` (text and/or tool calls) or ``tool`` (a result)."""

    role: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: a name, a description and a JSON schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs. ``system`` is replayed byte for byte across turns."""

    system: str
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()
    max_tokens: int | None = None
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A complete model answer.

    ``stop_reason`` is ``end`` (a final answer), ``tool_calls`` (the model wants tools run) or
    ``max_tokens`` (the answer was cut off).
    """

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "end"
    model: str = ""


class ModelError(Exception):
    """A model call failed; the message is meant for the user."""


class ModelAuthError(ModelError):
    """The provider rejected the credentials (HTTP 401/403)."""


class ModelUnreachable(ModelError):
    """The endpoint could not be reached or timed out after every retry."""


class ModelRateLimited(ModelError):
    """HTTP 429 persisted through every retry."""


class ModelStreamInterrupted(ModelError):
    """The connection broke while an answer was streaming; ``partial_text`` is what arrived."""

    def __init__(self, message: str, partial_text: str = "") -> None:
        super().__init__(message)
        self.partial_text = partial_text


class ModelMalformedResponse(ModelError):
    """The endpoint answered, but not in its API's format (an HTML page, a body or stream line
    that is not JSON, JSON of the wrong shape): a wrong ``base_url``, a proxy, a broken server."""


class ModelBadRequest(ModelError):
    """The provider refused the request itself (HTTP 400/404/422): model name, context size ..."""


@runtime_checkable
class ModelClient(Protocol):
    """A chat model behind some provider's API."""

    provider: str
    """``openai`` or ``anthropic``."""

    model: str
    """The model name sent with each request."""

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None
    ) -> ModelResponse:
        """Send one request and return the whole answer.

        With ``on_text`` the answer is streamed and each text delta is passed to it as it
        arrives. Retries 429/5xx and connection errors with back-off; raises a ``ModelError``
        subclass when it gives up.
        """
        ...

    async def list_models(self) -> list[str]:
        """Model names the endpoint offers."""
        ...

    async def aclose(self) -> None:
        """Close the underlying HTTP connections."""
        ...
