"""``POST /v1/chat/completions``: a chat's new message to its vigil conversation, answered as
a ``chat.completion`` or streamed as ``chat.completion.chunk`` events ending in ``[DONE]``."""

from __future__ import annotations

import time
from typing import Any, AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from vigil.gateway.adapters.base import GatewayClosed
from vigil.gateway.adapters.openai_api.errors import UNAVAILABLE, ApiError
from vigil.gateway.adapters.openai_api.exchange import Answer, Exchange, new_id, rest_of, submit
from vigil.gateway.adapters.openai_api.parsing import (
    CONVERSATION_HEADER, ClientTurn, chat_completion_turn, header_key, read_json,
)
from vigil.gateway.adapters.openai_api.sse import DONE, KEEPALIVE, data_frame
from vigil.gateway.adapters.openai_api.state import ApiState

STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def usage_view(usage: dict[str, int]) -> dict[str, Any]:
    """The turn's token usage as chat completions report it (cached input included in the prompt)."""
    cached = usage.get("cache_read_tokens", 0)
    prompt = usage.get("input_tokens", 0) + cached + usage.get("cache_write_tokens", 0)
    completion = usage.get("output_tokens", 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def kept(exchange: Exchange, why: BaseException) -> ApiError:
    """The 503 of a request whose gateway stops before the answer: its message is stored, so
    sending it again would ask twice."""
    where = f" {exchange.session_id}" if exchange.session_id else ""
    return ApiError(503, f"{why}; the message is kept and is answered when the gateway is back: the answer will "
                    f"be in the conversation{where} (do not send it again)", type=UNAVAILABLE, code="gateway_stopping")


async def answer_of(exchange: Exchange) -> Answer:
    """Wait for the whole answer (the client does not stream)."""
    try:
        async for piece in exchange.pieces():
            if isinstance(piece, Answer):
                return piece
        raise GatewayClosed("the gateway is stopping")
    except GatewayClosed as exc:
        raise kept(exchange, exc) from None
    finally:
        exchange.close()


def conversation_headers(exchange: Exchange) -> dict[str, str]:
    return {"X-Vigil-Conversation": exchange.session_id or ""}


async def chat_completions(state: ApiState, request: Request) -> Response:
    body = await read_json(request.stream())
    turn = chat_completion_turn(body, header_key(request.headers.get(CONVERSATION_HEADER)))
    exchange = await submit(state.gateway, state.exchanges, turn,
                            idempotency_key=request.headers.get("idempotency-key"))
    completion_id, created = new_id("chatcmpl-"), int(time.time())
    headers = conversation_headers(exchange)
    if turn.stream:
        return StreamingResponse(_stream(exchange, turn, completion_id, created), media_type="text/event-stream",
                                 headers={**STREAM_HEADERS, **headers})
    answer = await answer_of(exchange)
    return JSONResponse({
        "id": completion_id, "object": "chat.completion", "created": created, "model": turn.model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text, "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": usage_view(answer.usage),
    }, headers={"Cache-Control": "no-store", **headers})


async def _stream(exchange: Exchange, turn: ClientTurn, completion_id: str, created: int) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return data_frame({
            "id": completion_id, "object": "chat.completion.chunk", "created": created, "model": turn.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        })

    streamed = ""
    try:
        yield chunk({"role": "assistant", "content": ""})
        async for piece in exchange.pieces():
            if piece is None:
                yield KEEPALIVE
            elif isinstance(piece, str):
                streamed += piece
                yield chunk({"content": piece})
            else:
                rest = rest_of(streamed, piece.text)
                if rest:
                    streamed += rest
                    yield chunk({"content": rest})
                if streamed != piece.text:
                    exchange.remember([streamed], piece.session_id)
                yield chunk({}, "stop")
                if turn.include_usage:
                    yield data_frame({"id": completion_id, "object": "chat.completion.chunk", "created": created,
                                      "model": turn.model, "system_fingerprint": None, "choices": [],
                                      "usage": usage_view(piece.usage)})
                yield DONE
                return
    except GatewayClosed as exc:  # the message stays stored: answered after the restart
        yield data_frame(kept(exchange, exc).body())
    finally:
        exchange.close()
