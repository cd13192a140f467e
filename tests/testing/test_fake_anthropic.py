"""The fake model speaks the Anthropic Messages API well enough for the official SDK."""

from __future__ import annotations

import time

import anthropic
import httpx
import httpx2
import pytest

from vigil.testing import FakeModelServer, Reply, ToolCallSpec

MESSAGES = [{"role": "user", "content": "hello"}]

# Unlike the OpenAI SDK, the Anthropic SDK lets a transport error escape from a broken stream
# unwrapped (an httpx2 error, not anthropic.APIConnectionError).
BROKEN_STREAM = (anthropic.APIConnectionError, httpx2.TransportError)


def client(server: FakeModelServer, **kwargs: object) -> anthropic.AsyncAnthropic:
    options: dict = {"base_url": server.anthropic_base_url, "api_key": server.api_key, "max_retries": 0}
    options.update(kwargs)
    return anthropic.AsyncAnthropic(**options)


async def test_text_answer_with_usage(fake_model: FakeModelServer) -> None:
    fake_model.queue("Hello there.")
    async with client(fake_model) as sdk:
        message = await sdk.messages.create(model="fake-model", max_tokens=100, system="Be terse.", messages=MESSAGES)
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Hello there."
    assert message.stop_reason == "end_turn"
    record = fake_model.last_request
    assert record is not None and record.api == "anthropic" and record.path == "/v1/messages"
    assert message.usage.input_tokens == record.prompt_tokens > 0
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens == 0
    assert message.usage.output_tokens == record.output_tokens == 3
    assert "x-api-key" not in record.headers
    assert "anthropic-version" in record.headers


async def test_raw_stream_event_sequence(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.tool_calls(ToolCallSpec("lookup", {"q": "x"}), text=["Let ", "me ", "check."]))
    async with client(fake_model) as sdk:
        stream = await sdk.messages.create(model="fake-model", max_tokens=100, messages=MESSAGES, stream=True)
        events = [event async for event in stream]
    kinds = [
        e.type + (":" + e.delta.type if e.type == "content_block_delta" else "") for e in events
    ]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta:text_delta",
        "content_block_delta:text_delta",
        "content_block_delta:text_delta",
        "content_block_stop",
        "content_block_start",
        *["content_block_delta:input_json_delta"] * (len(kinds) - 10),
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[-2].delta.stop_reason == "tool_use"
    assert events[-2].usage.output_tokens == fake_model.last_request.output_tokens


async def test_stream_helper_accumulates_text(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text(["Hel", "lo", " world"]))
    async with client(fake_model) as sdk:
        async with sdk.messages.stream(model="fake-model", max_tokens=100, messages=MESSAGES) as stream:
            deltas = [text async for text in stream.text_stream]
            final = await stream.get_final_message()
    assert deltas == ["Hel", "lo", " world"]
    assert final.content[0].text == "Hello world"
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens == fake_model.last_request.prompt_tokens
    assert final.usage.output_tokens == fake_model.last_request.output_tokens


async def test_tool_use_blocks(fake_model: FakeModelServer) -> None:
    fake_model.queue(
        Reply.tool_calls(
            ToolCallSpec("read_file", {"path": "notes.txt"}, id="toolu_1"),
            ToolCallSpec("terminal", '{"command": "ls -l"}'),
        )
    )
    async with client(fake_model) as sdk:
        message = await sdk.messages.create(model="fake-model", max_tokens=100, messages=MESSAGES)
    assert message.stop_reason == "tool_use"
    first, second = message.content
    assert (first.type, first.id, first.name, first.input) == ("tool_use", "toolu_1", "read_file", {"path": "notes.txt"})
    assert second.id.startswith("toolu_") and second.input == {"command": "ls -l"}


async def test_streamed_tool_use_parses_in_the_sdk(fake_model: FakeModelServer) -> None:
    arguments = {"command": "echo " + "y" * 40, "cwd": "/tmp", "nested": {"a": [1, 2]}}
    fake_model.queue(Reply.tool_calls(ToolCallSpec("terminal", arguments), ToolCallSpec("noop"), text="Sure."))
    async with client(fake_model) as sdk:
        async with sdk.messages.stream(model="fake-model", max_tokens=100, messages=MESSAGES) as stream:
            final = await stream.get_final_message()
    text, call, noop = final.content
    assert text.text == "Sure."
    assert (call.name, call.input) == ("terminal", arguments)
    assert (noop.name, noop.input) == ("noop", {})
    assert final.stop_reason == "tool_use"


async def test_string_arguments_that_are_not_an_object_are_a_script_error(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.tool_calls(ToolCallSpec("bad", "[1, 2]")))
    async with client(fake_model) as sdk:
        with pytest.raises(anthropic.InternalServerError, match="script"):
            await sdk.messages.create(model="fake-model", max_tokens=100, messages=MESSAGES)
    assert fake_model.last_request.status == 500


async def test_truncated_answer_reports_max_tokens(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text("cut", truncated=True))
    async with client(fake_model) as sdk:
        message = await sdk.messages.create(model="fake-model", max_tokens=1, messages=MESSAGES)
    assert message.stop_reason == "max_tokens"


async def test_models_list(fake_model: FakeModelServer) -> None:
    async with client(fake_model) as sdk:
        models = [m.id async for m in sdk.models.list()]
    assert models == ["fake-model"]


async def test_wrong_key_is_401_in_anthropic_shape(fake_model: FakeModelServer) -> None:
    async with client(fake_model, api_key="nope") as sdk:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            await sdk.messages.create(model="fake-model", max_tokens=100, messages=MESSAGES)
    assert caught.value.status_code == 401
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "authentication_error"


async def test_bearer_token_is_accepted_too(fake_model: FakeModelServer) -> None:
    sdk = anthropic.AsyncAnthropic(base_url=fake_model.anthropic_base_url, auth_token=fake_model.api_key, api_key=None)
    async with sdk:
        message = await sdk.messages.create(model="fake-model", max_tokens=10, messages=MESSAGES)
    assert message.content[0].text == "ok"


async def test_overloaded_then_success_via_sdk_retry(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.error(529, retry_after=0.01), Reply.error(429, retry_after=0.01), "finally")
    async with client(fake_model, max_retries=2) as sdk:
        message = await sdk.messages.create(model="fake-model", max_tokens=100, messages=MESSAGES)
    assert message.content[0].text == "finally"
    assert [r.status for r in fake_model.requests] == [529, 429, 200]


async def test_rate_limit_error_shape(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.error(429, "slow down"))
    async with client(fake_model) as sdk:
        with pytest.raises(anthropic.RateLimitError) as caught:
            await sdk.messages.create(model="fake-model", max_tokens=100, messages=MESSAGES)
    assert caught.value.body["error"] == {"type": "rate_limit_error", "message": "slow down"}


async def test_missing_max_tokens_is_a_bad_request(fake_model: FakeModelServer) -> None:
    async with httpx.AsyncClient(base_url=fake_model.anthropic_base_url) as http:
        response = await http.post(
            "/v1/messages",
            json={"model": "fake-model", "messages": MESSAGES},
            headers={"x-api-key": fake_model.api_key, "anthropic-version": "2023-06-01"},
        )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert fake_model.last_request.status == 400


async def test_disconnect_mid_stream_breaks_the_sdk_stream(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.disconnect_after(2, text=["one ", "two ", "three"]))
    received: list[str] = []
    async with client(fake_model) as sdk:
        with pytest.raises(BROKEN_STREAM):
            async with sdk.messages.stream(model="fake-model", max_tokens=100, messages=MESSAGES) as stream:
                async for text in stream.text_stream:
                    received.append(text)
    assert received == ["one ", "two "]


async def test_stream_hangs_then_drops(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.disconnect_after(0, hang=0.3))
    async with client(fake_model) as sdk:
        stream = await sdk.messages.create(model="fake-model", max_tokens=100, messages=MESSAGES, stream=True)
        started = time.monotonic()
        with pytest.raises(BROKEN_STREAM):
            async for _ in stream:
                pass
    assert time.monotonic() - started >= 0.25


async def test_delay_makes_a_client_time_out(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text("too late", delay=5))
    async with client(fake_model, timeout=0.3) as sdk:
        with pytest.raises(anthropic.APITimeoutError):
            await sdk.messages.create(model="fake-model", max_tokens=100, messages=MESSAGES)
