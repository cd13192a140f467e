"""``ModelClient`` for OpenAI-compatible chat completions (OpenAI, OpenRouter, vLLM, llama.cpp, Ollama)."""

from __future__ import annotations

import contextlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from vigil.config import ModelSettings
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

DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_NAME = "OpenAI-compatible"

# What parsing an answer of the wrong shape raises (the SDK builds its models unvalidated).
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
    prompt = raw.prompt_tokens or 0
    details = getattr(raw, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
    # OpenRouter reports cache writes here too; they are part of prompt_tokens like cache reads.
    written = (getattr(details, "cache_write_tokens", None) or 0) if details else 0
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=raw.completion_tokens or 0,
    )


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
        index = delta.index if getattr(delta, "index", None) is not None else position
        call = self.calls.setdefault(index, _PartialCall())
        if delta.id:
            call.id = delta.id
        function = delta.function
        if function is not None:
            if function.name:
                call.name += function.name
            if function.arguments:
                call.arguments.append(function.arguments)

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
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            timeout=settings.timeout,
            max_retries=0,
        )

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
                page = await self._client.models.list()
                return [m.id for m in page.data]
            except openai.APIError as exc:
                raise self._translate(exc) from exc

        return await call_with_retries(attempt, self.retry)

    async def aclose(self) -> None:
        await self._client.close()

    async def _post(self, body: dict[str, Any]) -> Any:
        """``POST /chat/completions`` through the SDK (its auth, retries of the connection,
        response and stream parsing), without ``chat.completions.create``'s request
        transformation: the body is plain JSON already, and walking a long history through
        the SDK's typed-dict transform cost more CPU than the rest of a gateway turn."""
        if body.get("stream"):
            return await self._client.post(
                "/chat/completions", body=body, cast_to=ChatCompletion, stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
        return await self._client.post("/chat/completions", body=body, cast_to=ChatCompletion)

    async def _complete_once(self, body: dict[str, Any]) -> ModelResponse:
        try:
            completion = await self._post(body)
        except openai.APIError as exc:
            raise self._translate(exc) from exc
        except json.JSONDecodeError as exc:
            raise self._malformed(f"the body is not JSON: {snippet(exc.doc)}") from exc
        if isinstance(completion, str):
            # The SDK hands back the text of a body that was not JSON (an HTML page, say).
            raise self._malformed(f"HTTP 200 with {snippet(completion)}")
        try:
            return self._response_from(completion)
        except _SHAPE_ERRORS as exc:
            raise self._malformed(f"{describe_cause(exc)} in {dumped(completion)}") from exc

    def _response_from(self, completion: Any) -> ModelResponse:
        if not completion.choices:
            raise self._malformed(f"an answer without choices: {dumped(completion)}")
        choice = completion.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall(id=c.id or f"call_{i}", name=c.function.name, arguments=c.function.arguments or "")
            for i, c in enumerate(message.tool_calls or ())
            if getattr(c, "function", None) is not None
        )
        return ModelResponse(
            content=message.content or None,
            tool_calls=calls,
            usage=usage_from(completion.usage),
            stop_reason=stop_reason(choice.finish_reason, bool(calls)),
            model=completion.model or self.model,
        )

    async def _stream_once(self, body: dict[str, Any], on_text: TextCallback) -> ModelResponse:
        state = _StreamState()
        try:
            stream = await self._post(body)
        except openai.APIError as exc:
            raise self._translate(exc) from exc
        try:
            content_type = stream.response.headers.get("content-type", "")
            if content_type.startswith("text/html"):
                page = await stream.response.aread()
                raise self._malformed(f"HTTP 200 with a web page instead of a stream: {snippet(page)}")
            iterator = stream.__aiter__()
            while True:
                try:
                    chunk = await iterator.__anext__()
                    texts = self._absorb(chunk, state)
                except StopAsyncIteration:
                    break
                except (openai.APIError, httpx2.HTTPError) as exc:
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
            with contextlib.suppress(openai.APIError, httpx2.HTTPError):
                await stream.close()
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
        if chunk.model:
            state.model = chunk.model
        if getattr(chunk, "usage", None) is not None:
            state.usage = chunk.usage
        for choice in chunk.choices or ():
            if choice.index not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                for position, call_delta in enumerate(delta.tool_calls or ()):
                    state.add_call_delta(call_delta, position)
                if delta.content:
                    if not isinstance(delta.content, str):
                        raise TypeError(f"text delta of type {type(delta.content).__name__}")
                    state.text.append(delta.content)
                    state.delivered = True
                    texts.append(delta.content)
            if choice.finish_reason:
                state.finish_reason = choice.finish_reason
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
        if isinstance(exc, openai.APIStatusError):
            return self._translate(exc)
        if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
            # An error event before any text: the provider failed this answer; asking again may work.
            return Retryable(ModelError(f"the model endpoint {self.shown_url} failed: {reason}"))
        return Retryable(interrupted)

    def _translate(self, exc: openai.APIError) -> Exception:
        if isinstance(exc, openai.APIConnectionError):
            return connection_failure(
                exc,
                self._endpoint,
                timed_out=isinstance(exc, openai.APITimeoutError),
                timeout=self.settings.timeout,
            )
        if isinstance(exc, openai.APIStatusError):
            message = provider_message(exc.body, exc.message)
            return status_failure(exc.status_code, message, exc.response.headers, self._endpoint)
        # An error event inside a stream, or a response that did not parse.
        message = mask_secrets(provider_message(exc.body, exc.message))
        return ModelError(f"the model endpoint {self.shown_url} failed: {message}")
