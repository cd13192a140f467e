"""The fake model speaks OpenAI chat completions well enough for the official SDK."""

from __future__ import annotations

import json
import time

import openai
import pytest

from vigil.testing import FakeModelServer, Reply, ToolCallSpec

USER = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello"}]


def client(server: FakeModelServer, **kwargs: object) -> openai.AsyncOpenAI:
    options: dict = {"base_url": server.base_url, "api_key": server.api_key, "max_retries": 0}
    options.update(kwargs)
    return openai.AsyncOpenAI(**options)


async def test_text_answer_with_usage(fake_model: FakeModelServer) -> None:
    fake_model.queue("Hello there.")
    async with client(fake_model) as sdk:
        completion = await sdk.chat.completions.create(model="fake-model", messages=USER)
    choice = completion.choices[0]
    assert choice.message.content == "Hello there."
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    record = fake_model.last_request
    assert record is not None and record.api == "openai" and not record.stream
    assert completion.usage.prompt_tokens == record.prompt_tokens > 0
    assert completion.usage.completion_tokens == record.output_tokens == 3  # ceil(12 bytes / 4)
    assert completion.usage.prompt_tokens_details.cached_tokens == 0
    assert record.body["messages"] == USER
    assert "authorization" not in record.headers


async def test_streamed_text_arrives_in_scripted_deltas(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text(["Hel", "lo", " world"]))
    deltas: list[str] = []
    usage = None
    async with client(fake_model) as sdk:
        stream = await sdk.chat.completions.create(
            model="fake-model", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.content:
                    deltas.append(choice.delta.content)
    assert deltas == ["Hel", "lo", " world"]
    assert usage is not None and usage.prompt_tokens == fake_model.last_request.prompt_tokens
    assert fake_model.last_request.stream


async def test_stream_without_include_usage_sends_no_usage(fake_model: FakeModelServer) -> None:
    async with client(fake_model) as sdk:
        stream = await sdk.chat.completions.create(model="fake-model", messages=USER, stream=True)
        chunks = [chunk async for chunk in stream]
    assert all(chunk.usage is None for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "ok"


async def test_tool_calls(fake_model: FakeModelServer) -> None:
    fake_model.queue(
        Reply.tool_calls(
            ToolCallSpec("read_file", {"path": "notes.txt"}, id="call_1"),
            ToolCallSpec("terminal", '{"command": "ls -l"}'),
        )
    )
    async with client(fake_model) as sdk:
        completion = await sdk.chat.completions.create(model="fake-model", messages=USER, tools=[])
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    first, second = message.tool_calls
    assert (first.id, first.function.name, json.loads(first.function.arguments)) == (
        "call_1",
        "read_file",
        {"path": "notes.txt"},
    )
    assert second.id.startswith("call_") and second.function.arguments == '{"command": "ls -l"}'


async def test_streamed_tool_calls_accumulate(fake_model: FakeModelServer) -> None:
    long_args = {"command": "echo " + "x" * 50, "timeout": 30}
    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("terminal", long_args), ToolCallSpec("noop"), text="Running it.")
    )
    calls: dict[int, dict[str, str]] = {}
    text, finish = "", None
    async with client(fake_model) as sdk:
        stream = await sdk.chat.completions.create(model="fake-model", messages=USER, stream=True)
        async for chunk in stream:
            choice = chunk.choices[0]
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    assert text == "Running it."
    assert finish == "tool_calls"
    assert [c["name"] for c in calls.values()] == ["terminal", "noop"]
    assert json.loads(calls[0]["arguments"]) == long_args
    assert json.loads(calls[1]["arguments"]) == {}
    assert all(c["id"].startswith("call_") for c in calls.values())


async def test_sdk_stream_helper_parses_tool_calls(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.tool_calls(ToolCallSpec("lookup", {"q": "weather"})))
    async with client(fake_model) as sdk:
        async with sdk.chat.completions.stream(model="fake-model", messages=USER) as stream:
            final = await stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"q": "weather"}


async def test_truncated_answer_reports_length(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text("cut", truncated=True))
    async with client(fake_model) as sdk:
        completion = await sdk.chat.completions.create(model="fake-model", messages=USER)
    assert completion.choices[0].finish_reason == "length"


async def test_models_list(fake_model: FakeModelServer) -> None:
    async with client(fake_model) as sdk:
        models = [m.id async for m in sdk.models.list()]
    assert models == ["fake-model"]


async def test_wrong_key_is_401_in_openai_shape(fake_model: FakeModelServer) -> None:
    async with client(fake_model, api_key="nope") as sdk:
        with pytest.raises(openai.AuthenticationError) as caught:
            await sdk.chat.completions.create(model="fake-model", messages=USER)
    assert caught.value.status_code == 401
    assert caught.value.code == "invalid_api_key"
    assert caught.value.type == "invalid_request_error"
    assert fake_model.last_request.status == 401
    assert fake_model.hits == fake_model.misses == 0


async def test_rate_limit_then_success_via_sdk_retry(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.error(429, retry_after=0.01), "after the wait")
    async with client(fake_model, max_retries=1) as sdk:
        completion = await sdk.chat.completions.create(model="fake-model", messages=USER)
    assert completion.choices[0].message.content == "after the wait"
    assert [r.status for r in fake_model.requests] == [429, 200]


async def test_rate_limit_without_retries_raises(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.error(429, "slow down", retry_after=2))
    async with client(fake_model) as sdk:
        with pytest.raises(openai.RateLimitError) as caught:
            await sdk.chat.completions.create(model="fake-model", messages=USER)
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.response.headers["retry-after-ms"] == "2000"
    assert caught.value.body["message"] == "slow down"


@pytest.mark.parametrize("status", [500, 503])
async def test_server_errors(fake_model: FakeModelServer, status: int) -> None:
    fake_model.queue(Reply.error(status))
    async with client(fake_model) as sdk:
        with pytest.raises(openai.InternalServerError) as caught:
            await sdk.chat.completions.create(model="fake-model", messages=USER)
    assert caught.value.status_code == status


async def test_disconnect_mid_stream_breaks_the_sdk_stream(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.disconnect_after(2, text=["one ", "two ", "three"]))
    received: list[str] = []
    async with client(fake_model) as sdk:
        stream = await sdk.chat.completions.create(model="fake-model", messages=USER, stream=True)
        with pytest.raises(openai.APIConnectionError):
            async for chunk in stream:
                received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "one two "
    assert fake_model.last_request.status == 200


async def test_disconnect_of_non_streamed_answer(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.disconnect_after(1))
    async with client(fake_model) as sdk:
        with pytest.raises(openai.APIConnectionError):
            await sdk.chat.completions.create(model="fake-model", messages=USER)


async def test_stream_hangs_then_drops(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.disconnect_after(1, text="partial answer", hang=0.3))
    async with client(fake_model) as sdk:
        stream = await sdk.chat.completions.create(model="fake-model", messages=USER, stream=True)
        started = time.monotonic()
        with pytest.raises(openai.APIConnectionError):
            async for _ in stream:
                pass
    assert time.monotonic() - started >= 0.25


async def test_delay_makes_a_client_time_out(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text("too late", delay=5))
    async with client(fake_model, timeout=0.3) as sdk:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            await sdk.chat.completions.create(model="fake-model", messages=USER)
    assert time.monotonic() - started < 2


async def test_delay_within_the_timeout_is_just_slow(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text("slow", delay=0.2))
    async with client(fake_model, timeout=5) as sdk:
        started = time.monotonic()
        completion = await sdk.chat.completions.create(model="fake-model", messages=USER)
    assert completion.choices[0].message.content == "slow"
    assert time.monotonic() - started >= 0.2
