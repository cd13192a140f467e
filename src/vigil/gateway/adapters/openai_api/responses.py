"""``POST /v1/responses``: the Responses API. ``previous_response_id`` continues the
conversation that response was in; a stream is the API's typed events (``response.created``
… ``response.output_text.delta`` … ``response.completed``)."""

from __future__ import annotations

import time
from typing import Any, AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from vigil.gateway.adapters.base import GatewayClosed
from vigil.gateway.adapters.openai_api.completions import STREAM_HEADERS, answer_of, conversation_headers, kept
from vigil.gateway.adapters.openai_api.exchange import Answer, Exchange, new_id, rest_of, submit
from vigil.gateway.adapters.openai_api.parsing import (
    CONVERSATION_HEADER, ClientTurn, header_key, read_json, responses_turn,
)
from vigil.gateway.adapters.openai_api.sse import KEEPALIVE, event_frame
from vigil.gateway.adapters.openai_api.state import ApiState


def usage_view(usage: dict[str, int]) -> dict[str, Any]:
    cached = usage.get("cache_read_tokens", 0)
    prompt = usage.get("input_tokens", 0) + cached + usage.get("cache_write_tokens", 0)
    output = usage.get("output_tokens", 0)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + output}


class ResponseShape:
    """The ``response`` object of one request, in its stages."""

    def __init__(self, turn: ClientTurn, response_id: str) -> None:
        self.turn = turn
        self.id = response_id
        self.message_id = new_id("msg_")
        self.created = int(time.time())

    def message(self, text: str, status: str = "completed") -> dict[str, Any]:
        content = [self.part(text)] if status == "completed" else []
        return {"type": "message", "id": self.message_id, "status": status, "role": "assistant", "content": content}

    @staticmethod
    def part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": []}

    def view(self, status: str, answer: Answer | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "model": self.turn.model, "output": [self.message(answer.text)] if answer is not None else [],
            "usage": usage_view(answer.usage) if answer is not None else None,
            "previous_response_id": self.turn.previous_response_id, "metadata": self.turn.metadata,
            "error": error, "incomplete_details": None, "instructions": None, "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [], "temperature": None, "top_p": None,
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": True,
        }


async def responses(state: ApiState, request: Request) -> Response:
    body = await read_json(request.stream())
    turn = responses_turn(body, header_key(request.headers.get(CONVERSATION_HEADER)))
    shape = ResponseShape(turn, new_id("resp_"))
    exchange = await submit(state.gateway, state.exchanges, turn,
                            idempotency_key=request.headers.get("idempotency-key"), response_id=shape.id)
    headers = conversation_headers(exchange)
    if turn.stream:
        return StreamingResponse(_stream(exchange, shape), media_type="text/event-stream",
                                 headers={**STREAM_HEADERS, **headers})
    answer = await answer_of(exchange)
    return JSONResponse(shape.view("completed", answer), headers={"Cache-Control": "no-store", **headers})


async def _stream(exchange: Exchange, shape: ResponseShape) -> AsyncIterator[str]:
    sequence = 0

    def frame(kind: str, **fields: Any) -> str:
        nonlocal sequence
        sequence += 1
        return event_frame({"type": kind, "sequence_number": sequence - 1, **fields})

    where = {"item_id": shape.message_id, "output_index": 0, "content_index": 0}
    streamed = ""
    try:
        yield frame("response.created", response=shape.view("in_progress"))
        yield frame("response.in_progress", response=shape.view("in_progress"))
        yield frame("response.output_item.added", output_index=0, item=shape.message("", "in_progress"))
        yield frame("response.content_part.added", **where, part=shape.part(""))
        async for piece in exchange.pieces():
            if piece is None:
                yield KEEPALIVE
            elif isinstance(piece, str):
                streamed += piece
                yield frame("response.output_text.delta", **where, delta=piece, logprobs=[])
            else:
                rest = rest_of(streamed, piece.text)
                if rest:
                    streamed += rest
                    yield frame("response.output_text.delta", **where, delta=rest, logprobs=[])
                if streamed != piece.text:
                    exchange.remember([streamed], piece.session_id)
                answer = Answer(streamed, piece.session_id, piece.usage, piece.kind)
                yield frame("response.output_text.done", **where, text=streamed, logprobs=[])
                yield frame("response.content_part.done", **where, part=shape.part(streamed))
                yield frame("response.output_item.done", output_index=0, item=shape.message(streamed))
                yield frame("response.completed", response=shape.view("completed", answer))
                return
    except GatewayClosed as exc:  # the message stays stored: answered after the restart
        error = kept(exchange, exc)
        yield frame("response.failed", response=shape.view("failed", error={"code": error.code, "message": str(error)}))
    finally:
        exchange.close()
