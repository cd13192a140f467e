"""The API's request parsing fuzzed through real HTTP against a real gateway: whatever a client
sends, a refusal is a clear 4xx in OpenAI's error shape (never a 500 or a traceback) and stores
nothing; odd but valid text is answered."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.adapters.openai_api.conftest import inbox_total
from tests.gateway.adapters.web.conftest import WebGateway

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ENDPOINTS = ("/v1/chat/completions", "/v1/responses")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
not_text = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.lists(json_values, max_size=3) \
    | st.dictionaries(st.text(max_size=5), json_values, max_size=3)
not_bool = st.integers() | st.text(max_size=5) | st.lists(json_values, max_size=2) | st.floats(allow_nan=False)


def _valid_chat() -> dict[str, Any]:
    return {"model": "vigil", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}


def _valid_responses() -> dict[str, Any]:
    return {"model": "vigil", "input": [{"role": "user", "content": "hi"}]}


def _spoil(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


chat_refusals = st.one_of(
    not_text.map(lambda v: _spoil(_valid_chat(), ("model",), v)),
    st.just(_spoil(_valid_chat(), ("model",), "m" * 300)),
    (not_text.filter(lambda v: not (isinstance(v, list) and v))).map(lambda v: _spoil(_valid_chat(), ("messages",), v)),
    st.lists(st.none() | st.integers() | st.text(max_size=5), min_size=1, max_size=3).map(
        lambda v: _spoil(_valid_chat(), ("messages",), v)),
    st.text(max_size=12).filter(lambda r: r not in ("system", "developer", "user", "assistant", "tool", "function")).map(
        lambda v: _spoil(_valid_chat(), ("messages", 1, "role"), v)),
    (st.booleans() | st.integers() | st.floats(allow_nan=False) | st.dictionaries(st.text(max_size=5), json_values, max_size=2)
     | st.lists(st.integers() | st.none(), min_size=1, max_size=3)).map(
        lambda v: _spoil(_valid_chat(), ("messages", 1, "content"), v)),
    st.sampled_from(["", "   ", "\n\t"]).map(lambda v: _spoil(_valid_chat(), ("messages", 1, "content"), v)),
    st.sampled_from(["assistant", "system", "tool"]).map(lambda v: _spoil(_valid_chat(), ("messages", 1, "role"), v)),
    not_bool.map(lambda v: _spoil(_valid_chat(), ("stream",), v)),
    (st.integers().filter(lambda n: n != 1) | st.text(max_size=3)).map(lambda v: _spoil(_valid_chat(), ("n",), v)),
    (st.integers() | st.text(max_size=3) | st.lists(st.integers(), max_size=2)).map(
        lambda v: _spoil(_valid_chat(), ("stream_options",), v)),
    not_bool.map(lambda v: _spoil(_valid_chat(), ("stream_options",), {"include_usage": v})),
    (st.integers() | st.lists(st.text(max_size=3), max_size=2) | st.dictionaries(st.text(max_size=3), st.integers(), min_size=1)).map(
        lambda v: _spoil(_valid_chat(), ("metadata",), v)),
    st.sampled_from(["", "\x00bad", "k" * 201]).map(lambda v: _spoil(_valid_chat(), ("metadata",), {"conversation": v})),
)

responses_refusals = st.one_of(
    (not_text.filter(lambda v: not (isinstance(v, list) and v))).map(lambda v: _spoil(_valid_responses(), ("input",), v)),
    st.sampled_from(["function_call", "function_call_output", "reasoning", "item_reference"]).map(
        lambda v: _spoil(_valid_responses(), ("input", 0, "type"), v)),
    not_text.filter(lambda v: v is not None).map(lambda v: _spoil(_valid_responses(), ("instructions",), v)),
    (not_text.filter(lambda v: v is not None) | st.text(max_size=20).filter(lambda t: not t.startswith("resp_"))).map(
        lambda v: _spoil(_valid_responses(), ("previous_response_id",), v)),
    not_bool.map(lambda v: _spoil(_valid_responses(), ("stream",), v)),
)


@pytest.fixture
def api(gw: WebGateway) -> httpx.Client:
    return gw.http(headers={**gw.bearer, "Content-Type": "application/json"}, timeout=30)


def _refused(response: httpx.Response, statuses: tuple[int, ...] = (400,)) -> None:
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"] and isinstance(error["type"], str)
    assert "Traceback" not in response.text


@contextmanager
def _nothing_stored(gw: WebGateway) -> Iterator[None]:
    """The block adds no message to the gateway's inbox."""
    before = inbox_total(gw.home)
    yield
    assert inbox_total(gw.home) == before


@FUZZ
@given(body=chat_refusals)
def test_chat_completions_refuses_a_bad_request_clearly_and_stores_nothing(gw: WebGateway, api: httpx.Client, body: dict[str, Any]) -> None:
    with _nothing_stored(gw):
        _refused(api.post("/v1/chat/completions", content=json.dumps(body)))


@FUZZ
@given(body=responses_refusals)
def test_responses_refuses_a_bad_request_clearly_and_stores_nothing(gw: WebGateway, api: httpx.Client, body: dict[str, Any]) -> None:
    with _nothing_stored(gw):
        _refused(api.post("/v1/responses", content=json.dumps(body)))


@FUZZ
@given(raw=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()), endpoint=st.sampled_from(ENDPOINTS))
def test_a_body_that_is_not_a_request_is_refused(gw: WebGateway, api: httpx.Client, raw: bytes, endpoint: str) -> None:
    with _nothing_stored(gw):
        _refused(api.post(endpoint, content=raw))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=400), stream=st.booleans())
def test_odd_but_valid_text_is_answered_and_stored_as_sent(gw: WebGateway, api: httpx.Client, text: str, stream: bool) -> None:
    before = inbox_total(gw.home)
    body = {"model": "vigil", "messages": [{"role": "user", "content": text}], "stream": stream}
    response = api.post("/v1/chat/completions", content=json.dumps(body))
    if not text.strip():
        _refused(response)
        assert inbox_total(gw.home) == before
        return
    assert response.status_code == 200, response.text[:300]
    assert inbox_total(gw.home) == before + 1
    if stream:
        assert response.text.rstrip().endswith("data: [DONE]")


def test_a_lone_surrogate_a_huge_message_and_a_huge_body_are_refused(gw: WebGateway, api: httpx.Client) -> None:
    surrogate = '{"model": "vigil", "messages": [{"role": "user", "content": "\\ud800"}]}'
    long = {"model": "vigil", "messages": [{"role": "user", "content": "x" * 100_001}]}
    huge = {"model": "vigil", "input": "y" * (9 * 1024 * 1024)}
    deep = "[" * 100_000 + "]" * 100_000
    with _nothing_stored(gw):
        _refused(api.post("/v1/chat/completions", content=surrogate))
        _refused(api.post("/v1/chat/completions", content=json.dumps(long)))
        _refused(api.post("/v1/responses", content=json.dumps(huge)), (413,))
        _refused(api.post("/v1/chat/completions", content=deep))


def test_unknown_paths_and_methods_are_openai_errors(gw: WebGateway, api: httpx.Client) -> None:
    _refused(api.get("/v1/chat/completions"), (404,))
    _refused(api.post("/v1/embeddings", json={"model": "vigil", "input": "x"}), (404,))
    _refused(api.get("/v1/models/gpt-4"), (404,))
