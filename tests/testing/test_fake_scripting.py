"""Scripting the fake model: queue, rules, default, and the shapes of replies."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from vigil.testing import FakeModelServer, Reply, ToolCallSpec
from vigil.testing.scripting import Script, split_text

HTTP = httpx.Client(verify=False)


def ask(server: FakeModelServer, text: str, *, api: str = "openai") -> str:
    """One non-streamed call; returns the answer text."""
    if api == "openai":
        response = HTTP.post(
            f"{server.base_url}/chat/completions",
            json={"model": "fake-model", "messages": [{"role": "user", "content": text}]},
            headers={"Authorization": f"Bearer {server.api_key}"},
        )
        return response.json()["choices"][0]["message"]["content"]
    response = HTTP.post(
        f"{server.anthropic_base_url}/v1/messages",
        json={"model": "fake-model", "max_tokens": 10, "messages": [{"role": "user", "content": text}]},
        headers={"x-api-key": server.api_key, "anthropic-version": "2023-06-01"},
    )
    return response.json()["content"][0]["text"]


@pytest.mark.parametrize(
    "text", ["", "one", "two words", "  leading and trailing  ", "line\nbreaks\n\nand\ttabs", "é ü 中文"]
)
def test_split_text_round_trips(text: str) -> None:
    assert "".join(split_text(text)) == text


def test_default_reply_is_ok(fake_model: FakeModelServer) -> None:
    assert ask(fake_model, "anything") == "ok"
    assert fake_model.last_request.reply_source == "default"


def test_queue_is_used_in_order_then_the_default(fake_model: FakeModelServer) -> None:
    fake_model.queue("first", Reply.text("second"))
    assert fake_model.pending == 2
    assert [ask(fake_model, "x") for _ in range(3)] == ["first", "second", "ok"]
    assert [r.reply_source for r in fake_model.requests] == ["queue", "queue", "default"]


def test_queue_takes_precedence_over_rules(fake_model: FakeModelServer) -> None:
    fake_model.rule(contains="weather", reply="sunny")
    fake_model.queue("queued")
    assert ask(fake_model, "weather?") == "queued"
    assert ask(fake_model, "weather?") == "sunny"
    assert ask(fake_model, "news?") == "ok"


def test_rules_are_tried_in_order_and_honour_times(fake_model: FakeModelServer) -> None:
    once = fake_model.rule(contains="hi", reply="hello once", times=1)
    fake_model.rule(match=lambda text: text.startswith("hi"), reply="hello again")
    assert [ask(fake_model, "hi there") for _ in range(3)] == ["hello once", "hello again", "hello again"]
    assert once.used == 1


def test_rules_match_the_last_user_text_on_both_apis(fake_model: FakeModelServer) -> None:
    fake_model.rule(contains="ping", reply="pong")
    assert ask(fake_model, "ping", api="anthropic") == "pong"
    assert ask(fake_model, "ping", api="openai") == "pong"
    assert fake_model.last_request.last_user_text == "ping"


def test_last_user_text_skips_tool_results(fake_model: FakeModelServer) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "list files"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]},
    ]
    HTTP.post(
        f"{fake_model.anthropic_base_url}/v1/messages",
        json={"model": "fake-model", "max_tokens": 10, "messages": messages},
        headers={"x-api-key": fake_model.api_key},
    )
    assert fake_model.last_request.last_user_text == "list files"


def test_set_default_reply_lasts_until_reset(fake_model: FakeModelServer) -> None:
    fake_model.set_default_reply("changed")
    assert ask(fake_model, "x") == "changed"
    fake_model.reset()
    assert ask(fake_model, "x") == "ok"


def test_reset_clears_queue_rules_requests_and_counters(fake_model: FakeModelServer) -> None:
    fake_model.queue("a", "b")
    fake_model.rule(contains="x", reply="y")
    ask(fake_model, "hello")
    ask(fake_model, "hello")
    assert fake_model.hits == 1
    fake_model.reset()
    assert (fake_model.pending, fake_model.requests, fake_model.last_request) == (0, [], None)
    assert (fake_model.hits, fake_model.misses) == (0, 0)
    assert ask(fake_model, "x") == "ok"
    assert fake_model.last_request.cached_tokens == 0


def test_rule_needs_a_condition() -> None:
    with pytest.raises(ValueError):
        Script().rule(reply="x")
    with pytest.raises(ValueError):
        Script().rule(contains="x", reply="y", times=0)


def test_reply_constructors_validate() -> None:
    with pytest.raises(ValueError):
        Reply.tool_calls()
    with pytest.raises(ValueError):
        Reply.error(200)
    with pytest.raises(ValueError):
        Reply.disconnect_after(-1)


def test_tool_call_arguments() -> None:
    assert ToolCallSpec("f", {"b": 1, "a": "é"}).arguments_json == '{"b":1,"a":"é"}'
    assert ToolCallSpec("f", '{"x": 1}').arguments_json == '{"x": 1}'
    assert ToolCallSpec("f", '{"x": 1}').arguments_object() == {"x": 1}
    with pytest.raises(ValueError):
        ToolCallSpec("f", "not json").arguments_object()


def test_concurrent_calls_consume_each_queued_reply_once(fake_model: FakeModelServer) -> None:
    count = 24
    fake_model.queue(*(f"reply {i}" for i in range(count)))
    answers: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        with httpx.Client(verify=False) as http:
            for _ in range(count // 4):
                response = http.post(
                    f"{fake_model.base_url}/chat/completions",
                    json={"model": "fake-model", "messages": [{"role": "user", "content": "go"}]},
                    headers={"Authorization": f"Bearer {fake_model.api_key}"},
                )
                with lock:
                    answers.append(response.json()["choices"][0]["message"]["content"])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == sorted(f"reply {i}" for i in range(count))
    assert [r.index for r in fake_model.requests] == list(range(count))


def test_scripting_from_another_thread_while_serving(fake_model: FakeModelServer) -> None:
    scripted = threading.Event()

    def script() -> None:
        fake_model.rule(contains="later", reply="from the other thread")
        scripted.set()

    threading.Thread(target=script).start()
    assert scripted.wait(5)
    assert ask(fake_model, "later") == "from the other thread"


def test_wait_for_requests(fake_model: FakeModelServer) -> None:
    threading.Timer(0.05, ask, args=(fake_model, "x")).start()
    records = fake_model.wait_for_requests(1, timeout=5)
    assert records[0].last_user_text == "x"
    with pytest.raises(TimeoutError):
        fake_model.wait_for_requests(2, timeout=0.05)


async def test_wait_for_requests_async(fake_model: FakeModelServer) -> None:
    import asyncio

    async with httpx.AsyncClient(base_url=fake_model.base_url, verify=False) as http:
        call = asyncio.create_task(
            http.post(
                "/chat/completions",
                json={"model": "fake-model", "messages": [{"role": "user", "content": "async"}]},
                headers={"Authorization": f"Bearer {fake_model.api_key}"},
            )
        )
        records = await fake_model.wait_for_requests_async(1, timeout=5)
        await call
    assert records[0].last_user_text == "async"
