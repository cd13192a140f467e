"""The web chat's JSON API and live events against the real gateway and the fake model."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.gateway.process import history, new_conversation, wait_for
from tests.gateway.adapters.web.conftest import (
    EventReader, WebGateway, answers, inbox_total, outbox_counts, post_message, user_texts, web_gateway,
)
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec


def test_messages_are_answered_in_order_and_a_resent_client_id_is_answered_once(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    fake_model_env.queue("First answer.", "Second answer.", "Third answer.")
    api = gateway.api()
    conversation = new_conversation(api)
    first = post_message(api, conversation, "one", "m-1")
    assert first.status_code == 202
    body = first.json()
    assert set(body) == {"inbox_id", "duplicate", "session_id"} and body["duplicate"] is False
    again = post_message(api, conversation, "one", "m-1")  # the page retrying after a network error
    assert again.status_code == 202 and again.json()["duplicate"] is True
    assert again.json()["inbox_id"] == body["inbox_id"]
    assert post_message(api, conversation, "two", "m-2").status_code == 202
    assert post_message(api, conversation, "three", "m-3").status_code == 202
    wait_for(lambda: len(answers(api, conversation)) == 3, what="three answers")
    assert user_texts(api, conversation) == ["one", "two", "three"]
    assert answers(api, conversation) == ["First answer.", "Second answer.", "Third answer."]
    assert inbox_total(gateway.home) == 3
    # each question names the inbound message it was: a page that reloaded mid-send draws it once
    inbox_ids = [m["inbox_id"] for m in api.get(f"/api/conversations/{conversation}").json()["messages"] if m["role"] == "user"]
    assert inbox_ids[0] == body["inbox_id"] and len(set(inbox_ids)) == 3


@pytest.mark.parametrize(("body", "why"), [
    ({"text": "", "client_id": "a"}, "non-empty"),
    ({"text": "   \n", "client_id": "a"}, "non-empty"),
    ({"text": 42, "client_id": "a"}, "non-empty"),
    ({"text": "x" * 100_001, "client_id": "a"}, "longer than 100,000"),
    ({"text": "hi"}, "client_id"),
    ({"text": "hi", "client_id": ""}, "client_id"),
    (["not", "an", "object"], "JSON object"),
])
def test_bad_messages_are_refused_with_a_reason_and_change_nothing(
    gateway: WebGateway, fake_model_env: FakeModelServer, body: object, why: str,
) -> None:
    api = gateway.api()
    conversation = new_conversation(api)
    response = api.post(f"/api/conversations/{conversation}/messages", json=body)
    assert response.status_code == 400 and why in response.json()["error"]
    not_json = api.post(f"/api/conversations/{conversation}/messages", content=b"{nope",
                        headers={"Content-Type": "application/json"})
    assert not_json.status_code == 400 and "not valid JSON" in not_json.json()["error"]
    assert inbox_total(gateway.home) == 0 and history(api, conversation)["messages"] == []
    assert fake_model_env.requests == []


def test_a_message_of_exactly_the_limit_is_taken(gateway: WebGateway, fake_model_env: FakeModelServer) -> None:
    fake_model_env.set_default_reply("Long indeed.")
    api = gateway.api()
    conversation = new_conversation(api)
    assert post_message(api, conversation, "y" * 100_000, "long-1").status_code == 202
    wait_for(lambda: answers(api, conversation), what="the answer")
    assert user_texts(api, conversation) == ["y" * 100_000]


def test_unknown_conversations_and_approvals_are_404(gateway: WebGateway) -> None:
    api = gateway.api()
    for method, path, kwargs in [
        ("GET", "/api/conversations/nosuchconversation", {}),
        ("POST", "/api/conversations/nosuchconversation/messages", {"json": {"text": "hi", "client_id": "z"}}),
        ("GET", "/api/conversations/nosuchconversation/events", {}),
        ("POST", "/api/conversations/nosuchconversation/files", {"files": {"file": ("a.txt", b"a")}}),
        ("POST", "/api/approvals/nosuchapproval", {"json": {"approve": True}}),
    ]:
        response = api.request(method, path, **kwargs)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]
    assert inbox_total(gateway.home) == 0


def test_a_conversation_is_found_by_an_id_prefix(gateway: WebGateway) -> None:
    api = gateway.api()
    conversation = new_conversation(api)
    view = api.get(f"/api/conversations/{conversation[:8]}").json()
    assert view["id"] == conversation and view["messages"] == []


def test_the_event_stream_carries_the_answer_token_by_token(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    fake_model_env.queue(Reply.text(["Streamed ", "in ", "three ", "parts."]))
    api = gateway.api()
    conversation = new_conversation(api)
    reader = EventReader(gateway, conversation)
    try:
        assert reader.status == 200 and reader.content_type.startswith("text/event-stream")
        assert post_message(api, conversation, "stream please", "s-1").status_code == 202
        ended = reader.wait_for("turn_ended")
        deltas = [e["text"] for e in reader.events if e["type"] == "delta"]
        assert deltas == ["Streamed ", "in ", "three ", "parts."]
        assert ended["content"] == "Streamed in three parts." and not ended["error"]
        accepted = reader.wait_for("message_accepted")
        assert accepted["text"] == "stream please" and accepted["client_id"] == "s-1"
        began = reader.wait_for("turn_began")
        assert began["kind"] == "user" and began["text"] == "stream please"
        kinds = [e["type"] for e in reader.events]
        assert kinds.index("turn_began") < kinds.index("delta") < kinds.index("turn_ended")
        assert all(e["session_id"] == conversation for e in reader.events)
    finally:
        reader.close()


def test_slash_commands_are_sent_like_messages(gateway: WebGateway, fake_model_env: FakeModelServer) -> None:
    api = gateway.api()
    conversation = new_conversation(api)
    reader = EventReader(gateway, conversation)
    try:
        assert post_message(api, conversation, "/help", "h-1").status_code == 202
        reply = reader.wait_for("command_reply")
        assert "/heartbeat" in reply["text"] and not reply["is_error"]
        assert fake_model_env.requests == []
    finally:
        reader.close()


def test_an_upload_lands_in_the_working_directory_with_a_safe_name(gateway: WebGateway) -> None:
    api = gateway.api()
    conversation = new_conversation(api)
    first = api.post(f"/api/conversations/{conversation}/files", files={"file": ("../../notes.txt", b"hello")})
    second = api.post(f"/api/conversations/{conversation}/files", files={"file": ("notes.txt", b"again")})
    assert first.status_code == 201 and second.status_code == 201
    saved, again = first.json(), second.json()
    assert (saved["name"], saved["size"]) == ("notes.txt", 5) and again["name"] == "notes (2).txt"
    path = Path(saved["path"])
    assert path.read_bytes() == b"hello" and Path(again["path"]).read_bytes() == b"again"
    assert path.parent == Path(again["path"]).parent and stat.S_IMODE(path.stat().st_mode) == 0o600
    hidden = api.post(f"/api/conversations/{conversation}/files", files={"file": (".env", b"x")})
    assert hidden.json()["name"] == "env"
    # U+202E shows "invoice\u202etxt.exe" as "invoiceexe.txt": bidirectional controls are dropped,
    # the other controls (C1 too) become _ as C0 ones do
    for raw, safe in [("invoice\u202etxt.exe", "invoicetxt.exe"), ("\u2066a\u200eb\u061c\u2069.pdf", "ab.pdf"),
                      ("c\x85d\u2028e\u009b.txt", "c_d_e_.txt")]:
        named = api.post(f"/api/conversations/{conversation}/files", files={"file": (raw, b"x")})
        assert named.status_code == 201 and named.json()["name"] == safe, (raw, named.text)
        assert Path(named.json()["path"]).name == safe


def test_an_upload_over_the_configured_cap_is_413_and_leaves_no_file(
    fake_model_env: FakeModelServer, vigil_home: Path, tmp_path: Path,
) -> None:
    with web_gateway(vigil_home, fake_model_env, config={"gateway": {"upload_max_bytes": 1000}}) as running:
        api = running.api()
        conversation = new_conversation(api)
        too_big = api.post(f"/api/conversations/{conversation}/files", files={"file": ("big.bin", b"x" * 1001)})
        assert too_big.status_code == 413 and "1000 bytes" in too_big.json()["error"]
        assert not list(vigil_home.rglob("big.bin")) and not list(tmp_path.rglob("big.bin"))
        fits = api.post(f"/api/conversations/{conversation}/files", files={"file": ("big.bin", b"x" * 1000)})
        assert fits.status_code == 201 and Path(fits.json()["path"]).stat().st_size == 1000


def test_the_list_has_every_conversation_and_searches_them(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    fake_model_env.set_default_reply("ok")
    api = gateway.api()
    apples, pears = new_conversation(api), new_conversation(api)
    post_message(api, apples, "tell me about apples", "a-1")
    post_message(api, pears, "tell me about pears", "p-1")
    wait_for(lambda: answers(api, apples) and answers(api, pears), what="both answers")
    listed = api.get("/api/conversations").json()["conversations"]
    assert {c["id"] for c in listed} == {apples, pears}
    assert {"id", "title", "source", "updated_at", "message_count", "heartbeat", "busy"} <= set(listed[0])
    found = api.get("/api/conversations", params={"q": "pears"}).json()["conversations"]
    assert [c["id"] for c in found] == [pears]
    assert api.get("/api/conversations", params={"limit": "x"}).status_code == 400


def test_an_approval_is_answered_once_over_the_api_and_a_denial_keeps_the_command_from_running(
    gateway: WebGateway, fake_model_env: FakeModelServer, tmp_path: Path,
) -> None:
    target = tmp_path / "keep-me"
    target.mkdir()
    command = f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"
    fake_model_env.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": command})), "Not done.")
    api = gateway.api()
    conversation = new_conversation(api)
    reader = EventReader(gateway, conversation)
    try:
        assert post_message(api, conversation, "clean up", "d-1").status_code == 202
        request = reader.wait_for("approval_request")
        assert request["tool"] == "terminal" and "mkfs.ext4" in request["description"]
        path = f"/api/approvals/{request['id']}"
        assert api.post(path, json={"approve": "yes"}).status_code == 400  # not a boolean: still pending
        denied = api.post(path, json={"approve": False})
        assert denied.status_code == 200 and denied.json() == {"approved": False}
        assert api.post(path, json={"approve": True}).status_code == 404  # decided already
        resolved = reader.wait_for("approval_resolved")
        assert resolved["id"] == request["id"] and resolved["approved"] is False
        reader.wait_for("turn_ended")
        assert not (target / "ran").exists()
        finished = reader.wait_for("tool_finished")
        assert "declined" in finished["content"]
    finally:
        reader.close()


def test_replies_reach_the_open_pages_and_count_as_delivered_with_none_open(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    fake_model_env.queue("Nobody is watching.", "Somebody is watching.")
    api = gateway.api()
    conversation = new_conversation(api)
    assert post_message(api, conversation, "first", "o-1").status_code == 202
    wait_for(lambda: outbox_counts(gateway.home)["sent"] == 1, what="the first reply sent")
    reader = EventReader(gateway, conversation)
    try:
        assert post_message(api, conversation, "second", "o-2").status_code == 202
        reply = reader.wait_for("reply")
        assert (reply["kind"], reply["text"], reply["session_id"]) == ("reply", "Somebody is watching.", conversation)
        wait_for(lambda: outbox_counts(gateway.home)["sent"] == 2, what="the second reply sent")
    finally:
        reader.close()
    counts = outbox_counts(gateway.home)
    assert counts["failed"] == 0 and counts["pending"] == 0


def test_new_from_the_web_moves_the_page_to_a_new_conversation(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    fake_model_env.queue("Old answer.", "New answer.")
    api = gateway.api()
    old = new_conversation(api)
    post_message(api, old, "in the old one", "n-1")
    wait_for(lambda: answers(api, old), what="the old answer")
    reader = EventReader(gateway, old)
    try:
        assert post_message(api, old, "/new", "n-2").status_code == 202
        moved = reader.wait_for("session_moved")
        new = moved["new_session_id"]
        assert new and new != old
    finally:
        reader.close()
    assert post_message(api, new, "in the new one", "n-3").status_code == 202
    wait_for(lambda: answers(api, new), what="the new answer")
    assert user_texts(api, new) == ["in the new one"] and answers(api, new) == ["New answer."]
    assert user_texts(api, old) == ["in the old one"]
    listed = {c["id"] for c in api.get("/api/conversations").json()["conversations"]}
    assert {old, new} <= listed


def test_a_conversation_from_the_terminal_is_listed_and_can_be_continued_from_the_web(
    gateway: WebGateway, fake_model_env: FakeModelServer,
) -> None:
    from tests.cli.helpers import run_cli

    fake_model_env.queue("Answer in the terminal.", "Answer in the browser.")
    assert run_cli("chat", "-q", "asked in the terminal about zebras").exit_code == 0
    api = gateway.api()
    listed = api.get("/api/conversations", params={"q": "zebras"}).json()["conversations"]
    assert len(listed) == 1 and listed[0]["source"] == "cli"
    terminal = listed[0]["id"]
    assert post_message(api, terminal, "and now from the browser", "t-1").status_code == 202
    wait_for(lambda: len(answers(api, terminal)) == 2, what="the browser's answer")
    assert user_texts(api, terminal) == ["asked in the terminal about zebras", "and now from the browser"]
    assert answers(api, terminal) == ["Answer in the terminal.", "Answer in the browser."]
