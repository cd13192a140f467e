"""Both real clients over real HTTP against the fake model server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vigil.models.base import (
    ChatMessage,
    ModelAuthError,
    ModelBadRequest,
    ModelClient,
    ModelError,
    ModelRateLimited,
    ModelRequest,
    ModelStreamInterrupted,
    ModelUnreachable,
    ToolSpec,
)
from vigil.testing import FakeModelServer, Reply, ToolCallSpec

from .conftest import ClientFactory, RecordedSleeps

SYSTEM = "You are vigil, a patient assistant. " * 20
TOOLS = (
    ToolSpec(
        "read_file",
        "Read a text file",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
)


def ask(text: str, history: tuple[ChatMessage, ...] = ()) -> ModelRequest:
    return ModelRequest(system=SYSTEM, messages=[*history, ChatMessage("user", text)], tools=TOOLS)


async def test_plain_text_answer(make_client: ClientFactory, fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text("Hello there, friend."))
    client = make_client()
    assert isinstance(client, ModelClient)
    response = await client.complete(ask("hi"))
    assert response.content == "Hello there, friend."
    assert response.tool_calls == ()
    assert response.stop_reason == "end"
    assert response.model == "fake-model"
    assert fake_model.last_request is not None and not fake_model.last_request.stream


async def test_streamed_answer_delivers_each_delta(
    make_client: ClientFactory, fake_model: FakeModelServer
) -> None:
    fake_model.queue(Reply.text(["Hel", "lo ", "stream", "ing ", "world"]))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    response = await make_client().complete(ask("hi"), on_text=on_text)
    assert deltas == ["Hel", "lo ", "stream", "ing ", "world"]
    assert response.content == "".join(deltas) == "Hello streaming world"
    assert response.stop_reason == "end"
    assert fake_model.last_request is not None and fake_model.last_request.stream


async def test_consecutive_calls_reuse_one_connection(make_client: ClientFactory, fake_model: FakeModelServer) -> None:
    """A streamed answer read to its end leaves the connection for the next call: a new one
    each turn would cost a connection (to an https endpoint, a TLS handshake) every time."""
    client = make_client()

    async def on_text(delta: str) -> None:
        pass

    for n in range(3):
        fake_model.queue(Reply.text(["streamed ", f"answer {n}"]))
        await client.complete(ask(f"question {n}"), on_text=on_text)
    fake_model.queue(Reply.text("a plain one"))
    await client.complete(ask("no stream"))
    peers = [request.peer for request in fake_model.requests]
    assert len(peers) == 4 and all(peers) and len(set(peers)) == 1, peers


async def test_plain_callbacks_work_too(make_client: ClientFactory, fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text("sync callback"))
    deltas: list[str] = []
    response = await make_client().complete(ask("hi"), on_text=deltas.append)
    assert "".join(deltas) == response.content == "sync callback"


async def test_truncated_answer_reports_max_tokens(
    make_client: ClientFactory, fake_model: FakeModelServer
) -> None:
    fake_model.queue(Reply.text("cut", truncated=True), Reply.text("cut", truncated=True))
    client = make_client()
    assert (await client.complete(ask("hi"))).stop_reason == "max_tokens"
    assert (await client.complete(ask("hi"), on_text=lambda _: None)).stop_reason == "max_tokens"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_two_tool_calls(make_client: ClientFactory, fake_model: FakeModelServer, stream: bool) -> None:
    fake_model.queue(
        Reply.tool_calls(
            ToolCallSpec("read_file", {"path": "notes/a.txt"}, id="call_1"),
            ToolCallSpec("read_file", {"path": "b — ünïcode.txt"}, id="call_2"),
            text="Let me look.",
        )
    )
    on_text = (lambda _: None) if stream else None
    response = await make_client().complete(ask("read both"), on_text=on_text)
    assert response.stop_reason == "tool_calls"
    assert response.content == "Let me look."
    assert [(c.id, c.name) for c in response.tool_calls] == [("call_1", "read_file"), ("call_2", "read_file")]
    assert [json.loads(c.arguments) for c in response.tool_calls] == [
        {"path": "notes/a.txt"},
        {"path": "b — ünïcode.txt"},
    ]


async def test_tool_results_round_trip(
    make_client: ClientFactory, fake_model: FakeModelServer, provider: str
) -> None:
    """A history with two tool calls and their results is accepted and shaped per provider."""
    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("read_file", {"path": "a"}), ToolCallSpec("read_file", {"path": "b"})),
        Reply.text("Both files are empty."),
    )
    client = make_client()
    first = await client.complete(ask("read a and b"))
    history = (
        ChatMessage("user", "read a and b"),
        ChatMessage("assistant", first.content, tool_calls=first.tool_calls),
        *(ChatMessage("tool", "", tool_call_id=c.id, tool_name=c.name) for c in first.tool_calls),
    )
    request = ModelRequest(system=SYSTEM, messages=list(history), tools=TOOLS)
    second = await client.complete(request)
    assert second.content == "Both files are empty."
    body = fake_model.requests[-1].body
    if provider == "openai":
        tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_messages] == [c.id for c in first.tool_calls]
    else:
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        results = body["messages"][2]["content"]
        assert [b["tool_use_id"] for b in results] == [c.id for c in first.tool_calls]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_usage_includes_cached_tokens_on_an_extended_prompt(
    make_client: ClientFactory, fake_model: FakeModelServer, provider: str, stream: bool
) -> None:
    fake_model.queue(Reply.text("First answer."), Reply.text("Second answer."))
    client = make_client()
    on_text = (lambda _: None) if stream else None
    first = await client.complete(ask("first question"), on_text=on_text)
    history = (ChatMessage("user", "first question"), ChatMessage("assistant", "First answer."))
    second = await client.complete(ask("second question", history), on_text=on_text)

    served = fake_model.requests
    assert first.usage == served[0].usage
    assert second.usage == served[1].usage
    assert first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens > 0
    assert second.usage.output_tokens > 0
    if provider == "anthropic":
        # The newest turn carries a breakpoint, so the new part of the prompt is written, not input.
        assert first.usage.cache_write_tokens > 0 and second.usage.cache_write_tokens > 0
    else:
        assert second.usage.input_tokens > 0
    # input_tokens is the uncached part only; the parts add up to the whole prompt.
    assert second.usage.prompt_tokens == served[1].prompt_tokens


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_rate_limit_is_retried_after_the_advertised_delay(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps, stream: bool
) -> None:
    fake_model.queue(Reply.error(429, retry_after=2), Reply.text("made it"))
    on_text = (lambda _: None) if stream else None
    response = await make_client().complete(ask("hi"), on_text=on_text)
    assert response.content == "made it"
    assert [r.status for r in fake_model.requests] == [429, 200]
    assert sleeps.delays == [2.0]


async def test_persistent_rate_limit_gives_up(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> None:
    fake_model.queue(*[Reply.error(429)] * 3)
    with pytest.raises(ModelRateLimited, match="429"):
        await make_client(max_retries=2).complete(ask("hi"))
    assert len(fake_model.requests) == 3 and len(sleeps.delays) == 2


async def test_server_errors_are_retried_with_backoff_then_reported(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> None:
    fake_model.queue(*[Reply.error(503, "upstream is down")] * 4)
    with pytest.raises(ModelError) as caught:
        await make_client(max_retries=3).complete(ask("hi"))
    message = str(caught.value)
    assert "503" in message and "upstream is down" in message and "4 attempts" in message
    assert [r.status for r in fake_model.requests] == [503] * 4
    assert len(sleeps.delays) == 3
    assert sleeps.delays[0] < sleeps.delays[2]  # exponential, even with jitter


async def test_server_error_then_success(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> None:
    fake_model.queue(Reply.error(500), Reply.error(529), Reply.text("recovered"))
    response = await make_client().complete(ask("hi"), on_text=lambda _: None)
    assert response.content == "recovered"
    assert len(sleeps.delays) == 2


async def test_bad_credentials(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps, provider: str
) -> None:
    client = make_client(api_key="wrong-secret-key")
    with pytest.raises(ModelAuthError) as caught:
        await client.complete(ask("hi"))
    message = str(caught.value)
    expected_url = fake_model.base_url if provider == "openai" else fake_model.anthropic_base_url
    assert expected_url in message
    assert ("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY") in message
    assert "wrong-secret-key" not in message
    assert sleeps.delays == []  # never retried


async def test_bad_request_carries_the_provider_message(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> None:
    fake_model.queue(Reply.error(400, "prompt is too long: 300000 tokens > 200000 maximum"))
    with pytest.raises(ModelBadRequest, match="prompt is too long"):
        await make_client().complete(ask("hi"))
    assert sleeps.delays == []


async def test_unreachable_endpoint(
    make_client: ClientFactory, sleeps: RecordedSleeps, closed_port: int, provider: str
) -> None:
    url = f"http://127.0.0.1:{closed_port}" + ("/v1" if provider == "openai" else "")
    client = make_client(base_url=url, max_retries=2)
    with pytest.raises(ModelUnreachable) as caught:
        await client.complete(ask("hi"))
    assert url in str(caught.value)
    assert len(sleeps.delays) == 2


async def test_timeout_is_unreachable(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> None:
    fake_model.queue(Reply.text("too late", delay=2.0))
    with pytest.raises(ModelUnreachable, match="no answer within 0.2s"):
        await make_client(timeout=0.2, max_retries=0).complete(ask("hi"))


async def test_disconnect_mid_stream_keeps_the_partial_text(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> None:
    fake_model.queue(
        Reply.disconnect_after(2, text=["Partial ", "answer ", "never finished."]),
        Reply.text("again"),
    )
    deltas: list[str] = []
    with pytest.raises(ModelStreamInterrupted) as caught:
        await make_client().complete(ask("hi"), on_text=deltas.append)
    assert caught.value.partial_text == "Partial answer " == "".join(deltas)
    # The user saw text already; a retry would follow it with a different answer.
    assert len(fake_model.requests) == 1 and sleeps.delays == []
    assert fake_model.pending == 1


async def test_disconnect_before_any_text_is_retried(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> None:
    fake_model.queue(Reply.disconnect_after(0), Reply.text("second try"))
    deltas: list[str] = []
    response = await make_client().complete(ask("hi"), on_text=deltas.append)
    assert response.content == "second try" == "".join(deltas)
    assert len(fake_model.requests) == 2 and len(sleeps.delays) == 1


async def test_disconnect_before_any_text_gives_up_as_interrupted(
    make_client: ClientFactory, fake_model: FakeModelServer
) -> None:
    fake_model.queue(Reply.disconnect_after(0), Reply.disconnect_after(0))
    with pytest.raises(ModelStreamInterrupted) as caught:
        await make_client(max_retries=1).complete(ask("hi"), on_text=lambda _: None)
    assert caught.value.partial_text == ""


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_identical_requests_send_identical_bodies(
    make_client: ClientFactory, fake_model: FakeModelServer, stream: bool
) -> None:
    history = (ChatMessage("user", "read a"), ChatMessage("assistant", "done, it says ünïcode"))
    on_text = (lambda _: None) if stream else None
    client = make_client(temperature=0.3)
    for _ in range(2):
        await client.complete(ask("again", history), on_text=on_text)
    # Another client instance must produce the very same bytes too (e.g. after a restart).
    await make_client(temperature=0.3).complete(ask("again", history), on_text=on_text)
    first, second, third = fake_model.requests
    assert json.dumps(first.body) == json.dumps(second.body) == json.dumps(third.body)
    assert first.segments == second.segments == third.segments
    assert second.full_prefix_hit


async def test_list_models(make_client: ClientFactory, fake_model: FakeModelServer) -> None:
    assert await make_client().list_models() == fake_model.models


def cache_markers(value: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            found.append(value["cache_control"])
        for key, child in value.items():
            if key not in ("input", "input_schema"):
                found.extend(cache_markers(child))
    elif isinstance(value, list):
        for child in value:
            found.extend(cache_markers(child))
    return found


@pytest.mark.parametrize("provider", ["anthropic"])
@pytest.mark.parametrize("ttl", ["5m", "1h"])
async def test_anthropic_cache_breakpoints(
    make_client: ClientFactory, fake_model: FakeModelServer, ttl: str
) -> None:
    history: list[ChatMessage] = []
    for turn in range(6):
        history += [ChatMessage("user", f"question {turn}"), ChatMessage("assistant", f"answer {turn}")]
    await make_client(cache_ttl=ttl).complete(ask("the latest question", tuple(history)))
    record = fake_model.requests[-1]
    markers = cache_markers(record.body)
    assert 1 <= len(markers) <= 4
    system_block = record.body["system"][-1]
    assert system_block["text"] == SYSTEM
    assert system_block["cache_control"]["type"] == "ephemeral"
    if ttl == "1h":
        assert system_block["cache_control"]["ttl"] == "1h"
        assert all(m.get("ttl") == "1h" for m in markers)
    else:
        assert system_block["cache_control"].get("ttl", "5m") == "5m"
    assert 0 in record.breakpoints
    last_segment = len(record.segments) - 1
    assert last_segment in record.breakpoints and last_segment - 2 in record.breakpoints


@pytest.mark.parametrize("provider", ["anthropic"])
async def test_anthropic_tool_loop_reads_the_previous_write(
    make_client: ClientFactory, fake_model: FakeModelServer
) -> None:
    """Each request reads exactly what the previous one wrote: the whole previous prompt."""
    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("read_file", {"path": "a"}, id="toolu_1")),
        Reply.tool_calls(ToolCallSpec("read_file", {"path": "b"}, id="toolu_2")),
        Reply.text("done"),
    )
    client = make_client()
    messages: list[ChatMessage] = [ChatMessage("user", "read a then b")]
    for _ in range(3):
        response = await client.complete(ModelRequest(system=SYSTEM, messages=list(messages), tools=TOOLS))
        messages.append(ChatMessage("assistant", response.content, tool_calls=response.tool_calls))
        messages += [
            ChatMessage("tool", "contents", tool_call_id=c.id, tool_name=c.name) for c in response.tool_calls
        ]
    first, second, third = fake_model.requests
    assert second.full_prefix_hit and third.full_prefix_hit
    assert third.cached_tokens >= second.prompt_tokens - second.input_tokens
