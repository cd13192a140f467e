"""A ``ModelClient`` wrapper that turns tool calls written as text into real tool calls.

With ``describe_tools`` (a chat template without native tool calls, which would drop the
``tools`` of a request silently) the tools are described at the end of the system message and
earlier calls and results are written back into the history as ``<tool_call>`` /
``<tool_response>`` text. Both renderings are pure functions of the request, so the prefix the
engine caches stays byte-identical from turn to turn.
"""

from __future__ import annotations

import inspect
import json
import uuid
from dataclasses import replace
from typing import Sequence

from vigil.models.base import ChatMessage, ModelClient, ModelRequest, ModelResponse, TextCallback, ToolSpec
from vigil.models.text_tools import CLOSE_TAG, OPEN_TAG, TextCallFilter, parse_text_tool_calls
from vigil.store.records import ToolCall

TOOLS_HEADER = """\


# Tools

You may call one or more functions to help with the user's request. Their signatures are
within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, answer with a JSON object with the function name and its arguments
within <tool_call></tool_call> XML tags, for example:
<tool_call>
{{"name": "function_name", "arguments": {{"argument": "value"}}}}
</tool_call>
The result comes back within <tool_response></tool_response> XML tags. Answer in plain text
when no function is needed."""


def describe_tools(tools: Sequence[ToolSpec]) -> str:
    """The tool block appended to the system message (deterministic bytes)."""
    lines = [
        json.dumps(
            {"name": t.name, "description": t.description, "parameters": t.parameters},
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
        )
        for t in tools
    ]
    return TOOLS_HEADER.format(tools="\n".join(lines))


def text_request(request: ModelRequest) -> ModelRequest:
    """``request`` for a model that knows tools only from its prompt."""
    messages: list[ChatMessage] = []
    for message in request.messages:
        if message.role == "assistant" and message.tool_calls:
            blocks = "".join(
                f"{OPEN_TAG}\n{json.dumps({'name': c.name, 'arguments': _arguments(c.arguments)}, ensure_ascii=False)}\n{CLOSE_TAG}"
                for c in message.tool_calls
            )
            text = f"{message.content}\n{blocks}" if message.content else blocks
            messages.append(ChatMessage(role="assistant", content=text))
        elif message.role == "tool":
            messages.append(
                ChatMessage(role="user", content=f"<tool_response>\n{message.content or ''}\n</tool_response>")
            )
        else:
            messages.append(message)
    system = request.system + describe_tools(request.tools) if request.tools else request.system
    return replace(request, system=system, messages=messages, tools=())


def _arguments(raw: str) -> object:
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw


class TextToolCallClient:
    """Wraps ``inner``; see the module docstring. ``describe_tools``: the endpoint ignores
    ``tools``, so they are written into the prompt instead."""

    def __init__(self, inner: ModelClient, *, describe_tools: bool) -> None:
        self.inner = inner
        self.describe_tools = describe_tools
        self.provider = inner.provider

    @property
    def model(self) -> str:
        return self.inner.model

    @model.setter
    def model(self, name: str) -> None:
        self.inner.model = name

    def __getattr__(self, name: str) -> object:
        # Anything else (the engine's context, request_body for tests) is the inner client's.
        return getattr(self.inner, name)

    async def complete(self, request: ModelRequest, *, on_text: TextCallback | None = None) -> ModelResponse:
        """Like ``ModelClient.complete``; text that is a tool call is returned as ``tool_calls``."""
        if not request.tools:
            return await self.inner.complete(request, on_text=on_text)
        names = [t.name for t in request.tools]
        sent = text_request(request) if self.describe_tools else request
        shown = TextCallFilter(names)

        async def show(text: str) -> None:
            if text and on_text is not None:
                result = on_text(text)
                if inspect.isawaitable(result):
                    await result

        async def feed(delta: str) -> None:
            await show(shown.feed(delta))

        response = await self.inner.complete(sent, on_text=feed if on_text is not None else None)
        if response.tool_calls:
            await show(shown.finish()[0])
            return response
        if on_text is not None:
            rest, parsed = shown.finish()
            await show(rest)
        else:
            parsed = parse_text_tool_calls(response.content or "", names)
        if parsed is None:
            return response
        calls = tuple(ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=c.name, arguments=c.arguments) for c in parsed.calls)
        return replace(response, content=parsed.content, tool_calls=calls, stop_reason="tool_calls")

    async def list_models(self) -> list[str]:
        return await self.inner.list_models()

    async def aclose(self) -> None:
        await self.inner.aclose()
