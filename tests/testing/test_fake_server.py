"""The fake model server's lifecycle, routing, fixtures and command line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest

from vigil.testing import FakeModelServer, Reply

CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}


def test_starts_and_stops_on_exit() -> None:
    with FakeModelServer() as server:
        assert server.running and server.port > 0
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.anthropic_base_url == f"http://127.0.0.1:{server.port}"
        assert httpx.get(f"{server.base_url}/models", headers={"Authorization": "Bearer test-key"}).status_code == 200
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.base_url}/models")


def test_stop_and_start_again_on_the_same_port() -> None:
    server = FakeModelServer(api_key="k").start()
    port = server.port
    server.stop()
    server.stop()  # idempotent
    server.start()
    try:
        assert server.port == port
        response = httpx.post(f"{server.base_url}/chat/completions", json=CHAT, headers={"Authorization": "Bearer k"})
        assert response.status_code == 200
    finally:
        server.stop()


def test_a_given_port_is_used() -> None:
    probe = FakeModelServer().start()
    port = probe.port
    probe.stop()
    with FakeModelServer(port=port) as server:
        assert server.port == port


async def test_stop_mid_stream_breaks_the_client_at_once(fake_model: FakeModelServer) -> None:
    fake_model.queue(Reply.disconnect_after(1, hang=30))
    async with openai.AsyncOpenAI(base_url=fake_model.base_url, api_key=fake_model.api_key, max_retries=0) as sdk:
        stream = await sdk.chat.completions.create(model="fake-model", messages=CHAT["messages"], stream=True)
        await anext(stream)
        started = time.monotonic()
        stopper = threading.Timer(0.05, fake_model.stop)
        stopper.start()
        with pytest.raises(openai.APIConnectionError):
            async for _ in stream:
                pass
        assert time.monotonic() - started < 5
        stopper.join()
        with pytest.raises(openai.APIConnectionError):
            await sdk.chat.completions.create(model="fake-model", messages=CHAT["messages"])
    # The fixture brings the shared server back for the next test.


def test_the_fixture_restarted_the_stopped_server(fake_model: FakeModelServer) -> None:
    assert fake_model.running
    assert fake_model.requests == []


def test_missing_key_is_401(fake_model: FakeModelServer) -> None:
    response = httpx.post(f"{fake_model.base_url}/chat/completions", json=CHAT)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert fake_model.last_request.status == 401
    response = httpx.post(f"{fake_model.anthropic_base_url}/v1/messages", json={**CHAT, "max_tokens": 5})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_x_api_key_works_on_the_openai_route(fake_model: FakeModelServer) -> None:
    response = httpx.post(f"{fake_model.base_url}/chat/completions", json=CHAT, headers={"x-api-key": "test-key"})
    assert response.status_code == 200


def test_models_listing_follows_the_dialect(fake_model: FakeModelServer) -> None:
    openai_list = httpx.get(f"{fake_model.base_url}/models", headers={"Authorization": "Bearer test-key"}).json()
    assert openai_list["object"] == "list" and openai_list["data"][0]["id"] == "fake-model"
    anthropic_list = httpx.get(
        f"{fake_model.base_url}/models", headers={"x-api-key": "test-key", "anthropic-version": "2023-06-01"}
    ).json()
    assert anthropic_list["data"][0]["type"] == "model" and anthropic_list["has_more"] is False
    assert httpx.get(f"{fake_model.base_url}/models").status_code == 401
    assert fake_model.requests == []  # listings are not model calls


def test_unknown_path_and_bad_bodies(fake_model: FakeModelServer) -> None:
    auth = {"Authorization": "Bearer test-key"}
    assert httpx.post(f"{fake_model.anthropic_base_url}/chat/completions", json=CHAT, headers=auth).status_code == 404
    bad_json = httpx.post(f"{fake_model.base_url}/chat/completions", content=b"{nope", headers=auth)
    assert bad_json.status_code == 400 and bad_json.json()["error"]["type"] == "invalid_request_error"
    no_messages = httpx.post(f"{fake_model.base_url}/chat/completions", json={"model": "m"}, headers=auth)
    assert no_messages.status_code == 400
    assert [r.status for r in fake_model.requests] == [400, 400]


def test_strict_models_rejects_unknown_names() -> None:
    with FakeModelServer(models=["a", "b"], strict_models=True) as server:
        auth = {"Authorization": "Bearer test-key"}
        assert httpx.post(f"{server.base_url}/chat/completions", json={**CHAT, "model": "a"}, headers=auth).status_code == 200
        unknown = httpx.post(f"{server.base_url}/chat/completions", json=CHAT, headers=auth)
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"


async def test_fake_model_env_configures_the_sdks(fake_model_env: FakeModelServer) -> None:
    assert os.environ["OPENAI_BASE_URL"] == fake_model_env.base_url
    assert os.environ["ANTHROPIC_BASE_URL"] == fake_model_env.anthropic_base_url
    fake_model_env.queue("from env")
    async with openai.AsyncOpenAI() as sdk:
        completion = await sdk.chat.completions.create(model="fake-model", messages=CHAT["messages"])
    assert completion.choices[0].message.content == "from env"


def test_python_dash_m_serves_until_terminated() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "vigil.testing.fake_model", "--port", "0", "--api-key", "cli-key", "--reply", "hi cli"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", first_line)
        assert match, first_line
        response = httpx.post(
            f"{match.group(1)}/chat/completions", json=CHAT, headers={"Authorization": "Bearer cli-key"}
        )
        assert response.json()["choices"][0]["message"]["content"] == "hi cli"
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0, stderr
    assert "RuntimeWarning" not in stderr


def test_python_dash_m_vigil_testing_explains_itself() -> None:
    shown = subprocess.run([sys.executable, "-m", "vigil.testing", "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    for option in ("--host", "--port", "--api-key", "--model", "--reply", "--rule TEXT=REPLY"):
        assert option in shown.stdout
    assert "/v1/chat/completions" in shown.stdout and "/v1/messages" in shown.stdout
    assert "OPENAI_BASE_URL" in shown.stdout and "OPENAI_API_KEY" in shown.stdout


def test_vigil_talks_to_python_dash_m_vigil_testing_without_any_key(tmp_path) -> None:
    """What the README's Development section says: start the fake, export the two printed
    values, and vigil answers with no provider key anywhere."""
    process = subprocess.Popen(
        [sys.executable, "-m", "vigil.testing", "--rule", "weather=Sunny all day.", "--reply", "Something else."],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        printed = "".join(process.stdout.readline() for _ in range(4))
        base_url = re.search(r"OPENAI_BASE_URL=(\S+)", printed)
        api_key = re.search(r"OPENAI_API_KEY=(\S+)", printed)
        assert base_url and api_key, printed
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "VIGIL_"))}
        env.update(VIGIL_HOME=str(tmp_path / "home"), OPENAI_BASE_URL=base_url.group(1), OPENAI_API_KEY=api_key.group(1))
        chat = subprocess.run([sys.executable, "-m", "vigil.cli.main", "chat", "-q", "How is the weather?"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert chat.returncode == 0, chat.stderr
        assert "Sunny all day." in chat.stdout
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0, stderr
