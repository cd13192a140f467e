"""Whatever reaches ``/hooks/NAME`` — forged or unsigned requests, signed bodies that are not a
hook's message, signed messages of any text — the gateway (real, over HTTP: see ``conftest``)
answers with a clear status and a JSON body, never a 5xx: a refused request leaves nothing in
the store and asks the model nothing; an accepted one is stored with exactly its text."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.adapters.webhooks.conftest import SECRET, HooksHarness
from tests.gateway.adapters.webhooks.receiver import signed
from vigil.testing.fake_model import FakeModelServer

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_HEADER = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60).map(str.strip)
"""Header values as HTTP clients send them (no spaces around)."""
_BODIES = (
    st.binary(max_size=300)
    | _JSON.map(lambda v: json.dumps(v).encode())
    | st.fixed_dictionaries({}, optional={"text": _JSON, "conversation": _JSON, "data": _JSON, "txt": _JSON})
    .map(lambda v: json.dumps(v).encode())
    | st.sampled_from([b'{"text": "\\ud800"}', b'{"text": "a\\u0000b"}', b"[" * 5000, b'{"text": 1e999}'])
)
_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _valid(body: bytes) -> bool:
    """Whether ``body`` is a hook's message (an object of known fields with a text)."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return (isinstance(payload, dict) and set(payload) <= {"text", "conversation", "data"}
            and isinstance(payload.get("text"), str) and bool(payload["text"].strip()))


def _refused(response: Any) -> str:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["code"] and error["message"]
    return error["code"]


@_SETTINGS
@given(body=_BODIES, delivery=_HEADER, stamp=_HEADER, signature=_HEADER,
       hook=st.sampled_from(["ha", "quiet", "nope", "HA", "ha%2F..", "ha.x"]))
async def test_an_unsigned_or_forged_request_is_refused_and_nothing_is_stored(
    hooks: HooksHarness, fake_model: FakeModelServer, body: bytes, delivery: str, stamp: str, signature: str, hook: str
) -> None:
    headers = {"webhook-id": delivery, "webhook-timestamp": stamp, "webhook-signature": signature}
    _refused(await hooks.post_raw(body, {k: v for k, v in headers.items() if v}, hook))
    assert hooks.count("gateway_inbox") == 0 and fake_model.requests == []


@_SETTINGS
@given(body=_BODIES, skew=st.sampled_from([0, 0, 0, 400, -400, 10**6]))
async def test_a_signed_body_that_is_no_message_is_refused_and_nothing_is_stored(
    hooks: HooksHarness, fake_model: FakeModelServer, body: bytes, skew: int
) -> None:
    before = hooks.count("gateway_inbox")
    response = await hooks.post_raw(body, signed(SECRET, body, timestamp=int(time.time()) + skew))
    if response.status_code == 202:
        assert skew == 0 and _valid(body), body
        return
    code = _refused(response)
    assert code == "stale" if skew else code != "stale"
    assert hooks.count("gateway_inbox") == before


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=200).filter(str.strip),
       conversation=st.none() | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,20}", fullmatch=True))
async def test_a_signed_message_of_any_text_is_stored_with_exactly_that_text(
    hooks: HooksHarness, text: str, conversation: str | None
) -> None:
    payload = {"text": text} if conversation is None else {"text": text, "conversation": conversation}
    response = await hooks.post(payload)
    if "\x00" in text:
        assert _refused(response) == "not_text"
        return
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["conversation"] == (conversation or accepted["id"])
    stored = hooks.inbox(accepted["inbox_id"])
    assert stored is not None and stored.text == text and stored.route.thread == accepted["conversation"]
