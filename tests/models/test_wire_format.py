"""How provider-neutral requests become each provider's JSON (no network)."""

from __future__ import annotations

import json

import pytest

from vigil.config.settings import ModelSettings
from vigil.models import anthropic_client, openai_client
from vigil.models.base import ChatMessage, ModelRequest, ToolSpec
from vigil.store.records import ToolCall

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = (ToolSpec("read_file", "Read a file", SCHEMA),)
DEFAULTS = ModelSettings()
CALLS = (
    ToolCall("call_a", "read_file", '{"path": "a.txt"}'),
    ToolCall("call_b", "read_file", '{"path": "b.txt"}'),
)


def tool_round() -> ModelRequest:
    return ModelRequest(
        system="You are vigil.",
        messages=[
            ChatMessage("user", "read a and b"),
            ChatMessage("assistant", None, tool_calls=CALLS),
            ChatMessage("tool", "A!", tool_call_id="call_a", tool_name="read_file"),
            ChatMessage("tool", "B!", tool_call_id="call_b", tool_name="read_file"),
            ChatMessage("assistant", "Both read."),
            ChatMessage("user", "thanks"),
        ],
        tools=TOOLS,
    )


def test_openai_messages_and_tools() -> None:
    body = openai_client.build_body(
        tool_round(), model="m", settings=ModelSettings(), token_limit_field="max_tokens", stream=False
    )
    assert body["messages"] == [
        {"role": "system", "content": "You are vigil."},
        {"role": "user", "content": "read a and b"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "b.txt"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "A!"},
        {"role": "tool", "tool_call_id": "call_b", "content": "B!"},
        {"role": "assistant", "content": "Both read."},
        {"role": "user", "content": "thanks"},
    ]
    function = {"name": "read_file", "description": "Read a file", "parameters": SCHEMA}
    assert body["tools"] == [{"type": "function", "function": function}]
    assert body["max_tokens"] == 4096 and "stream" not in body and "temperature" not in body


async def test_openai_stream_flags_and_token_limit_field() -> None:
    request = ModelRequest(system="s", messages=[ChatMessage("user", "hi")], max_tokens=50, temperature=0.2)
    body = openai_client.build_body(
        request, model="m", settings=ModelSettings(), token_limit_field="max_completion_tokens", stream=True
    )
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 50 and body["temperature"] == 0.2
    client = openai_client.OpenAIClient(DEFAULTS, model="m", api_key="k")
    local = openai_client.OpenAIClient(DEFAULTS, model="m", api_key="k", base_url="http://127.0.0.1:1/v1")
    try:
        assert "max_completion_tokens" in client.request_body(request, stream=False)
        assert "max_tokens" in local.request_body(request, stream=False)
    finally:
        await client.aclose()
        await local.aclose()


def test_openai_rejects_unknown_roles() -> None:
    with pytest.raises(ValueError, match="summary"):
        openai_client.build_messages(ModelRequest(system="", messages=[ChatMessage("summary", "x")]))


def test_anthropic_groups_tool_results_and_parses_arguments() -> None:
    body = anthropic_client.build_body(tool_round(), model="m", settings=ModelSettings(), stream=False)
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "call_a", "name": "read_file", "input": {"path": "a.txt"}},
        {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "b.txt"}},
    ]
    results = messages[2]["content"]
    assert [(b["type"], b["tool_use_id"], b["content"]) for b in results] == [
        ("tool_result", "call_a", "A!"),
        ("tool_result", "call_b", "B!"),
    ]
    assert body["tools"] == [{"name": "read_file", "description": "Read a file", "input_schema": SCHEMA}]
    assert body["max_tokens"] == 4096


def test_anthropic_sends_an_empty_tool_result_without_content() -> None:
    request = ModelRequest(
        system="s",
        messages=[
            ChatMessage("user", "go"),
            ChatMessage("assistant", None, tool_calls=CALLS[:1]),
            ChatMessage("tool", "", tool_call_id="call_a", tool_name="read_file"),
        ],
    )
    body = anthropic_client.build_body(request, model="m", settings=ModelSettings(), stream=False)
    result = body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "content" not in result


def test_anthropic_merges_consecutive_same_role_messages() -> None:
    request = ModelRequest(system="s", messages=[ChatMessage("user", "one"), ChatMessage("user", "two")])
    messages = anthropic_client.build_body(request, model="m", settings=DEFAULTS, stream=False)["messages"]
    assert len(messages) == 1
    assert [b["text"] for b in messages[0]["content"]] == ["one", "two"]


def count_breakpoints(body: dict) -> int:
    return json.dumps(body).count('"cache_control"')


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_anthropic_breakpoints(ttl: str) -> None:
    settings = ModelSettings(cache_ttl=ttl)
    body = anthropic_client.build_body(tool_round(), model="m", settings=settings, stream=False)
    expected = {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "You are vigil.", "cache_control": expected}]
    assert count_breakpoints(body) == 3
    messages = body["messages"]
    # The last block of the last two user messages; nothing else in the history.
    assert messages[-1]["content"][-1]["cache_control"] == expected
    assert messages[2]["content"][-1]["cache_control"] == expected
    assert "cache_control" not in messages[2]["content"][0]
    assert "cache_control" not in json.dumps(messages[:2])


def test_anthropic_breakpoints_never_exceed_four_on_long_histories() -> None:
    history = [ChatMessage("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(40)]
    request = ModelRequest(system="s", messages=history)
    body = anthropic_client.build_body(request, model="m", settings=DEFAULTS, stream=False)
    assert count_breakpoints(body) <= 4


def test_anthropic_tool_input_tolerates_bad_json() -> None:
    assert anthropic_client.tool_input("") == {}
    assert anthropic_client.tool_input('{"a": 1}') == {"a": 1}
    assert anthropic_client.tool_input("{broken") == {"_raw_arguments": "{broken"}


def test_bodies_are_pure_functions_of_the_request() -> None:
    settings = ModelSettings(temperature=0.5)
    for build in (
        lambda: openai_client.build_body(
            tool_round(), model="m", settings=settings, token_limit_field="max_tokens", stream=True
        ),
        lambda: anthropic_client.build_body(tool_round(), model="m", settings=settings, stream=True),
    ):
        assert json.dumps(build()) == json.dumps(build())
