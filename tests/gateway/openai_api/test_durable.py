"""A request's message is stored before the model is called: a gateway killed while the agent
answers it answers it after the restart, into the same conversation, and the chat's next
request continues there."""

from __future__ import annotations

import threading
from typing import Any, Iterator

import openai
import pytest

from tests.gateway.openai_api.conftest import said
from tests.gateway.process import wait_for
from tests.gateway.web.conftest import WebGateway
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply


@pytest.fixture
def sdk(gateway: WebGateway) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=gateway.token, max_retries=0, timeout=30)
    try:
        yield client
    finally:
        client.close()


def test_a_message_the_gateway_died_under_is_answered_after_the_restart(
    gateway: WebGateway, sdk: openai.OpenAI, fake_model_env: FakeModelServer
) -> None:
    fake_model_env.rule(contains="slow question", reply=Reply.text("first try", delay=30), times=1)
    fake_model_env.rule(contains="slow question", reply="the answer after all")
    seen: dict[str, Any] = {}

    def ask() -> None:
        try:
            with sdk.chat.completions.with_streaming_response.create(
                model="vigil", messages=[{"role": "user", "content": "slow question"}], stream=True
            ) as response:
                seen["session"] = response.headers["x-vigil-conversation"]
                for _ in response.iter_lines():
                    pass
        except (openai.APIError, Exception) as exc:  # the connection dies with the gateway
            seen["error"] = exc

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    wait_for(lambda: fake_model_env.requests and "session" in seen, what="the model being asked")
    gateway.kill()
    asker.join(10)
    gateway.start()
    session_id = seen["session"]
    wait_for(lambda: said(gateway, session_id, "assistant") == ["the answer after all"], what="the answer after the restart")
    assert said(gateway, session_id, "user") == ["slow question"]
    again = sdk.chat.completions.with_raw_response.create(model="vigil", messages=[
        {"role": "user", "content": "slow question"}, {"role": "assistant", "content": "the answer after all"},
        {"role": "user", "content": "thanks"},
    ])
    assert again.headers["x-vigil-conversation"] == session_id
