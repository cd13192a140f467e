"""``ModelClient`` for OpenAI-compatible chat completions (OpenAI, OpenRouter, vLLM, llama.cpp, Ollama)."""

from __future__ import annotations

import contextlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

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
from vigil.models.openai_wire import (
    ChatWire,
    TransportError,
    WireConnectionError,
    WireError,
    WireStatusError,
    WireStreamError,
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

DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_NAME = "OpenAI-compatible"

# What parsing an answer of the wrong shape raises (answers are read as plain JSON data).
_SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError, ValueError)


def build_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The ``messages`` array for ``request``; keys are always in the same order."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        messages.append(_message(message))
    return messages


def _message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "user":
        return {"role": "user", "content": message.content or ""}
    if message.role == "assistant":
        content = message.content or (None if message.tool_calls else "")
        entry: dict[str, Any] = {"role": "assistant", "content": content}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ]
        return entry
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content or ""}
    raise ValueError(f"cannot send a message with role {message.role!r} to a chat model")


def build_body(
    request: ModelRequest, *, model: str, settings: ModelSettings, token_limit_field: str, stream: bool
) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create``: a pure function of its inputs."""
    body: dict[str, Any] = {"model": model, "messages": build_messages(request)}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in request.tools
        ]
    body[token_limit_field] = request.max_tokens or settings.max_output_tokens
    temperature = request.temperature if request.temperature is not None else settings.temperature
    if temperature is not None:
        body["temperature"] = temperature
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def usage_from(raw: Any) -> Usage:
    """``Usage`` from an OpenAI ``usage`` object; cached prompt tokens are split out of the input."""
    if raw is None:
        return Usage()
    prompt = _count(raw.get("prompt_tokens"))
    details = raw.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if details else 0
    # OpenRouter reports cache writes here too; they are part of prompt_tokens like cache reads.
    written = _count(details.get("cache_write_tokens")) if details else 0
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=_count(raw.get("completion_tokens")),
    )


def _count(value: Any) -> int:
    """A token count from an answer: a whole number, or 0 when absent."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a token count of type {type(value).__name__}")
    return int(value)


def stop_reason(finish_reason: str | None, has_tool_calls: bool) -> str:
    """Map ``finish_reason`` to ``ModelResponse.stop_reason``."""
    if finish_reason == "length":
        return "max_tokens"
    # Ollama and llama.cpp report "stop" even when the answer is tool calls.
    if finish_reason == "tool_calls" or has_tool_calls:
        return "tool_calls"
    return "end"


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """What has arrived so far on one streamed answer."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    model: str = ""
    delivered: bool = False
    chunks: int = 0

    def add_call_delta(self, delta: Any, position: int) -> None:
        index = delta.get("index")
        index = position if index is None else index
        call = self.calls.setdefault(index, _PartialCall())
        if delta.get("id"):
            call.id = _text(delta["id"])
        function = delta.get("function")
        if function is not None:
            if function.get("name"):
                call.name += _text(function["name"])
            if function.get("arguments"):
                call.arguments.append(_text(function["arguments"]))

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=c.id or f"call_{i}", name=c.name, arguments="".join(c.arguments))
            for i, c in sorted(self.calls.items())
        )


class OpenAIClient:
    """An OpenAI-compatible chat completions endpoint."""

    provider = "openai"

    def __init__(
        self,
        settings: ModelSettings,
        *,
        model: str,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        key_source: str = "the environment variable OPENAI_API_KEY",
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.settings = settings
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy(max_retries=settings.max_retries)
        # Error messages name the endpoint without the credentials a URL may carry.
        self.shown_url = mask_secrets(self.base_url)
        self._endpoint = Endpoint(url=self.shown_url, key_source=key_source)
        # OpenAI's own models reject max_tokens; most compatible servers only know max_tokens.
        host = urlsplit(self.base_url).hostname or ""
        self._token_limit_field = "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        self._wire = ChatWire(base_url=self.base_url, api_key=api_key, timeout=settings.timeout)

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The exact arguments ``complete`` sends for ``request``."""
        return build_body(
            request,
            model=self.model,
            settings=self.settings,
            token_limit_field=self._token_limit_field,
            stream=stream,
        )

    async def complete(self, request: ModelRequest, *, on_text: TextCallback | None = None) -> ModelResponse:
        """Send ``request``; stream text deltas to ``on_text`` when given (see ``ModelClient``)."""
        body = self.request_body(request, stream=on_text is not None)
        if on_text is None:
            return await call_with_retries(lambda: self._complete_once(body), self.retry)
        return await call_with_retries(lambda: self._stream_once(body, on_text), self.retry)

    async def list_models(self) -> list[str]:
        """Model ids from ``GET /models``, in the endpoint's order."""

        async def attempt() -> list[str]:
            try:
                page = await self._wire.get_json("models")
            except WireError as exc:
                raise self._translate(exc) from exc
            try:
                return [_text(m["id"]) for m in page["data"]]  # type: ignore[index]
            except _SHAPE_ERRORS as exc:
                raise self._malformed(f"{describe_cause(exc)} in a model list {dumped(page)}") from exc

        return await call_with_retries(attempt, self.retry)

    async def aclose(self) -> None:
        await self._wire.aclose()

    async def _complete_once(self, body: dict[str, Any]) -> ModelResponse:
        try:
            completion = await self._wire.post_json("chat/completions", body)
        except WireError as exc:
            raise self._translate(exc) from exc
        except json.JSONDecodeError as exc:
            raise self._malformed(f"the body is not JSON: {snippet(exc.doc)}") from exc
        if isinstance(completion, str):
            # The text of a body that was not JSON (an HTML page, say).
            raise self._malformed(f"HTTP 200 with {snippet(completion)}")
        try:
            return self._response_from(completion)
        except _SHAPE_ERRORS as exc:
            raise self._malformed(f"{describe_cause(exc)} in {dumped(completion)}") from exc

    def _response_from(self, completion: Any) -> ModelResponse:
        if not completion.get("choices"):
            raise self._malformed(f"an answer without choices: {dumped(completion)}")
        choice = completion["choices"][0]
        message = choice["message"]
        calls = tuple(
            ToolCall(
                id=_text(c.get("id")) or f"call_{i}",
                name=_text(c["function"]["name"]),
                arguments=_text(c["function"].get("arguments")),
            )
            for i, c in enumerate(message.get("tool_calls") or ())
            if c.get("function") is not None
        )
        return ModelResponse(
            content=_text(message.get("content")) or None,
            tool_calls=calls,
            usage=usage_from(completion.get("usage")),
            stop_reason=stop_reason(choice.get("finish_reason"), bool(calls)),
            model=_text(completion.get("model")) or self.model,
        )

    async def _stream_once(self, body: dict[str, Any], on_text: TextCallback) -> ModelResponse:
        state = _StreamState()
        try:
            stream = await self._wire.post_stream("chat/completions", body)
        except WireError as exc:
            raise self._translate(exc) from exc
        try:
            content_type = stream.headers.get("content-type", "")
            if content_type.startswith("text/html"):
                page = await stream.read_text()
                raise self._malformed(f"HTTP 200 with a web page instead of a stream: {snippet(page)}")
            iterator = stream.events().__aiter__()
            while True:
                try:
                    chunk = await iterator.__anext__()
                    texts = self._absorb(chunk, state)
                except StopAsyncIteration:
                    break
                except (WireError, TransportError) as exc:
                    raise self._stream_failure(exc, state) from exc
                except json.JSONDecodeError as exc:
                    raise self._stream_failure(exc, state, f"a stream line is not JSON: {snippet(exc.doc)}") from exc
                except _SHAPE_ERRORS as exc:
                    detail = f"{describe_cause(exc)} in a stream chunk {dumped(chunk)}"
                    raise self._stream_failure(exc, state, detail) from exc
                for text in texts:
                    result = on_text(text)
                    if inspect.isawaitable(result):
                        await result
        finally:
            with contextlib.suppress(TransportError):
                await stream.aclose()
        if state.finish_reason is None:
            if not state.chunks:
                detail = f"HTTP 200 without a single stream event (content-type {content_type or 'none'!r})"
                raise self._malformed(detail)
            # The server closed the stream cleanly but before the answer was finished.
            raise self._stream_failure(None, state)
        calls = state.tool_calls()
        text = "".join(state.text)
        return ModelResponse(
            content=text or None,
            tool_calls=calls,
            usage=usage_from(state.usage),
            stop_reason=stop_reason(state.finish_reason, bool(calls)),
            model=state.model or self.model,
        )

    @staticmethod
    def _absorb(chunk: Any, state: _StreamState) -> list[str]:
        """Take one chunk into ``state``; returns the text deltas to pass on."""
        state.chunks += 1
        texts: list[str] = []
        if chunk.get("model"):
            state.model = _text(chunk["model"])
        if chunk.get("usage") is not None:
            state.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index") not in (0, None):
                continue
            delta = choice.get("delta")
            if delta is not None:
                for position, call_delta in enumerate(delta.get("tool_calls") or ()):
                    state.add_call_delta(call_delta, position)
                content = delta.get("content")
                if content:
                    if not isinstance(content, str):
                        raise TypeError(f"text delta of type {type(content).__name__}")
                    state.text.append(content)
                    state.delivered = True
                    texts.append(content)
            if choice.get("finish_reason"):
                state.finish_reason = _text(choice["finish_reason"])
        return texts

    def _malformed(self, detail: str) -> Exception:
        return malformed_response(self._endpoint, API_NAME, detail)

    def _stream_failure(
        self, exc: BaseException | None, state: _StreamState, malformed: str | None = None
    ) -> Exception:
        """What to raise when a stream fails; ``malformed`` describes an answer that did not
        parse (retried only while no text was passed on)."""
        reason = mask_secrets(describe_cause(exc)) if exc is not None else "the stream ended early"
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
        if isinstance(exc, WireStatusError):
            return self._translate(exc)
        if isinstance(exc, WireStreamError):
            # An error event before any text: the provider failed this answer; asking again may work.
            return Retryable(ModelError(f"the model endpoint {self.shown_url} failed: {reason}"))
        return Retryable(interrupted)

    def _translate(self, exc: WireError) -> Exception:
        if isinstance(exc, WireConnectionError):
            return connection_failure(exc, self._endpoint, timed_out=exc.timed_out, timeout=self.settings.timeout)
        if isinstance(exc, WireStatusError):
            message = provider_message(exc.body, exc.message)
            return status_failure(exc.status_code, message, exc.headers, self._endpoint)
        # An error event inside a stream, or a response that did not parse.
        message = mask_secrets(provider_message(exc.body, exc.message))
        return ModelError(f"the model endpoint {self.shown_url} failed: {message}")


def _text(value: Any) -> str:
    """A string field of an answer: the string, or "" when absent."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"a text field of type {type(value).__name__}")
    return value
