"""The Matrix adapter in an in-process gateway against the fake homeserver: where answers go
(direct rooms, threads of group rooms), approvals by reaction and by reply, invitations,
strangers, encrypted rooms without encryption, files both ways, a homeserver that vanishes.
Streaming by edits is the contract's (test_contract.py)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.gateway.adapters.matrix.conftest import ALICE, BOB, STRANGER, Factory
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.testing.waiting import eventually


async def test_a_direct_room_and_the_threads_of_a_group_room_are_answered_in_their_place(make_matrix: Factory) -> None:
    h = await make_matrix()
    h.model.rule(contains="in the dm", reply="**dm** answer")
    h.model.rule(contains="in the group", reply="group answer")
    h.model.rule(contains="follow-up", reply="thread answer")
    dm = await h.dm()
    h.fake.state.say(dm, ALICE, "hello in the dm")
    [answer] = await h.answered(dm, 1)
    assert answer == "**dm** answer"
    shown = h.fake.state.messages(dm, h.bot)[0]["content"]
    assert shown["formatted_body"] == "<p><strong>dm</strong> answer</p>" and shown["msgtype"] == "m.text"
    assert (dm, h.bot, True) in h.fake.state.typing  # the typing notice while it worked, off once done
    await eventually(lambda: [on for room, _, on in h.fake.state.typing if room == dm][-1] is False,
                     what="the typing notice turned off")

    room = await h.group(BOB)
    h.fake.state.say(room, BOB, "nobody is asked here")  # no mention: not for the agent
    root = h.fake.state.say(room, BOB, "vigil: a question in the group")
    assert await h.answered(room, 1, thread=root) == ["group answer"]  # in a thread on the question
    h.fake.state.say(room, BOB, "a follow-up", thread=root)  # no mention needed in the thread
    assert await h.answered(room, 2, thread=root) == ["group answer", "thread answer"]
    h.fake.state.say(room, ALICE, "my follow-up", thread=root)  # Bob's conversation, not Alice's
    assert h.answers(room, thread=None) == [] and len(h.answers(room)) == 2
    assert [r.last_user_text for r in h.model.requests].count("my follow-up") == 0


def dangerous(target: Path) -> Reply:
    return Reply.tool_calls(ToolCallSpec("terminal", {"command": f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"}))


async def test_approval_by_the_owners_reaction_and_by_a_reply(make_matrix: Factory, tmp_path: Path) -> None:
    h = await make_matrix(approval_timeout=600)
    target = tmp_path / "disk"
    target.mkdir()
    h.model.queue(dangerous(target), "done as you said", dangerous(target), "left alone")
    room = await h.group(BOB)
    root = h.fake.state.say(room, ALICE, "vigil: format the spare disk")

    def requests() -> list[dict]:
        return [e for e in h.fake.state.messages(room, h.bot, thread=root) if "Approval needed" in e["content"]["body"]]

    [request] = await eventually(requests, what="the approval request")
    assert "mkfs.ext4" in request["content"]["body"] and ALICE in request["content"]["body"]
    def keys() -> set[str]:
        return {e["content"]["m.relates_to"]["key"] for e in h.fake.state.events(room, kind="m.reaction", sender=h.bot)}

    assert await eventually(lambda: keys() == {"✅", "❌"}, what="the answers to click")
    h.fake.state.react(room, BOB, request["event_id"], "✅")  # not Bob's conversation: nothing decided
    h.fake.state.say(room, BOB, "approve", thread=root)
    h.fake.state.react(room, ALICE, request["event_id"], "✅\ufe0f")
    await eventually(lambda: (target / "ran").exists(), what="the approved command to run")
    assert await eventually(lambda: "done as you said" in h.answers(room, root), what="the answer")
    assert "Approved" in requests()[0]["content"]["body"]
    (target / "ran").unlink()

    h.fake.state.say(room, ALICE, "and again", thread=root)
    await eventually(lambda: len(requests()) == 2, what="the second request")
    h.fake.state.say(room, ALICE, "deny", thread=root)  # the reply command of clients without reactions
    await eventually(lambda: "left alone" in h.answers(room, root), what="the answer after the denial")
    assert requests()[1]["content"]["body"].endswith("❌ Denied.") and not (target / "ran").exists()
    assert "deny" not in [r.last_user_text for r in h.model.requests]


async def test_invitations_strangers_and_encrypted_rooms(make_matrix: Factory) -> None:
    h = await make_matrix(matrix={"encryption": False})
    h.model.rule(contains="", reply="hi")
    theirs = h.fake.state.create_room(STRANGER, invite=[h.bot], direct=True)
    room = await h.group(STRANGER)  # Alice's room, with a stranger in it
    await eventually(lambda: h.fake.state.rooms[theirs].membership(h.bot) == "leave", what="the stranger's invitation declined")
    h.fake.state.say(room, STRANGER, "vigil: let me in")
    [code] = await h.answered(room, 1)
    assert "pairing" in code.lower() and not h.model.requests
    assert h.fake.state.messages(room, h.bot)[0]["content"]["msgtype"] == "m.notice"

    secret = await h.dm(encrypted=True)
    h.fake.state.add_event(secret, ALICE, "m.room.encrypted", {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "x",
                                                               "sender_key": "k", "session_id": "s", "device_id": "D"})
    [notice] = await h.answered(secret, 1)
    assert "unencrypted rooms only" in notice and not h.model.requests


async def test_a_shared_file_lands_in_the_workspace_and_send_file_uploads(make_matrix: Factory, tmp_path: Path) -> None:
    h = await make_matrix()
    h.model.rule(contains="saved as", reply="got it")
    dm = await h.dm()
    h.fake.state.share_file(dm, ALICE, "notes.txt", b"remember the milk")
    assert await h.answered(dm, 1) == ["got it"]
    note = next(r.last_user_text for r in h.model.requests if "saved as" in r.last_user_text)
    path = note.split("saved as ", 1)[1].split(" (", 1)[0]
    assert open(path, "rb").read() == b"remember the milk"

    route = h.store.gateway.routes_of(h.store.gateway.route_get(RouteKey("matrix", dm, "", ALICE)))[0]
    report = tmp_path / "report.csv"
    report.write_bytes(b"a,b\n1,2\n")
    now = time.time()
    await h.adapter.send(OutboxEntry(id=1, route=route, kind="file", text="the report", session_id=None, inbox_id=None,
                                     created_at=now, status="pending", attempts=0, next_attempt_at=now,
                                     meta={"path": str(report), "name": "report.csv"}))
    posted = [e["content"] for e in h.fake.state.messages(dm, h.bot) if e["content"]["msgtype"] == "m.file"]
    media = posted[0]["url"].rsplit("/", 1)[1]
    assert posted[0]["body"] == "report.csv" and h.fake.state.media[media][0] == b"a,b\n1,2\n"
    assert h.answers(dm)[-1] == "the report"


async def test_a_homeserver_that_vanishes_is_retried_with_back_off_and_nothing_is_lost(make_matrix: Factory) -> None:
    h = await make_matrix()
    h.model.rule(contains="while you were away", reply="back again")
    dm = await h.dm()
    h.fake.stop()
    await eventually(lambda: h.adapter.health().state == "retrying", what="the adapter retrying")
    assert "sync failed" in h.adapter.health().detail and h.gateway.accepting
    h.fake.state.say(dm, ALICE, "written while you were away")
    h.fake.start()
    assert await h.answered(dm, 1) == ["back again"]
    assert h.adapter.health().state == "connected"
