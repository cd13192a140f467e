"""``ModelClient`` for the Anthropic Messages API, with explicit prompt-cache breakpoints."""

from __future__ import annotations

import contextlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

from vigil.config.settings import ModelSettings
from vigil.masking import mask_secrets
from vigil.models.base import (
    ChatMessage,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelStreamInterrupted,
    TextCallback,
)
from vigil.models.retry import (
    Endpoint,
    Retryable,
    RetryPolicy,
    call_with_retries,
    connection_failure,
    describe_cause,
    malformed_response,
    provider_message,
    dumped,
    snippet,
    status_failure,
)
from vigil.store.records import ToolCall
from vigil.usage import Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_NAME = "Anthropic Messages API"

# What parsing an answer of the wrong shape raises (the SDK builds its models unvalidated).
_SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError, ValueError)
DEFAULT_MAX_TOKENS = 4096
MAX_BREAKPOINTS = 4
TAIL_BREAKPOINTS = 2
"""Breakpoints on the newest user messages. The last one caches this request's prefix; the one
before it sits exactly where the previous request wrote its cache, so that entry is read even
when a tool loop has added more blocks than the provider looks back over."""

# Anthropic's names for the four ``Usage`` fields, in ``Usage``'s order.
_USAGE_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")

# Stream events whose error type says "try again": the provider, not the request, failed.
_RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


def cache_control(ttl: str) -> dict[str, str]:
    """The ``cache_control`` marker; 5 minutes is the provider's default, so it is left implicit."""
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as the object Anthropic wants in a ``tool_use`` block."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        # Keep what the model wrote so it can see its own mistake in the history.
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def _blocks(message: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
    """The Anthropic role and content blocks of one history entry."""
    if message.role == "user":
        return "user", [{"type": "text", "text": message.content or ""}]
    if message.role == "assistant":
        blocks: list[dict[str, Any]] = []
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call.arguments)}
            )
        return "assistant", blocks
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        if message.content:
            # An empty result is sent without content; the API rejects empty text.
            result["content"] = message.content
        return "user", [result]
    raise ValueError(f"cannot send a message with role {message.role!r} to a chat model")


def build_messages(request: ModelRequest, ttl: str) -> list[dict[str, Any]]:
    """Alternating user/assistant messages with cache breakpoints on the newest user turns."""
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            # The API requires alternation; e.g. all results of one tool round form one user turn.
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    budget = min(TAIL_BREAKPOINTS, MAX_BREAKPOINTS - (1 if request.system else 0))
    for message in reversed(messages):
        if budget <= 0:
            break
        if message["role"] == "user":
            message["content"][-1]["cache_control"] = cache_control(ttl)
            budget -= 1
    return messages


def build_body(request: ModelRequest, *, model: str, settings: ModelSettings, stream: bool) -> dict[str, Any]:
    """Keyword arguments for ``messages.create``: a pure function of its inputs."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens or settings.max_output_tokens or DEFAULT_MAX_TOKENS,
    }
    if request.system:
        marker = cache_control(settings.cache_ttl)
        body["system"] = [{"type": "text", "text": request.system, "cache_control": marker}]
    body["messages"] = build_messages(request, settings.cache_ttl)
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    temperature = request.temperature if request.temperature is not None else settings.temperature
    if temperature is not None:
        # The SDK no longer has a keyword for it, but the API still takes it.
        body["extra_body"] = {"temperature": temperature}
    if stream:
        body["stream"] = True
    return body


def usage_from(raw: Any) -> Usage:
    """``Usage`` from an Anthropic usage object (``input_tokens`` is already the uncached part)."""
    if raw is None:
        return Usage()
    return Usage(*(getattr(raw, name, None) or 0 for name in _USAGE_FIELDS))


def stop_reason(reason: str | None) -> str:
    """Map Anthropic's ``stop_reason`` to ``ModelResponse.stop_reason``."""
    if reason == "tool_use":
        return "tool_calls"
    if reason == "max_tokens":
        return "max_tokens"
    return "end"


@dataclass
class _StreamState:
    """What has arrived so far on one streamed answer."""

    text: list[str] = field(default_factory=list)
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    """Anthropic's usage field names and their latest values."""
    stop_reason: str | None = None
    finished: bool = False
    model: str = ""
    delivered: bool = False
    events: int = 0

    def merge_usage(self, raw: Any) -> None:
        # message_delta counts are cumulative; a field it leaves out keeps its message_start value.
        for name in _USAGE_FIELDS:
            value = getattr(raw, name, None)
            if value is not None:
                self.usage[name] = value

    def tool_calls(self) -> tuple[ToolCall, ...]:
        calls = []
        for _, block in sorted(self.blocks.items()):
            if block["type"] == "tool_use":
                arguments = "".join(block["json"]) or "{}"
                calls.append(ToolCall(id=block["id"], name=block["name"], arguments=arguments))
        return tuple(calls)


class AnthropicClient:
    """The Anthropic Messages API (or a compatible endpoint)."""

    provider = "anthropic"

    def __init__(
        self,
        settings: ModelSettings,
        *,
        model: str,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        key_source: str = "the environment variable ANTHROPIC_API_KEY",
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.settings = settings
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy(max_retries=settings.max_retries)
        # Error messages name the endpoint without the credentials a URL may carry.
        self.shown_url = mask_secrets(self.base_url)
        self._endpoint = Endpoint(url=self.shown_url, key_source=key_source)
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=self.base_url,
            timeout=settings.timeout,
            max_retries=0,
        )

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The exact arguments ``complete`` sends for ``request``."""
        return build_body(request, model=self.model, settings=self.settings, stream=stream)

    async def complete(self, request: ModelRequest, *, on_text: TextCallback | None = None) -> ModelResponse:
        """Send ``request``; stream text deltas to ``on_text`` when given (see ``ModelClient``)."""
        body = self.request_body(request, stream=on_text is not None)
        if on_text is None:
            return await call_with_retries(lambda: self._complete_once(body), self.retry)
        return await call_with_retries(lambda: self._stream_once(body, on_text), self.retry)

    async def list_models(self) -> list[str]:
        """Model ids from ``GET /v1/models`` (newest first, as the API orders them)."""

        async def attempt() -> list[str]:
            try:
                page = await self._client.models.list()
                return [m.id for m in page.data]
            except anthropic.APIError as exc:
                raise self._translate(exc) from exc

        return await call_with_retries(attempt, self.retry)

    async def aclose(self) -> None:
        await self._client.close()

    async def _complete_once(self, body: dict[str, Any]) -> ModelResponse:
        try:
            message = await self._client.messages.create(**body)
        except anthropic.APIError as exc:
            raise self._translate(exc) from exc
        except json.JSONDecodeError as exc:
            raise self._malformed(f"the body is not JSON: {snippet(exc.doc)}") from exc
        if isinstance(message, str):
            # The SDK hands back the text of a body that was not JSON (an HTML page, say).
            raise self._malformed(f"HTTP 200 with {snippet(message)}")
        try:
            return self._response_from(message)
        except _SHAPE_ERRORS as exc:
            raise self._malformed(f"{describe_cause(exc)} in {dumped(message)}") from exc

    def _response_from(self, message: Any) -> ModelResponse:
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "tool_use":
                arguments = json.dumps(block.input, ensure_ascii=False)
                calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
        return ModelResponse(
            content="".join(text) or None,
            tool_calls=tuple(calls),
            usage=usage_from(message.usage),
            stop_reason=stop_reason(message.stop_reason),
            model=message.model or self.model,
        )

    async def _stream_once(self, body: dict[str, Any], on_text: TextCallback) -> ModelResponse:
        state = _StreamState()
        try:
            stream = await self._client.messages.create(**body)
        except anthropic.APIError as exc:
            raise self._translate(exc) from exc
        try:
            content_type = stream.response.headers.get("content-type", "")
            if content_type.startswith("text/html"):
                page = await stream.response.aread()
                raise self._malformed(f"HTTP 200 with a web page instead of a stream: {snippet(page)}")
            iterator = stream.__aiter__()
            while True:
                try:
                    event = await iterator.__anext__()
                    texts = self._absorb(event, state)
                except StopAsyncIteration:
                    break
                except (anthropic.APIError, httpx2.HTTPError) as exc:
                    raise self._stream_failure(exc, state) from exc
                except json.JSONDecodeError as exc:
                    raise self._stream_failure(exc, state, f"a stream line is not JSON: {snippet(exc.doc)}") from exc
                except _SHAPE_ERRORS as exc:
                    detail = f"{describe_cause(exc)} in a stream event {dumped(event)}"
                    raise self._stream_failure(exc, state, detail) from exc
                for text in texts:
                    result = on_text(text)
                    if inspect.isawaitable(result):
                        await result
        finally:
            with contextlib.suppress(anthropic.APIError, httpx2.HTTPError):
                await stream.close()
        if not state.finished:
            if not state.events:
                detail = f"HTTP 200 without a single stream event (content-type {content_type or 'none'!r})"
                raise self._malformed(detail)
            raise self._stream_failure(None, state)
        return ModelResponse(
            content="".join(state.text) or None,
            tool_calls=state.tool_calls(),
            usage=Usage(*(state.usage.get(name, 0) for name in _USAGE_FIELDS)),
            stop_reason=stop_reason(state.stop_reason),
            model=state.model or self.model,
        )

    @staticmethod
    def _absorb(event: Any, state: _StreamState) -> list[str]:
        """Take one stream event into ``state``; returns the text deltas to pass on."""
        state.events += 1
        texts: list[str] = []
        kind = event.type
        if kind == "message_start":
            state.model = event.message.model or ""
            state.merge_usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                opened = {"type": "tool_use", "id": block.id, "name": block.name, "json": []}
                state.blocks[event.index] = opened
            else:
                state.blocks[event.index] = {"type": block.type}
                if block.type == "text" and block.text:
                    texts.append(block.text)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                texts.append(delta.text)
            elif delta.type == "input_json_delta":
                block = state.blocks.get(event.index)
                if block is not None and block["type"] == "tool_use":
                    block["json"].append(delta.partial_json)
        elif kind == "message_delta":
            if event.delta.stop_reason:
                state.stop_reason = event.delta.stop_reason
            if event.usage is not None:
                state.merge_usage(event.usage)
        elif kind == "message_stop":
            state.finished = True
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"text delta of type {type(text).__name__}")
            state.text.append(text)
            state.delivered = True
        return texts

    def _malformed(self, detail: str) -> Exception:
        return malformed_response(self._endpoint, API_NAME, detail)

    def _stream_failure(
        self, exc: BaseException | None, state: _StreamState, malformed: str | None = None
    ) -> Exception:
        """What to raise when a stream fails; ``malformed`` describes an answer that did not
        parse (retried only while no text was passed on)."""
        reason = mask_secrets(describe_cause(exc)) if exc is not None else "the stream ended early"
        if isinstance(exc, anthropic.APIStatusError):
            reason = provider_message(exc.body, exc.message)
        if malformed is not None:
            reason = f"the endpoint sent something that is not an {API_NAME} response: {malformed}"
        interrupted = ModelStreamInterrupted(
            f"the answer from {self.shown_url} broke off while streaming: {reason}",
            partial_text="".join(state.text),
        )
        if state.delivered:
            # The user already saw this text; a retry would show a different answer after it.
            return interrupted
        if malformed is not None:
            return self._malformed(malformed)
        if isinstance(exc, anthropic.APIStatusError) and exc.status_code == 200:
            # An error event inside the stream (e.g. overloaded_error) before any text was shown.
            if exc.type in _RETRYABLE_ERROR_TYPES:
                return Retryable(ModelError(f"the model endpoint {self.shown_url} failed: {reason}"))
            return ModelError(f"the model endpoint {self.shown_url} failed: {reason}")
        if isinstance(exc, anthropic.APIStatusError):
            return self._translate(exc)
        return Retryable(interrupted)

    def _translate(self, exc: anthropic.APIError) -> Exception:
        if isinstance(exc, anthropic.APIConnectionError):
            return connection_failure(
                exc,
                self._endpoint,
                timed_out=isinstance(exc, anthropic.APITimeoutError),
                timeout=self.settings.timeout,
            )
        if isinstance(exc, anthropic.APIStatusError):
            message = provider_message(exc.body, exc.message)
            return status_failure(exc.status_code, message, exc.response.headers, self._endpoint)
        message = mask_secrets(provider_message(exc.body, exc.message))
        return ModelError(f"the model endpoint {self.shown_url} failed: {message}")
