"""Prefix-cache accounting: what counts as cached, for how long, and Anthropic breakpoints."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest

from vigil.testing import FakeModelServer, Reply
from vigil.testing.prefix_cache import PrefixCache, PromptShape, canonical_json, estimate_tokens
from vigil.usage import Usage

SYSTEM = "You are vigil, a persistent assistant. " * 20
TOOLS = [{"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the cache on its own ---------------------------------------------------------------------


def shape(*segments: str, breakpoints: tuple[int, ...] | None = None) -> PromptShape:
    return PromptShape(tuple(s.encode() for s in segments), breakpoints)


def test_tokens_are_a_quarter_of_the_utf8_bytes_rounded_up() -> None:
    assert [estimate_tokens(b""), estimate_tokens(b"abcd"), estimate_tokens(b"abcde"), estimate_tokens("é")] == [
        0,
        1,
        2,
        1,
    ]


def test_canonical_json_sorts_keys_and_keeps_content_bytes() -> None:
    assert canonical_json({"b": 1, "a": "é\n"}) == '{"a":"é\\n","b":1}'.encode()
    assert canonical_json({"a": 1, "b": 2}) == canonical_json({"b": 2, "a": 1})


def test_automatic_mode_reads_the_longest_cached_leading_run() -> None:
    cache = PrefixCache(ttl=300, clock=Clock())
    first = cache.account("k", shape("s" * 40, "u1" * 10))
    assert (first.read_tokens, first.write_tokens, first.input_tokens) == (0, 0, 15)
    second = cache.account("k", shape("s" * 40, "u1" * 10, "a1" * 10, "u2" * 10))
    assert (second.read_tokens, second.read_segments, second.input_tokens) == (15, 2, 10)
    forked = cache.account("k", shape("s" * 40, "X" * 20, "a1" * 10))
    assert (forked.read_tokens, forked.read_segments) == (10, 1)
    assert cache.account("other key", shape("s" * 40)).read_tokens == 0


def test_entries_expire_after_the_ttl_and_reads_refresh_them() -> None:
    clock = Clock()
    cache = PrefixCache(ttl=300, clock=clock)
    cache.account("k", shape("a" * 8, "b" * 8))
    clock.now += 299
    assert cache.account("k", shape("a" * 8, "b" * 8)).read_tokens == 4
    clock.now += 299  # 598 s after the first write, 299 after the refresh
    assert cache.account("k", shape("a" * 8, "b" * 8)).read_tokens == 4
    clock.now += 300
    assert cache.account("k", shape("a" * 8, "b" * 8)).read_tokens == 0
    clock.now += 1000
    assert len(cache) == 0


def test_breakpoint_mode_reads_and_writes_only_at_breakpoints() -> None:
    cache = PrefixCache(ttl=300, clock=Clock())
    nothing = cache.account("k", shape("s" * 40, "u" * 40, breakpoints=()))
    assert (nothing.read_tokens, nothing.write_tokens, nothing.input_tokens) == (0, 0, 20)
    assert len(cache) == 0
    first = cache.account("k", shape("s" * 40, "u" * 40, breakpoints=(0,)))
    assert (first.read_tokens, first.write_tokens, first.input_tokens) == (0, 10, 10)
    moved = cache.account("k", shape("s" * 40, "u" * 40, "a" * 40, breakpoints=(0, 2)))
    assert (moved.read_tokens, moved.write_tokens, moved.input_tokens) == (10, 20, 0)
    # The prefix ending at segment 1 was never a breakpoint, so it was never written.
    short = cache.account("k", shape("s" * 40, "u" * 40, breakpoints=(1,)))
    assert (short.read_tokens, short.write_tokens, short.input_tokens) == (10, 10, 0)


# -- end to end over HTTP ---------------------------------------------------------------------


def openai_body(*messages: dict[str, Any], system: str = SYSTEM, tools: list | None = None) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "messages": [{"role": "system", "content": system}, *messages],
        "tools": TOOLS if tools is None else tools,
    }


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


# verify=False: plain-HTTP loopback only, and it skips loading a CA bundle per client.
HTTP = httpx.Client(verify=False)


def post_openai(server: FakeModelServer, body: dict[str, Any]) -> dict[str, Any]:
    response = HTTP.post(
        f"{server.base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer {server.api_key}"}
    )
    response.raise_for_status()
    return response.json()["usage"]


def test_second_turn_reads_the_whole_first_request_from_cache(fake_model: FakeModelServer) -> None:
    first = post_openai(fake_model, openai_body(user("hi")))
    second = post_openai(fake_model, openai_body(user("hi"), assistant("ok"), user("and now?")))
    one, two = fake_model.requests
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["prompt_tokens_details"]["cached_tokens"] == first["prompt_tokens"] == one.prompt_tokens
    assert second["prompt_tokens"] == two.prompt_tokens == sum(two.segment_tokens)
    assert (one.cache_hit, one.full_prefix_hit) == (False, False)
    assert (two.cache_hit, two.full_prefix_hit) == (True, True)
    assert len(two.segments) == 4
    assert (fake_model.hits, fake_model.misses) == (1, 1)


def test_identical_content_with_reordered_keys_still_hits(fake_model: FakeModelServer) -> None:
    post_openai(fake_model, openai_body(user("hi")))
    reordered = {"content": "hi", "role": "user"}
    post_openai(fake_model, openai_body(reordered))
    assert fake_model.last_request.cached_tokens == fake_model.last_request.prompt_tokens


def test_one_byte_change_in_the_system_prompt_is_a_miss(fake_model: FakeModelServer) -> None:
    post_openai(fake_model, openai_body(user("hi")))
    post_openai(fake_model, openai_body(user("hi"), system=SYSTEM[:-1] + "!"))
    assert fake_model.last_request.cached_tokens == 0
    assert (fake_model.hits, fake_model.misses) == (0, 2)


def test_changed_tools_are_a_miss(fake_model: FakeModelServer) -> None:
    post_openai(fake_model, openai_body(user("hi")))
    post_openai(fake_model, openai_body(user("hi"), tools=[]))
    assert fake_model.last_request.cached_tokens == 0


def test_an_edited_middle_message_caches_only_what_precedes_it(fake_model: FakeModelServer) -> None:
    post_openai(fake_model, openai_body(user("one"), assistant("two"), user("three")))
    post_openai(fake_model, openai_body(user("one"), assistant("TWO"), user("three")))
    record = fake_model.last_request
    assert record.cached_tokens == sum(record.segment_tokens[:2])
    assert not record.full_prefix_hit


def test_ttl_expiry_is_a_miss(fake_model: FakeModelServer) -> None:
    post_openai(fake_model, openai_body(user("hi")))
    fake_model.advance_clock(fake_model.cache_ttl - 1)
    post_openai(fake_model, openai_body(user("hi")))
    assert fake_model.last_request.cache_hit
    fake_model.advance_clock(fake_model.cache_ttl)
    post_openai(fake_model, openai_body(user("hi")))
    assert not fake_model.last_request.cache_hit


def test_injected_clock_drives_the_ttl() -> None:
    clock = Clock()
    with FakeModelServer(clock=clock, cache_ttl=10) as server:
        post_openai(server, openai_body(user("hi")))
        clock.now += 11
        post_openai(server, openai_body(user("hi")))
        assert server.last_request.cached_tokens == 0


def test_each_model_has_its_own_cache(fake_model: FakeModelServer) -> None:
    post_openai(fake_model, openai_body(user("hi")))
    post_openai(fake_model, {**openai_body(user("hi")), "model": "other-model"})
    assert fake_model.last_request.cached_tokens == 0


def test_errors_and_refusals_do_not_touch_the_cache(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.error(503))
    response = HTTP.post(
        f"{fake_model.base_url}/chat/completions",
        json=openai_body(user("hi")),
        headers={"Authorization": f"Bearer {fake_model.api_key}"},
    )
    assert response.status_code == 503
    post_openai(fake_model, openai_body(user("hi")))
    assert fake_model.last_request.cached_tokens == 0
    assert (fake_model.hits, fake_model.misses) == (0, 1)


def test_usage_override_is_reported_and_recorded(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.text("x", usage=Usage(input_tokens=5, cache_read_tokens=1000, output_tokens=7)))
    usage = post_openai(fake_model, openai_body(user("hi")))
    assert (usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]) == (1005, 1000)
    assert usage["completion_tokens"] == 7
    assert fake_model.last_request.usage == Usage(5, 1000, 0, 7)


async def test_openai_sdk_sees_cached_tokens(fake_model: FakeModelServer) -> None:
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, user("hi")]
    async with openai.AsyncOpenAI(base_url=fake_model.base_url, api_key=fake_model.api_key) as sdk:
        first = await sdk.chat.completions.create(model="fake-model", messages=messages)
        messages += [assistant(first.choices[0].message.content or ""), user("more")]
        stream = await sdk.chat.completions.create(
            model="fake-model", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        usage = [chunk.usage async for chunk in stream if chunk.usage][0]
    assert usage.prompt_tokens_details.cached_tokens == first.usage.prompt_tokens
    assert fake_model.last_request.full_prefix_hit


# -- Anthropic breakpoints --------------------------------------------------------------------

CACHED_SYSTEM = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]


def marked(text: str) -> dict[str, Any]:
    """A user message whose only block carries a cache breakpoint."""
    return {"role": "user", "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]}


def unmarked(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def create(sdk: anthropic.AsyncAnthropic, messages: list[Any], **extra: Any) -> anthropic.types.Message:
    options: dict[str, Any] = {"system": CACHED_SYSTEM, **extra}
    return await sdk.messages.create(model="fake-model", max_tokens=100, messages=messages, **options)


@pytest.fixture
async def sdk(fake_model: FakeModelServer) -> Any:
    async with anthropic.AsyncAnthropic(base_url=fake_model.anthropic_base_url, api_key=fake_model.api_key) as client:
        yield client


async def test_anthropic_without_breakpoints_caches_nothing(fake_model: FakeModelServer, sdk: Any) -> None:
    for _ in range(2):
        message = await create(sdk, [user("hi")], system=SYSTEM)
    assert message.usage.cache_read_input_tokens == message.usage.cache_creation_input_tokens == 0
    assert message.usage.input_tokens == fake_model.last_request.prompt_tokens
    assert fake_model.last_request.breakpoints == ()


async def test_anthropic_system_breakpoint_writes_then_reads(fake_model: FakeModelServer, sdk: Any) -> None:
    first = await create(sdk, [user("hi")])
    second = await create(sdk, [user("something else")])
    system_tokens = fake_model.requests[0].segment_tokens[0]
    assert (first.usage.cache_creation_input_tokens, first.usage.cache_read_input_tokens) == (system_tokens, 0)
    assert (second.usage.cache_creation_input_tokens, second.usage.cache_read_input_tokens) == (0, system_tokens)
    assert second.usage.input_tokens == fake_model.requests[1].segment_tokens[1]
    assert fake_model.requests[1].breakpoints == (0,)


async def test_anthropic_moving_breakpoint_reads_the_previous_turn(fake_model: FakeModelServer, sdk: Any) -> None:
    await create(sdk, [marked("turn one")])
    # Next turn: the marker moves to the newest message; the old one is sent without it.
    second = await create(sdk, [unmarked("turn one"), assistant("ok"), marked("turn two")])
    one, two = fake_model.requests
    assert second.usage.cache_read_input_tokens == one.prompt_tokens
    assert second.usage.cache_creation_input_tokens == sum(two.segment_tokens[2:])
    assert second.usage.input_tokens == 0
    assert two.full_prefix_hit and two.cached_tokens == one.prompt_tokens
    assert two.cache_write_tokens == second.usage.cache_creation_input_tokens


async def test_anthropic_reads_stop_at_the_last_breakpoint(fake_model: FakeModelServer, sdk: Any) -> None:
    await create(sdk, [marked("turn one")])
    # Same first message but only the system prompt is marked: the longer written prefix is
    # beyond the last breakpoint, so only the system prompt is read.
    again = await create(sdk, [unmarked("turn one")])
    record = fake_model.last_request
    assert again.usage.cache_read_input_tokens == record.segment_tokens[0]
    assert again.usage.input_tokens == record.segment_tokens[1]
    assert not record.full_prefix_hit


async def test_anthropic_one_byte_system_change_is_a_miss(fake_model: FakeModelServer, sdk: Any) -> None:
    await create(sdk, [marked("hi")])
    changed = [{**CACHED_SYSTEM[0], "text": SYSTEM.replace("vigil", "vigiL")}]
    message = await create(sdk, [marked("hi")], system=changed)
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens == fake_model.last_request.prompt_tokens


async def test_anthropic_top_level_cache_control_marks_the_last_segment(
    fake_model: FakeModelServer, sdk: Any
) -> None:
    auto = {"extra_body": {"cache_control": {"type": "ephemeral"}}}
    await create(sdk, [user("hi")], system=SYSTEM, **auto)
    second = await create(sdk, [user("hi"), assistant("ok"), user("again")], system=SYSTEM, **auto)
    assert second.usage.cache_read_input_tokens == fake_model.requests[0].prompt_tokens
    assert fake_model.last_request.breakpoints == (3,)


async def test_anthropic_ttl_expiry_rewrites(fake_model: FakeModelServer, sdk: Any) -> None:
    await create(sdk, [user("hi")])
    fake_model.advance_clock(fake_model.cache_ttl + 1)
    message = await create(sdk, [user("hi")])
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens > 0


async def test_anthropic_streamed_usage_matches_the_record(fake_model: FakeModelServer, sdk: Any) -> None:
    await create(sdk, [marked("turn one")])
    async with sdk.messages.stream(
        model="fake-model", max_tokens=100, system=CACHED_SYSTEM, messages=[marked("turn one")]
    ) as stream:
        final = await stream.get_final_message()
    record = fake_model.last_request
    assert final.usage.cache_read_input_tokens == record.cached_tokens == record.prompt_tokens
    assert final.usage.cache_creation_input_tokens == 0
    assert final.usage.output_tokens == record.output_tokens


async def test_anthropic_more_than_four_breakpoints_is_a_bad_request(
    fake_model: FakeModelServer, sdk: Any
) -> None:
    turns = [marked(f"turn {i}") if i % 2 == 0 else assistant("ok") for i in range(9)]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4"):
        await create(sdk, turns)  # five marked user turns plus the marked system prompt
    assert fake_model.last_request.status == 400
