"""Answers that are not in the API's format become a clear, retried provider error."""

from __future__ import annotations

import pytest

from vigil.models.base import ChatMessage, ModelMalformedResponse, ModelRequest, ModelStreamInterrupted
from vigil.testing import FakeModelServer, Reply

from .conftest import ClientFactory, RecordedSleeps

API_NAMES = {"openai": "OpenAI-compatible", "anthropic": "Anthropic Messages API"}
PAGE = "<!DOCTYPE html><html><head><title>Router login</title></head><body>Please log in</body></html>"
REQUEST = ModelRequest(system="You are terse.", messages=(ChatMessage("user", "hi"),))

BROKEN = {
    "html page": lambda: Reply.raw(200, PAGE),
    "json of another shape": lambda: Reply.raw(200, '{"status": "ok"}', "application/json"),
    "invalid json": lambda: Reply.garbled(frame='{"choices": [oops'),
    "invalid data line": lambda: Reply.garbled(0),
}


def _texts() -> tuple[list[str], object]:
    seen: list[str] = []
    return seen, seen.append


CASES = [(kind, stream) for kind in BROKEN for stream in (False, True) if (kind, stream) != ("invalid json", True)]
# (a stream line that is not even a `data:` line is skipped by SSE parsers; that stream just ends early)


@pytest.mark.parametrize(("kind", "stream"), CASES, ids=[f"{k}-{'streamed' if s else 'whole'}" for k, s in CASES])
async def test_a_malformed_answer_is_a_clear_error_after_the_retries(
    make_client: ClientFactory, fake_model: FakeModelServer, sleeps: RecordedSleeps,
    provider: str, kind: str, stream: bool,
) -> None:
    fake_model.set_default_reply(BROKEN[kind]())
    seen, on_text = _texts()
    client = make_client(max_retries=2)
    with pytest.raises(ModelMalformedResponse) as caught:
        await client.complete(REQUEST, on_text=on_text if stream else None)
    message = str(caught.value)
    assert f"answered with something that is not an {API_NAMES[provider]} response" in message
    assert "gave up after 3 attempts" in message and "\n" not in message
    assert len(fake_model.requests) == 3 and len(sleeps.delays) == 2
    assert seen == []
    if kind == "html page" and not stream:
        assert "Router login" in message  # says what came back


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_one_malformed_answer_then_a_good_one(
    make_client: ClientFactory, fake_model: FakeModelServer, stream: bool
) -> None:
    fake_model.queue(Reply.raw(200, PAGE), Reply.garbled(0), Reply.text("fine now"))
    response = await make_client().complete(REQUEST, on_text=(lambda _t: None) if stream else None)
    assert response.content == "fine now"
    assert len(fake_model.requests) == 3


async def test_a_bad_line_after_some_text_keeps_the_text_and_is_not_retried(
    make_client: ClientFactory, fake_model: FakeModelServer, provider: str
) -> None:
    fake_model.queue(Reply.garbled(2, text=["first ", "words ", "never seen"]), Reply.text("not asked for"))
    seen, on_text = _texts()
    with pytest.raises(ModelStreamInterrupted) as caught:
        await make_client().complete(REQUEST, on_text=on_text)
    assert caught.value.partial_text == "first words " and seen == ["first ", "words "]
    assert f"not an {API_NAMES[provider]} response" in str(caught.value)
    assert len(fake_model.requests) == 1 and fake_model.pending == 1


async def test_an_error_in_the_text_callback_is_not_called_malformed(
    make_client: ClientFactory, fake_model: FakeModelServer
) -> None:
    fake_model.queue(Reply.text("some text here"))

    def breaks(_text: str) -> None:
        raise KeyError("the front end's own bug")

    with pytest.raises(KeyError):
        await make_client().complete(REQUEST, on_text=breaks)
    assert len(fake_model.requests) == 1
