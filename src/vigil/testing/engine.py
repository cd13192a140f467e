"""The fake model's decisions, free of I/O: authenticate, pick the scripted reply, account
the prefix cache, record the call and build the bytes to send.

The ASGI layer (``app``) only moves those bytes; everything a test can observe is decided
here, under one lock, so the order of records matches the order replies were consumed.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from vigil.testing import anthropic_wire, openai_wire
from vigil.testing.prefix_cache import PrefixCache, PromptShape
from vigil.testing.records import RecordedRequest, Recorder
from vigil.testing.scripting import Reply, Script
from vigil.testing.wire import Dialect, new_id, output_tokens
from vigil.usage import Usage

DIALECTS: dict[str, Dialect] = {"openai": openai_wire, "anthropic": anthropic_wire}  # type: ignore[dict-item]

_SECRET_HEADERS = frozenset({"authorization", "x-api-key"})

_AUTH_MESSAGES = {
    "openai": "Incorrect API key provided. You can find your API key in the fake model's settings.",
    "anthropic": "invalid x-api-key",
}

_DEFAULT_ERROR_MESSAGES = {
    401: "Invalid API key (scripted)",
    429: "Rate limit exceeded (scripted)",
    500: "Internal server error (scripted)",
    503: "Service unavailable (scripted)",
    529: "Overloaded (scripted)",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What to send for one model call."""

    status: int
    content_type: str
    chunks: list[bytes]
    """The body, in the pieces to send (SSE frames, or one JSON document)."""
    headers: list[tuple[str, str]] = field(default_factory=list)
    delay: float = 0.0
    chunk_delay: float = 0.0
    drop: bool = False
    """Drop the connection after ``chunks`` (and ``hang`` seconds) instead of finishing."""
    hang: float = 0.0
    gate: threading.Event | None = None
    """Send nothing until it is set (``Reply.gate``)."""


def _json_outcome(
    status: int, body: Mapping[str, Any], headers: list[tuple[str, str]], delay: float = 0.0
) -> Outcome:
    return Outcome(status, "application/json", [_dump(body)], headers, delay=delay)


def _dump(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


class FakeModelEngine:
    """Scripting, cache, records and configuration of one fake model server."""

    def __init__(
        self,
        *,
        api_key: str,
        models: Sequence[str],
        default_reply: Reply | str,
        cache_ttl: float,
        clock: Callable[[], float],
        strict_models: bool,
    ) -> None:
        self.api_key = api_key
        self.models = list(models)
        self.strict_models = strict_models
        self._base_clock = clock
        self._offset = 0.0
        # Re-entrant: a call refused while being served records under the lock it holds.
        self._lock = threading.RLock()
        self.script = Script(default_reply)
        self.cache = PrefixCache(cache_ttl, self.now)
        self.recorder = Recorder()

    def now(self) -> float:
        """The cache clock: the injected clock plus whatever ``advance_clock`` added."""
        return self._base_clock() + self._offset

    def advance_clock(self, seconds: float) -> None:
        self._offset += seconds

    def reset(self) -> None:
        with self._lock:
            self.script.reset()
            self.cache.clear()
            self.recorder.clear()

    def authorized(self, headers: Mapping[str, str]) -> bool:
        bearer = headers.get("authorization", "")
        offered = [headers.get("x-api-key"), bearer[7:] if bearer[:7].lower() == "bearer " else None]
        return self.api_key in offered

    def list_models(self, api: str, headers: Mapping[str, str]) -> Outcome:
        dialect = DIALECTS[api]
        if not self.authorized(headers):
            return _json_outcome(401, dialect.error_body(401, _AUTH_MESSAGES[api]), self._id_header(dialect))
        return _json_outcome(200, dialect.models_body(self.models), self._id_header(dialect))

    def not_found(self, api: str, method: str, path: str) -> Outcome:
        dialect = DIALECTS[api]
        body = dialect.error_body(404, f"Invalid URL ({method} {path})")
        return _json_outcome(404, body, self._id_header(dialect))

    def model_call(
        self, api: str, path: str, raw_body: bytes, headers: Mapping[str, str], *, peer: str = ""
    ) -> Outcome:
        """Serve one ``POST`` to a model endpoint of dialect ``api`` (``peer``: the client's
        ``host:port``, one per connection)."""
        dialect = DIALECTS[api]
        body = _parse(raw_body)
        model = str(body.get("model", "")) if body is not None else ""
        seen = {
            "api": api,
            "path": path,
            "model": model,
            "stream": body is not None and dialect.is_stream(body),
            "body": body if body is not None else {},
            "headers": {k: v for k, v in headers.items() if k not in _SECRET_HEADERS},
            "peer": peer,
        }
        if not self.authorized(headers):
            return self._refuse(dialect, 401, _AUTH_MESSAGES[api], seen)
        if body is None:
            return self._refuse(dialect, 400, "The request body is not a JSON object.", seen)
        problem = dialect.validate(body)
        if problem is not None:
            return self._refuse(dialect, 400, problem, seen)
        if self.strict_models and model not in self.models:
            message = f"The model `{model}` does not exist or you do not have access to it."
            return self._refuse(dialect, 404, message, seen)
        shape = dialect.shape(body)
        user_text = dialect.last_user_text(body)
        with self._lock:
            reply, source = self.script.next_reply(user_text)
            seen.update(last_user_text=user_text, reply=reply, reply_source=source)
            if reply.is_error:
                return self._scripted_error(dialect, reply, shape, seen)
            if reply.is_raw:
                return self._raw(dialect, reply, shape, seen)
            return self._serve(dialect, reply, shape, seen)

    def _serve(self, dialect: Dialect, reply: Reply, shape: PromptShape, seen: dict[str, Any]) -> Outcome:
        key = (dialect.API, seen["model"])
        previous = self.recorder.previous_served(key)
        result = self.cache.account(key, shape)
        usage = reply.usage or Usage(
            result.input_tokens, result.read_tokens, result.write_tokens, output_tokens(reply)
        )
        full_hit = (
            previous is not None
            and result.read_segments >= len(previous.segments)
            and shape.segments[: len(previous.segments)] == previous.segments
        )
        try:
            if seen["stream"] and reply.garbage_frame is not None:
                # the frames sent before the drop point, then the garbage instead of the rest
                clean = replace(reply, garbage_frame=None)
                chunks = dialect.stream_frames(clean, model=seen["model"], usage=usage, body=seen["body"])
                chunks.append(reply.garbage_frame)
                content_type = "text/event-stream; charset=utf-8"
            elif seen["stream"]:
                chunks = dialect.stream_frames(reply, model=seen["model"], usage=usage, body=seen["body"])
                content_type = "text/event-stream; charset=utf-8"
            elif reply.garbage_frame is not None:
                chunks, content_type = [reply.garbage_frame], "application/json"
            else:
                document = _dump(dialect.response_body(reply, model=seen["model"], usage=usage))
                # A dropped non-streaming answer is a JSON document cut in half.
                chunks = [document[: len(document) // 2]] if reply.drops else [document]
                content_type = "application/json"
        except ValueError as exc:
            return self._refuse(dialect, 500, f"The fake model's script is unusable: {exc}", seen)
        record = RecordedRequest(
            index=self.recorder.next_index(),
            status=200,
            segments=shape.segments,
            segment_tokens=shape.segment_tokens,
            breakpoints=shape.breakpoints or (),
            prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            full_prefix_hit=full_hit,
            **seen,
        )
        self.recorder.add(record, key)
        headers = self._id_header(dialect)
        if seen["stream"]:
            headers.append(("cache-control", "no-cache"))
        return Outcome(
            200,
            content_type,
            chunks,
            headers,
            delay=reply.delay,
            chunk_delay=reply.chunk_delay,
            drop=reply.drops,
            hang=reply.hang,
            gate=reply.gate,
        )

    def _scripted_error(
        self, dialect: Dialect, reply: Reply, shape: PromptShape, seen: dict[str, Any]
    ) -> Outcome:
        status = reply.error_status or 500
        message = reply.error_message or _DEFAULT_ERROR_MESSAGES.get(status, f"Scripted error {status}")
        headers = self._id_header(dialect)
        if reply.retry_after is not None:
            headers.append(("retry-after", str(max(0, math.ceil(reply.retry_after)))))
            headers.append(("retry-after-ms", str(max(0, round(reply.retry_after * 1000)))))
        self.recorder.add(self._blank_record(status, seen, shape))
        return _json_outcome(status, dialect.error_body(status, message), headers, delay=reply.delay)

    def _raw(self, dialect: Dialect, reply: Reply, shape: PromptShape, seen: dict[str, Any]) -> Outcome:
        status = reply.raw_status or 200
        self.recorder.add(self._blank_record(status, seen, shape))
        body = reply.raw_body or b""
        return Outcome(status, reply.raw_content_type, [body], self._id_header(dialect), delay=reply.delay)

    def _refuse(self, dialect: Dialect, status: int, message: str, seen: dict[str, Any]) -> Outcome:
        with self._lock:
            self.recorder.add(self._blank_record(status, seen, None))
        return _json_outcome(status, dialect.error_body(status, message), self._id_header(dialect))

    def _blank_record(self, status: int, seen: dict[str, Any], shape: PromptShape | None) -> RecordedRequest:
        fields = {"last_user_text": "", "reply": None, "reply_source": "", **seen}
        return RecordedRequest(
            index=self.recorder.next_index(),
            status=status,
            segments=shape.segments if shape else (),
            segment_tokens=shape.segment_tokens if shape else (),
            breakpoints=(shape.breakpoints or ()) if shape else (),
            prompt_tokens=0,
            cached_tokens=0,
            cache_write_tokens=0,
            output_tokens=0,
            full_prefix_hit=False,
            **fields,
        )

    @staticmethod
    def _id_header(dialect: Dialect) -> list[tuple[str, str]]:
        return [(dialect.REQUEST_ID_HEADER, new_id("req_"))]


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

