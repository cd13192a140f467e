"""The OpenAI-compatible client's lanes (vigil.models.lanes): one connection each, many calls
at once, every lane given back whatever became of its call."""

from __future__ import annotations

import asyncio

import pytest

from vigil.config.settings import ModelSettings
from vigil.models.base import ChatMessage, ModelError, ModelRequest
from vigil.models.lanes import Lanes
from vigil.models.openai_client import OpenAIClient
from vigil.models.retry import RetryPolicy
from vigil.testing import FakeModelServer, Reply

REQUEST = ModelRequest(system="You are terse.", messages=(ChatMessage("user", "hi"),))


class Client:
    closed = False

    async def aclose(self) -> None:
        self.closed = True


def test_a_lane_takes_one_request_and_the_lane_given_back_last_goes_first() -> None:
    lanes: Lanes[Client] = Lanes(Client)
    (first, give_first), (second, give_second), (third, _) = lanes.take(), lanes.take(), lanes.take()
    assert len({id(first), id(second), id(third)}) == 3 and lanes.in_use == 3
    give_first()
    give_second()
    give_second()  # once only
    assert lanes.in_use == 1
    assert lanes.take()[0] is second and lanes.take()[0] is first
    assert lanes.size == 3 and lanes.in_use == 3


async def test_closing_closes_every_lane() -> None:
    lanes: Lanes[Client] = Lanes(Client)
    taken = [lanes.take() for _ in range(3)]
    await lanes.aclose()
    taken[0][1]()  # a call that ends after the close gives nothing back
    assert all(client.closed for client, _ in taken) and lanes.size == 0 and lanes.in_use == 0


def _client(base_url: str, api_key: str) -> OpenAIClient:
    async def no_wait(_seconds: float) -> None:
        pass

    settings = ModelSettings(max_retries=0)
    return OpenAIClient(settings, model="fake-model", api_key=api_key, base_url=base_url,
                        retry=RetryPolicy(max_retries=0, sleep=no_wait))


async def test_calls_at_once_each_take_a_lane_and_the_next_round_reuses_them(fake_model: FakeModelServer) -> None:
    calls = 12
    fake_model.set_default_reply(Reply.text(["one ", "two"], chunk_delay=0.05))
    client = _client(fake_model.base_url, fake_model.api_key)
    try:
        for _ in range(2):  # the second round on the connections the first left open
            answers = await asyncio.gather(*(client.complete(REQUEST, on_text=lambda _t: None) for _ in range(calls)))
            assert [a.content for a in answers] == ["one two"] * calls
            assert client._wire.lanes.in_use == 0
        assert client._wire.lanes.size == calls  # the second round made none
        whole = await asyncio.gather(*(client.complete(REQUEST) for _ in range(calls)))
        assert [a.content for a in whole] == ["one two"] * calls and client._wire.lanes.in_use == 0
    finally:
        await client.aclose()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("reply", [
    Reply.error(400, "bad request"),
    Reply.disconnect_after(1),
    Reply.garbled(1),
    Reply.raw(200, "<html>a login page</html>"),
], ids=["error status", "dropped", "garbled", "web page"])
async def test_a_failed_call_gives_its_lane_back(fake_model: FakeModelServer, reply: Reply, stream: bool) -> None:
    fake_model.set_default_reply(reply)
    client = _client(fake_model.base_url, fake_model.api_key)
    try:
        with pytest.raises(ModelError):
            await client.complete(REQUEST, on_text=(lambda _t: None) if stream else None)
        assert client._wire.lanes.in_use == 0
    finally:
        await client.aclose()


async def test_a_refused_connection_gives_its_lane_back(closed_port: int) -> None:
    client = _client(f"http://127.0.0.1:{closed_port}/v1", "key")
    try:
        with pytest.raises(ModelError):
            await client.complete(REQUEST, on_text=lambda _t: None)
        assert client._wire.lanes.in_use == 0
    finally:
        await client.aclose()


async def test_a_cancelled_call_gives_its_lane_back(fake_model: FakeModelServer) -> None:
    fake_model.set_default_reply(Reply.text(["a", "b", "c"], chunk_delay=5))
    client = _client(fake_model.base_url, fake_model.api_key)
    try:
        seen = asyncio.Event()
        call = asyncio.ensure_future(client.complete(REQUEST, on_text=lambda _t: seen.set()))
        await seen.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert client._wire.lanes.in_use == 0
    finally:
        await client.aclose()
