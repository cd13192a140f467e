"""The fake model's broken answers (raw bodies, garbled streams) and its duplicate-id rules."""

from __future__ import annotations

import httpx
import pytest

from vigil.testing import FakeModelServer, Reply

OPENAI_AUTH = {"Authorization": "Bearer test-key"}
ANTHROPIC_AUTH = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}


def _post(server: FakeModelServer, api: str, body: dict, *, stream: bool = False) -> httpx.Response:
    if api == "openai":
        url, headers = f"{server.base_url}/chat/completions", OPENAI_AUTH
        body = {"model": "fake-model", **body}
    else:
        url, headers = f"{server.anthropic_base_url}/v1/messages", ANTHROPIC_AUTH
        body = {"model": "fake-model", "max_tokens": 50, **body}
    if stream:
        body["stream"] = True
    return httpx.post(url, json=body, headers=headers)


HELLO = {"messages": [{"role": "user", "content": "hello"}]}


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_raw_reply_sends_exactly_its_body(fake_model: FakeModelServer, api: str, stream: bool) -> None:
    page = "<html><body><h1>Welcome to nginx!</h1></body></html>"
    fake_model.queue(Reply.raw(200, page))
    response = _post(fake_model, api, HELLO, stream=stream)
    assert response.status_code == 200 and response.text == page
    assert response.headers["content-type"].startswith("text/html")
    assert fake_model.last_request.status == 200 and fake_model.last_request.reply_source == "queue"

    fake_model.queue(Reply.raw(502, b"Bad Gateway", "text/plain"))
    gateway = _post(fake_model, api, HELLO, stream=stream)
    assert gateway.status_code == 502 and gateway.text == "Bad Gateway"


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_garbled_stream_sends_text_then_the_bad_frame_and_ends(fake_model: FakeModelServer, api: str) -> None:
    fake_model.queue(Reply.garbled(2, text=["one ", "two ", "three"]))
    response = _post(fake_model, api, HELLO, stream=True)
    assert response.status_code == 200
    frames = response.text.split("\n\n")
    assert "one " in response.text and "two " in response.text and "three" not in response.text
    assert [f for f in frames if f.strip()][-1] == "event: content_block_delta\ndata: {this is not json"
    assert "[DONE]" not in response.text and "message_stop" not in response.text


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_garbled_reply_to_a_non_streamed_call_is_a_bad_json_body(fake_model: FakeModelServer, api: str) -> None:
    fake_model.queue(Reply.garbled(frame='{"choices": [oops'))
    response = _post(fake_model, api, HELLO)
    assert response.status_code == 200 and response.text == '{"choices": [oops'
    assert response.headers["content-type"] == "application/json"


def test_openai_refuses_duplicate_tool_call_ids(fake_model: FakeModelServer) -> None:
    call = {"id": "dup", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call, call]},
        {"role": "tool", "tool_call_id": "dup", "content": "a"},
        {"role": "tool", "tool_call_id": "dup", "content": "b"},
    ]
    refused = _post(fake_model, "openai", {"messages": messages})
    assert refused.status_code == 400 and "Duplicate tool_call id" in refused.text
    # one result for the duplicated pair is refused just the same
    refused_short = _post(fake_model, "openai", {"messages": messages[:3]})
    assert refused_short.status_code == 400
    unique = [
        messages[0],
        {"role": "assistant", "content": None, "tool_calls": [call, {**call, "id": "dup_2"}]},
        messages[2],
        {**messages[3], "tool_call_id": "dup_2"},
    ]
    assert _post(fake_model, "openai", {"messages": unique}).status_code == 200


def test_anthropic_refuses_duplicate_tool_use_ids_and_results(fake_model: FakeModelServer) -> None:
    use = {"type": "tool_use", "id": "dup", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "dup", "content": "a"}
    twice = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use, use]},
        {"role": "user", "content": [result, result]},
    ]
    refused = _post(fake_model, "anthropic", {"messages": twice})
    assert refused.status_code == 400 and "must be unique" in refused.text
    answered_twice = [twice[0], {"role": "assistant", "content": [use]}, twice[2]]
    refused_results = _post(fake_model, "anthropic", {"messages": answered_twice})
    assert refused_results.status_code == 400 and "only one `tool_result`" in refused_results.text
    fine = [twice[0], {"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    assert _post(fake_model, "anthropic", {"messages": fine}).status_code == 200
