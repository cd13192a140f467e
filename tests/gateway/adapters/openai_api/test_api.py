"""The OpenAI-compatible API of a real gateway, driven by the official ``openai`` SDK: models,
chat completions (plain and streamed, usage reported), a resent history continuing its one
conversation, the Responses API with ``previous_response_id``, the gateway token as the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from tests.gateway.adapters.openai_api.conftest import conversation, inbox_total, said
from tests.gateway.process import wait_for
from tests.gateway.adapters.web.conftest import EventReader, WebGateway
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec


def _reply_sent(gw: WebGateway, session_id: str) -> bool:
    from vigil.store import open_store

    store = open_store(gw.home / "state.db")
    try:
        return any(e.session_id == session_id and e.status == "sent" for e in store.gateway.outbox_list(limit=1_000))
    finally:
        store.close()


def _chat(client: openai.OpenAI, messages: list[dict[str, str]], **options: object) -> tuple[str, str]:
    """The answer and the conversation it is in (``X-Vigil-Conversation``)."""
    response = client.chat.completions.with_raw_response.create(model="vigil", messages=messages, **options)
    completion = response.parse()
    return completion.choices[0].message.content or "", response.headers["x-vigil-conversation"]


def test_models_lists_the_agent_and_any_name_reaches_it(client: openai.OpenAI, fake_model: FakeModelServer) -> None:
    names = [model.id for model in client.models.list()]
    assert names == ["vigil", "vigil/default"]
    assert client.models.retrieve("vigil").owned_by == "vigil"
    fake_model.rule(contains="which model", reply="the agent's own")
    completion = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "which model?"}])
    assert completion.model == "gpt-4o"
    assert completion.choices[0].message.content == "the agent's own"
    assert fake_model.last_request is not None and fake_model.last_request.model == "fake-model"


def test_a_chat_completion_is_one_stored_turn_with_its_usage(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    fake_model.rule(contains="capital of France", reply="Paris.")
    completion = client.chat.completions.with_raw_response.create(
        model="vigil", messages=[{"role": "user", "content": "The capital of France?"}]
    )
    session_id = completion.headers["x-vigil-conversation"]
    body = completion.parse()
    assert body.object == "chat.completion" and body.choices[0].finish_reason == "stop"
    assert body.choices[0].message.content == "Paris."
    assert body.usage is not None and body.usage.prompt_tokens > 0 and body.usage.completion_tokens > 0
    assert body.usage.total_tokens == body.usage.prompt_tokens + body.usage.completion_tokens
    view = conversation(gw, session_id)
    assert view["source"] == "api"
    assert [(m["role"], m["content"]) for m in view["messages"]] == [
        ("user", "The capital of France?"), ("assistant", "Paris.")
    ]


def test_a_streamed_completion_arrives_in_pieces_with_usage_last(client: openai.OpenAI, fake_model: FakeModelServer) -> None:
    fake_model.rule(contains="count", reply=Reply.text(["one, ", "two, ", "three"]))
    stream = client.chat.completions.create(
        model="vigil", messages=[{"role": "user", "content": "count to three"}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert pieces == ["one, ", "two, ", "three"]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_a_chat_that_resends_its_history_stays_one_conversation_and_keeps_the_cache(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    fake_model.rule(contains="my name is Ada", reply="Hello Ada.")
    fake_model.rule(contains="what is my name", reply=Reply.text(["Your name ", "is Ada."]))
    fake_model.rule(contains="thanks", reply="You're welcome.")
    history = [{"role": "user", "content": "my name is Ada"}]
    first, session_id = _chat(client, history)
    history += [{"role": "assistant", "content": first}, {"role": "user", "content": "what is my name?"}]
    stream = client.chat.completions.create(model="vigil", messages=history, stream=True)
    second = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert second == "Your name is Ada."
    # a client trims and re-wraps what it keeps: the exchange still matches
    history += [{"role": "assistant", "content": f"  {second}\n"}, {"role": "user", "content": "thanks"}]
    third, again = _chat(client, history)
    assert (third, again) == ("You're welcome.", session_id)
    assert said(gw, session_id, "user") == ["my name is Ada", "what is my name?", "thanks"]
    last = fake_model.last_request
    assert last is not None and last.cache_hit  # the stored prompt and history were replayed
    assert [m["content"] for m in last.body["messages"] if m["role"] == "user"][-3:] == [
        "my name is Ada", "what is my name?", "thanks"
    ]


def test_two_chats_that_begin_alike_stay_two_conversations(gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer) -> None:
    fake_model.set_default_reply("Hi there.")
    first_reply, first = _chat(client, [{"role": "user", "content": "hi"}])
    second_reply, second = _chat(client, [{"role": "user", "content": "hi"}])
    assert first != second
    _, still_first = _chat(client, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": first_reply},
                                    {"role": "user", "content": "one more"}])
    assert still_first in (first, second)  # both exchanges were alike: either conversation is the chat's
    other = second if still_first == first else first
    assert said(gw, still_first, "user") == ["hi", "one more"] and said(gw, other, "user") == ["hi"]
    _, by_key = _chat(client, [{"role": "user", "content": "hi"}], extra_headers={"X-Vigil-Conversation": other})
    assert by_key == other  # a session id as the key continues that conversation


def test_a_history_the_api_never_answered_starts_a_conversation_that_is_shown_it(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    _, session_id = _chat(client, [
        {"role": "user", "content": "pick a colour"}, {"role": "assistant", "content": "Teal."},
        {"role": "user", "content": "and a number"},
    ])
    (shown,) = said(gw, session_id, "user")
    assert "user: pick a colour\nassistant: Teal." in shown and shown.startswith("and a number\n\n")
    assert conversation(gw, session_id)["title"] == "and a number"


def test_the_clients_system_message_is_context_of_the_turn_not_the_stored_prompt(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    system = {"role": "system", "content": "Answer like a pirate."}
    first, session_id = _chat(client, [system, {"role": "user", "content": "hello"}])
    prompt = fake_model.requests[-1].body["messages"][0]
    assert prompt["role"] == "system" and "pirate" not in json.dumps(prompt)
    _chat(client, [system, {"role": "user", "content": "hello"}, {"role": "assistant", "content": first},
                   {"role": "user", "content": "again"}])
    assert fake_model.requests[-1].body["messages"][0] == prompt  # byte for byte: the cache holds
    stored = said(gw, session_id, "user")
    assert "Answer like a pirate." in stored[0] and stored[0].startswith("hello\n\n")
    assert conversation(gw, session_id)["title"] == "hello"
    assert stored[1] == "again"  # shown once, not with every message


def test_responses_previous_response_id_continues_its_conversation(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    fake_model.rule(contains="remember 42", reply="Noted.")
    fake_model.rule(contains="what number", reply=Reply.text(["It was ", "42."]))
    first = client.responses.create(model="vigil", input="remember 42", instructions="Be brief.")
    assert first.id.startswith("resp_") and first.status == "completed" and first.output_text == "Noted."
    assert first.usage is not None and first.usage.input_tokens > 0
    with client.responses.stream(model="vigil", input="what number?", previous_response_id=first.id) as stream:
        kinds = [event.type for event in stream]
        second = stream.get_final_response()
    assert second.output_text == "It was 42." and second.previous_response_id == first.id
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") == 2
    third = client.responses.with_raw_response.create(
        model="vigil", input=[{"role": "user", "content": [{"type": "input_text", "text": "what number again?"}]}],
        previous_response_id=second.id,
    )
    session_id = third.headers["x-vigil-conversation"]
    assert said(gw, session_id, "assistant") == ["Noted.", "It was 42.", "It was 42."]
    with pytest.raises(openai.NotFoundError) as refused:
        client.responses.create(model="vigil", input="hello?", previous_response_id="resp_unknown")
    assert refused.value.code == "previous_response_not_found"


def test_a_wrong_or_missing_key_is_refused_and_nothing_is_stored(gw: WebGateway) -> None:
    before = inbox_total(gw.home)
    for key in ("wrong", gw.token + "x"):
        sdk = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)
        with pytest.raises(openai.AuthenticationError) as refused:
            sdk.chat.completions.create(model="vigil", messages=[{"role": "user", "content": "let me in"}])
        assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            sdk.models.list()
    bare = gw.http().post("/v1/chat/completions", json={"model": "vigil", "messages": []})
    assert bare.status_code == 401 and bare.json()["error"]["type"] == "authentication_error"
    assert inbox_total(gw.home) == before


def test_api_conversations_are_listed_with_their_source(gw: WebGateway, client: openai.OpenAI) -> None:
    _, session_id = _chat(client, [{"role": "user", "content": "list me"}])
    listed = gw.api().get("/api/conversations").json()["conversations"]
    assert {"id": session_id, "source": "api"}.items() <= next(c for c in listed if c["id"] == session_id).items()
    result = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "sessions", "list", "--source", "api", "--json"],
        env=gw.environment(), capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert session_id in [row["id"] for row in json.loads(result.stdout) if row["source"] == "api"]


def test_a_slash_command_through_the_api_sets_the_conversations_heartbeat(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    first, session_id = _chat(client, [{"role": "user", "content": "hello"}])
    reply, again = _chat(client, [
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": first},
        {"role": "user", "content": "/heartbeat every 10m check the mail"},
    ])
    assert again == session_id and "every 10m" in reply
    heartbeat = conversation(gw, session_id)["heartbeat"]
    assert heartbeat is not None and heartbeat["interval"] == 600 and heartbeat["prompt"] == "check the mail"
    assert not any("/heartbeat" in r.last_user_text for r in fake_model.requests)  # a command, not a turn


def test_a_client_that_goes_away_mid_stream_leaves_the_answer_in_the_conversation(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    parts = ["The long ", "answer ", "goes on ", "and on."]
    fake_model.rule(contains="tell me a story", reply=Reply.text(parts, chunk_delay=0.3))
    with client.chat.completions.with_streaming_response.create(
        model="vigil", messages=[{"role": "user", "content": "tell me a story"}], stream=True
    ) as response:
        session_id = response.headers["x-vigil-conversation"]
        for chunk in response.parse():
            if chunk.choices and chunk.choices[0].delta.content:
                break  # leaving the block drops the connection
    wait_for(lambda: said(gw, session_id, "assistant") == ["".join(parts)], what="the whole answer stored")
    wait_for(lambda: _reply_sent(gw, session_id), what="the gateway done with the answer")
    # the chat comes back with the answer it would have had: the same conversation
    _, again = _chat(client, [{"role": "user", "content": "tell me a story"},
                              {"role": "assistant", "content": "".join(parts)}, {"role": "user", "content": "more"}])
    assert again == session_id


def test_a_heartbeat_set_through_the_api_fires_into_its_conversation(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    fake_model.rule(contains="look around", reply="Nothing new.")
    first, session_id = _chat(client, [{"role": "user", "content": "hello there"}])
    chat = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": first},
            {"role": "user", "content": "/heartbeat every 2s look around"}]
    reply, _ = _chat(client, chat)
    try:
        wait_for(lambda: (conversation(gw, session_id)["heartbeat"] or {}).get("fire_count", 0) >= 1,
                 what="the heartbeat firing")
        wait_for(lambda: "Nothing new." in said(gw, session_id, "assistant"), what="the heartbeat's answer stored")
    finally:
        _chat(client, [*chat, {"role": "assistant", "content": reply}, {"role": "user", "content": "/heartbeat clear"}])
    assert conversation(gw, session_id)["heartbeat"] is None


def test_a_turn_the_model_refuses_is_answered_with_the_reason_in_words(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    fake_model.rule(contains="refuse this", reply=Reply.error(400, "this request is not allowed"))
    answer, session_id = _chat(client, [{"role": "user", "content": "please refuse this"}])
    assert answer.startswith("⚠ The model refused this message") and "this request is not allowed" in answer
    _, again = _chat(client, [{"role": "user", "content": "please refuse this"}, {"role": "assistant", "content": answer},
                              {"role": "user", "content": "and now?"}])
    assert again == session_id


def test_a_request_sent_again_with_its_idempotency_key_is_stored_and_answered_once(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer
) -> None:
    fake_model.rule(contains="only once", reply="Once.")
    before = inbox_total(gw.home)
    asked = len(fake_model.requests)
    messages = [{"role": "user", "content": "answer only once"}]
    first, session_id = _chat(client, messages, extra_headers={"Idempotency-Key": "retry-1"})
    again, same = _chat(client, messages, extra_headers={"Idempotency-Key": "retry-1"})
    assert (again, same) == (first, session_id) == ("Once.", session_id)
    assert inbox_total(gw.home) == before + 1 and len(fake_model.requests) == asked + 1


def test_a_stream_says_when_a_command_waits_for_approval_in_the_web_chat(
    gw: WebGateway, client: openai.OpenAI, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    target = tmp_path / "keep-me"
    target.mkdir()
    command = f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"
    fake_model.rule(contains="clean the disk", reply=Reply.tool_calls(ToolCallSpec("terminal", {"command": command})),
                    times=1)
    fake_model.rule(contains="clean the disk", reply="Not done.")  # after the refused tool call
    first, session_id = _chat(client, [{"role": "user", "content": "hello disk"}])
    reader = EventReader(gw, session_id)  # the web chat, open on the conversation
    try:
        stream = client.chat.completions.create(model="vigil", stream=True, messages=[
            {"role": "user", "content": "hello disk"}, {"role": "assistant", "content": first},
            {"role": "user", "content": "clean the disk"}])
        pieces = (c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content)
        note = next(pieces)
        assert note.startswith("[waiting for approval:") and "mkfs.ext4" in note and session_id in note
        request = reader.wait_for("approval_request")
        assert gw.api().post(f"/api/approvals/{request['id']}", json={"approve": False}).status_code == 200
        assert "".join(pieces).endswith("Not done.")
    finally:
        reader.close()
    assert not (target / "ran").exists()
