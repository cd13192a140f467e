"""A request's message is stored before the model is called: a gateway killed (or stopped)
while the agent answers it answers it after the restart, into the same conversation, and the
chat's next request continues there."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterator

import openai
import pytest

from tests.gateway.adapters.openai_api.conftest import openai_sdk, said
from tests.gateway.process import wait_for
from tests.gateway.adapters.web.conftest import WebGateway, web_gateway
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply


@pytest.fixture
def gateway(vigil_home: Path, fake_model_env: FakeModelServer) -> Iterator[WebGateway]:
    """A gateway of the test's own: a message it died under runs again 0.5 s after the restart
    (``gateway.retry_max_delay``), and a stop interrupts running turns after 0.2 s."""
    with web_gateway(vigil_home, fake_model_env, config={"gateway": {"retry_max_delay": 0.5, "stop_timeout": 0.2}},
                     env={}) as running:
        yield running


@pytest.fixture
def sdk(gateway: WebGateway) -> Iterator[openai.OpenAI]:
    with openai_sdk(gateway, timeout=60) as client:
        yield client


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


def test_a_gateway_that_stops_under_a_request_says_the_message_is_kept_and_answers_it_later(
    gateway: WebGateway, sdk: openai.OpenAI, fake_model_env: FakeModelServer
) -> None:
    fake_model_env.rule(contains="wait for me", reply=Reply.text("too late", delay=30), times=2)
    fake_model_env.set_default_reply("answered after the restart")
    seen: dict[str, Any] = {}

    def plain() -> None:
        try:
            sdk.chat.completions.create(model="vigil", messages=[{"role": "user", "content": "wait for me (plain)"}])
        except openai.APIStatusError as exc:
            seen["plain"] = exc

    def streamed() -> None:
        with sdk.chat.completions.with_streaming_response.create(
            model="vigil", messages=[{"role": "user", "content": "wait for me (streamed)"}], stream=True
        ) as response:
            seen["session"] = response.headers["x-vigil-conversation"]
            try:
                for _ in response.parse():
                    pass
            except openai.APIError as exc:
                seen["streamed"] = exc

    askers = [threading.Thread(target=plain, daemon=True), threading.Thread(target=streamed, daemon=True)]
    for asker in askers:
        asker.start()
    wait_for(lambda: len(fake_model_env.requests) == 2 and "session" in seen, what="both messages at the model")
    assert gateway.stop() == 0
    for asker in askers:
        asker.join(10)
    assert seen["plain"].status_code == 503 and seen["plain"].code == "gateway_stopping"
    assert "do not send it again" in str(seen["streamed"])
    gateway.start()
    wait_for(lambda: said(gateway, seen["session"], "assistant") == ["answered after the restart"],
             what="the streamed request's answer after the restart")
