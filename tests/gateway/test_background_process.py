"""``/background`` (``/btw``) through the real gateway (the web API, a real ``vigil gateway run``):
the prompt runs in a child session whose first request carries the conversation's history,
while a message sent meanwhile is answered at once; a third task is refused while two run; each
answer arrives in the conversation as a note, and ``vigil sessions show`` lists the children."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.gateway.operations import answers
from tests.gateway.process import GatewayProcess, history, new_conversation, send, wait_for
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = pytest.mark.slow

PERU = "what is the capital of Peru?"
CHILE = "and the capital of Chile?"


def _notes(client: object, session_id: str) -> list[dict[str, object]]:
    return [m for m in history(client, session_id)["messages"] if m["role"] == "note"]  # type: ignore[arg-type]


def test_background_tasks_answer_in_child_sessions_while_the_conversation_stays_free(
    vigil_home: Path, fake_model: FakeModelServer
) -> None:
    held = threading.Event()
    fake_model.rule(reply=Reply.text("Lima.", gate=held), contains=PERU)
    fake_model.rule(reply=Reply.text("Santiago.", gate=held), contains=CHILE)
    fake_model.queue("noted: 42")
    gateway = GatewayProcess(vigil_home, fake_model).start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "remember the number 42")
        wait_for(lambda: answers(client, session_id) == ["noted: 42"], what="the first answer")
        conversation_request = fake_model.requests[-1]
        send(client, session_id, f"/btw {PERU}")
        send(client, session_id, f"/background {CHILE}")
        side = wait_for(lambda: (lambda found: found if len(found) == 2 else None)(
            [r for r in fake_model.requests if r.last_user_text in (PERU, CHILE)]), what="both side tasks asking")
        send(client, session_id, "/btw one task too many")
        fake_model.queue("yes, 42")
        send(client, session_id, "what was the number?")
        wait_for(lambda: answers(client, session_id) == ["noted: 42", "yes, 42"], what="an answer while both run")
        assert _notes(client, session_id) == []
        held.set()
        notes = wait_for(lambda: (lambda n: n if len(n) == 2 else None)(_notes(client, session_id)), what="the notes")
    texts = sorted(str(n["content"]) for n in notes)
    assert texts == [f"↳ background: “{CHILE}”\n\nSantiago.", f"↳ background: “{PERU}”\n\nLima."]
    assert all(n["background"]["status"] == "answered" for n in notes)  # type: ignore[index]

    # each child's first request: the conversation's system prompt, tools and history, then the prompt
    before = conversation_request.body
    for request in side:
        after = request.body
        assert after["messages"][: len(before["messages"])] == before["messages"] and after["tools"] == before["tools"]
        assert [m["content"] for m in after["messages"][len(before["messages"]):]] == ["noted: 42", request.last_user_text]
        assert request.cache_hit

    assert gateway.stop() == 0
    store = SQLiteStore(vigil_home / "state.db")
    try:
        told = [e.text for e in store.gateway.outbox_list() if e.session_id == session_id]
    finally:
        store.close()
    assert any(t.startswith(f"↳ Working on “{PERU}” in the background (1 of 2 running)") for t in told), told
    assert any(t.startswith("Refused: 2 background tasks are running") for t in told), told
    assert sum(t.startswith("↳ background: “") for t in told) == 2, told  # delivered to the chat too

    shown = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "sessions", "show", session_id, "--json"],
        env=gateway.environment(), capture_output=True, text=True, timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    forks = json.loads(shown.stdout)["forks"]
    assert sorted(f["title"] for f in forks) == [f"background: {CHILE}", f"background: {PERU}"]
    assert {(f["source"], f["end_reason"], f["forked_from"]) for f in forks} == {("background", "background", session_id)}


def test_a_task_the_gateway_died_under_says_so_when_it_starts_again(vigil_home: Path, fake_model: FakeModelServer) -> None:
    fake_model.rule(reply=Reply.text("never", gate=threading.Event()), contains="a long side job")
    gateway = GatewayProcess(vigil_home, fake_model).start()
    with gateway.client() as client:
        session_id = new_conversation(client)
        send(client, session_id, "hello")
        wait_for(lambda: answers(client, session_id) == ["ok"], what="the first answer")
        send(client, session_id, "/btw a long side job")
        wait_for(lambda: any(r.last_user_text == "a long side job" for r in fake_model.requests), what="the task asking")
    gateway.kill()
    gateway.start()
    with gateway.client() as client:
        (note,) = wait_for(lambda: _notes(client, session_id), what="the note after the restart")
    assert str(note["content"]).startswith("↳ background: “a long side job” was interrupted before it answered")
    assert note["background"]["status"] == "interrupted"  # type: ignore[index]
    assert gateway.stop() == 0
    store = SQLiteStore(vigil_home / "state.db")
    try:
        told = [e.text for e in store.gateway.outbox_list() if e.session_id == session_id]
        (fork,) = store.forks(session_id)
    finally:
        store.close()
    assert fork.end_reason == "interrupted" and sum("was interrupted" in t for t in told) == 1, told
