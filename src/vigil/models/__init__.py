"""Model clients: the ``ModelClient`` protocol, its OpenAI and Anthropic implementations, the factory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vigil.models.base import (
    ChatMessage,
    ModelAuthError,
    ModelBadRequest,
    ModelClient,
    ModelError,
    ModelRateLimited,
    ModelRequest,
    ModelResponse,
    ModelStreamInterrupted,
    ModelUnreachable,
    TextCallback,
    ToolSpec,
)
from vigil.models.factory import ModelNotConfigured, ResolvedModel, build_client, resolve_model_settings
from vigil.models.retry import RetryPolicy

if TYPE_CHECKING:
    from vigil.models.anthropic_client import AnthropicClient
    from vigil.models.openai_client import OpenAIClient

__all__ = [
    "AnthropicClient",
    "ChatMessage",
    "ModelAuthError",
    "ModelBadRequest",
    "ModelClient",
    "ModelError",
    "ModelNotConfigured",
    "ModelRateLimited",
    "ModelRequest",
    "ModelResponse",
    "ModelStreamInterrupted",
    "ModelUnreachable",
    "OpenAIClient",
    "ResolvedModel",
    "RetryPolicy",
    "TextCallback",
    "ToolSpec",
    "build_client",
    "resolve_model_settings",
]

_LAZY = {
    "OpenAIClient": "vigil.models.openai_client",
    "AnthropicClient": "vigil.models.anthropic_client",
}


def __getattr__(name: str) -> Any:
    # The client modules import their SDKs, which are slow to import; load them on first use.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
