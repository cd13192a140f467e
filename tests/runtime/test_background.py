"""``/background PROMPT`` (``/btw``): the prompt runs in a fork of the conversation — same system
prompt, tools and history, so its first request extends the conversation's and reads from the
cache — while the conversation answers meanwhile; its note is shown at once and stored in the
conversation when no turn runs (appended: the next request extends the last one); at most
``agent.background_max`` run at once; a failure, and an interruption, post a note too."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

from tests.runtime.conftest import Runtime, RuntimeFactory
from vigil.agent.events import ToolStarted
from vigil.agent.fork import fork_session
from vigil.config.settings import Settings
from vigil.runtime.background import RUNNER, SOURCE
from vigil.runtime.conversation_events import BackgroundNote
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.testing.waiting import eventually

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo built"


def _notes(rt: Runtime) -> list[BackgroundNote]:
    return [e for e in rt.events if isinstance(e, BackgroundNote)]


def _stored_notes(rt: Runtime, session_id: str) -> list[str]:
    return [m.content or "" for m in rt.store.get_messages(session_id) if m.role == "note"]


async def test_a_side_task_reads_the_conversation_from_the_cache_and_leaves_it_free(
    rt: Runtime, fake_model: FakeModelServer
) -> None:
    held = threading.Event()
    fake_model.rule(reply=Reply.text("Lima.", gate=held), contains="capital of Peru")
    conversation_request = fake_model.requests[-1]
    started = await rt.command("/btw what is the capital of Peru?")
    assert "Working on “what is the capital of Peru?” in the background (1 of 2 running)" in started
    fork_request = await eventually(lambda: next(
        (r for r in fake_model.requests if r.last_user_text == "what is the capital of Peru?"), None),
        what="the side task's request")

    # the fork's first request: the conversation's system prompt, tools and history, then the prompt
    before, after = conversation_request.body, fork_request.body
    assert after["messages"][: len(before["messages"])] == before["messages"]
    assert [m["role"] for m in after["messages"][len(before["messages"]):]] == ["assistant", "user"]
    assert after["tools"] == before["tools"] and fork_request.cache_hit

    fake_model.queue("hi again")
    answered = await rt.send("are you there?")  # answered while the side task is held
    assert answered.result is not None and answered.result.answer == "hi again" and not _notes(rt)

    held.set()
    note = (await eventually(lambda: _notes(rt), what="the note"))[0]
    assert (note.status, note.session_id, note.prompt) == ("answered", rt.session_id, "what is the capital of Peru?")
    assert note.text == "↳ background: “what is the capital of Peru?”\n\nLima."
    await eventually(lambda: _stored_notes(rt, rt.session_id) == [note.text], what="the note stored")
    (fork,) = rt.store.forks(rt.session_id)
    assert (fork.id, fork.source, fork.end_reason) == (note.child_id, SOURCE, "background")
    assert [m.content for m in rt.store.get_messages(fork.id)] == ["what is the capital of Peru?", "Lima."]

    last = fake_model.requests[-1].body["messages"]
    fake_model.queue("Lima it is")
    await rt.send("thanks")
    following = fake_model.requests[-1].body["messages"]
    assert following[: len(last)] == last  # the note is appended, never inserted
    assert [m["content"] for m in following[len(last) + 1:]] == [note.text, "thanks"]


async def test_at_most_background_max_run_at_once_and_a_failure_posts_a_note(
    make_runtime: RuntimeFactory, fake_model: FakeModelServer
) -> None:
    rt = await make_runtime(settings=Settings.from_data({"agent": {"background_max": 2}}))
    await rt.send("hello")
    held = threading.Event()
    fake_model.rule(reply=Reply.text("done", gate=held), contains="slow job")
    fake_model.rule(reply=Reply.error(400, "this prompt is refused"), contains="doomed")
    await rt.command("/background slow job one")
    await rt.command("/btw slow job two")
    refused = await rt.send("/background a third")
    assert refused.reply is not None and refused.reply.is_error
    assert refused.reply.text.startswith("Refused: 2 background tasks are running") and "background_max is 2" in refused.reply.text
    listing = await rt.command("/background")
    assert listing == "Running in the background:\n1. slow job one\n2. slow job two"
    held.set()
    await eventually(lambda: len(_notes(rt)) == 2, what="both notes")
    await rt.command("/btw doomed")  # room again
    failed = await eventually(lambda: [n for n in _notes(rt) if n.status == "failed"], what="the failure note")
    assert "failed" in failed[0].text and "this prompt is refused" in failed[0].text
    await eventually(lambda: len(_stored_notes(rt, rt.session_id)) == 3, what="three notes stored")
    assert sorted(f.end_reason or "" for f in rt.store.forks(rt.session_id)) == ["background", "background", "failed"]


async def test_a_note_that_comes_during_a_turn_is_stored_after_it_and_the_fork_leaves_the_turn_out(
    rt: Runtime, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.rule(reply="Lima.", contains="capital of Peru")
    fake_model.rule(reply=Reply.tool_calls(ToolCallSpec("terminal", {"command": WAIT_FOR_GO})),
                    contains="build the project", times=1)
    fake_model.rule(reply="built", contains="build the project")
    turn = rt.conversation.submit("build the project")
    await eventually(lambda: any(isinstance(e, ToolStarted) for e in rt.events), what="the tool call running")
    assert "in the background" in (await rt.conversation.submit("/btw capital of Peru?")).reply.text  # type: ignore[union-attr]
    note = (await eventually(lambda: _notes(rt), what="the note, shown while the turn runs"))[0]
    assert not turn.done() and _stored_notes(rt, rt.session_id) == []
    fork_request = next(r for r in fake_model.requests if r.last_user_text == "capital of Peru?")
    assert "build the project" not in str(fork_request.body["messages"])  # the running turn is left out
    (tmp_path / "work" / "go").touch()
    await turn
    roles = [m.role for m in rt.store.get_messages(rt.session_id)]
    assert roles[-2:] == ["assistant", "note"] and _stored_notes(rt, rt.session_id) == [note.text]


async def test_an_interrupted_task_says_so_at_close_and_after_a_crash(
    make_runtime: RuntimeFactory, fake_model: FakeModelServer
) -> None:
    rt = await make_runtime()
    await rt.send("hello")
    fake_model.rule(reply=Reply.text("never", gate=threading.Event()), contains="long job")
    await rt.command("/btw long job")
    await eventually(lambda: any(r.last_user_text == "long job" for r in fake_model.requests), what="the task running")
    await rt.conversation.close()
    (note,) = _notes(rt)
    assert note.status == "interrupted" and "was interrupted before it answered" in note.text
    assert _stored_notes(rt, rt.session_id) == [note.text]
    assert rt.store.forks(rt.session_id)[0].end_reason == "interrupted"

    # a process that died mid-task left its fork unended: the next one to run the conversation says so
    gone = subprocess.Popen(["true"])  # a process that ran and is gone
    gone.wait()
    orphan = fork_session(rt.store, rt.session_id, source=SOURCE, title="background: orphan", turn_running=False,
                          config={RUNNER: {"host": socket.gethostname(), "pid": gone.pid}})
    alive = fork_session(rt.store, rt.session_id, source=SOURCE, title="background: elsewhere", turn_running=False,
                         config={RUNNER: {"host": socket.gethostname(), "pid": os.getppid()}})
    again = await make_runtime(session_id=rt.session_id)
    (recovered,) = _notes(again)
    assert (recovered.child_id, recovered.status) == (orphan.id, "interrupted")
    assert rt.store.get_session(orphan.id).end_reason == "interrupted"
    assert rt.store.get_session(alive.id).end_reason is None  # its process still runs: left alone
