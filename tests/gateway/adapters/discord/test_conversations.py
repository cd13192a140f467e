"""Discord as people use it, against the fake: DMs and mentions answered in their place (a
mention's conversation in a thread of its own), strangers paired in a DM with nothing reaching
the model, ``/vigil …`` answered to its user only, approval buttons only the owner can press,
and an attachment over the upload cap left on Discord (streaming, buttons and files as such
are the adapter contract's, :mod:`tests.gateway.messaging_contract`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.gateway.adapters.discord.conftest import ALICE, BOB, STRANGER, DiscordHarness
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.testing.waiting import eventually


async def test_dms_and_mentions_are_answered_where_they_were_asked(make_discord: Any) -> None:
    h: DiscordHarness = await make_discord()
    fake = h.fake
    h.model.rule(contains="ping", reply="pong")
    fake.dm(ALICE, "ping from the dm")
    assert await eventually(lambda: h.answers(fake.dm_channel(ALICE))) == ["pong"]
    assert fake.state.typed(fake.dm_channel(ALICE)) >= 1  # "vigil is typing…" while the turn ran
    [sent] = fake.state.calls_of("POST", f"/channels/{fake.dm_channel(ALICE)}/messages")
    assert sent.body["allowed_mentions"] == {"parse": []}  # an answer saying @everyone pings nobody

    mention = fake.say(fake.channel_id, ALICE, "ping in the channel", mention=True)
    thread = mention["id"]  # Discord gives a message's thread the message's id
    assert await eventually(lambda: h.answers(thread), what="the answer in the thread") == ["pong"]
    assert [t.parent_id for t in fake.state.threads()] == [fake.channel_id]
    assert fake.state.channels[thread].name == "ping in the channel"
    assert h.answers(fake.channel_id) == []
    fake.say(thread, ALICE, "ping again, no mention")
    assert await eventually(lambda: len(h.answers(thread)) == 2 or None, what="the answer in the thread")

    closed = fake.state.text_channel(fake.guild_id, "no-threads", can_thread=False)  # the bot may not start threads
    fake.say(closed, ALICE, "ping where no thread can be made", mention=True)
    assert await eventually(lambda: h.answers(closed), what="the answer in the channel itself") == ["pong"]

    asked = len(h.model.requests)
    fake.say(fake.channel_id, ALICE, "just chatting in the channel")  # no mention: not for the agent
    fake.say(thread, BOB, "and me, in Alice's thread")  # not Bob's conversation, no mention
    sequence = fake.say(fake.channel_id, BOB, "the last one")["id"]
    await h.acked(fake.sequence)
    assert len(h.model.requests) == asked and h.stored(sequence) is None


async def test_strangers_are_given_a_pairing_code_in_a_dm_and_nothing_reaches_the_model(make_discord: Any) -> None:
    h: DiscordHarness = await make_discord()
    fake = h.fake
    dm = fake.dm_channel(STRANGER)
    fake.dm(STRANGER, "hello?")
    [code] = await eventually(lambda: h.answers(dm), what="the pairing code")
    assert "vigil pairing approve" in code
    fake.say(fake.channel_id, STRANGER, "hi bot", mention=True)
    command = fake.command(fake.channel_id, STRANGER, "help")
    await eventually(lambda: fake.ephemeral(command), what="the note on /vigil")
    assert "pairing code" in fake.ephemeral(command)[0]
    await h.acked(fake.sequence)
    assert fake.state.threads() == [] and h.answers(fake.channel_id) == []  # no thread, nothing in public
    assert h.model.requests == []


async def test_the_slash_command_is_registered_and_answers_its_user_only(make_discord: Any) -> None:
    h: DiscordHarness = await make_discord()
    fake = h.fake
    assert [c["name"] for c in fake.state.commands] == ["vigil"]
    fake.dm(ALICE, "hello")
    await eventually(lambda: h.answers(fake.dm_channel(ALICE)), what="the first answer")
    command = fake.command(fake.channel_id, ALICE, "status")
    [answer] = await eventually(lambda: [t for t in fake.ephemeral(command) if t], what="the command's answer")
    assert fake.state.interactions[command.id].callbacks[0]["type"] == 5  # "thinking…" first, at once
    assert h.stored(f"interaction:{command.id}").text == "/status"
    assert answer and h.answers(fake.channel_id) == [] and h.model.requests[1:] == []


async def test_only_the_owner_can_approve_a_dangerous_command(make_discord: Any, tmp_path: Path) -> None:
    h: DiscordHarness = await make_discord(gateway={"approval_timeout": 600})
    fake = h.fake
    target = tmp_path / "disk"
    target.mkdir()
    h.model.queue(Reply.tool_calls(ToolCallSpec("terminal", {
        "command": f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"})), "done as you said")
    thread = fake.say(fake.channel_id, ALICE, "format the spare disk", mention=True)["id"]
    [request] = await eventually(lambda: [m for m in fake.state.posted(thread) if m.components],
                                 what="the approval request")
    approve, deny = fake.buttons(request.id)
    assert approve.startswith("vigil:approve:") and deny.startswith("vigil:deny:")
    assert "mkfs.ext4" in request.content and f"<@{ALICE}>" in request.content
    refused = fake.press(request.id, approve, BOB)
    assert "Only <@" in (await eventually(lambda: fake.ephemeral(refused), what="Bob's note"))[0]
    assert not (target / "ran").exists()
    fake.press(request.id, approve, ALICE)
    await eventually(lambda: (target / "ran").exists(), what="the approved command to run")
    await eventually(lambda: "Approved" in request.content and not request.components, what="the request marked")
    assert await eventually(lambda: "done as you said" in h.answers(thread), what="the answer")


async def test_an_attachment_over_the_cap_is_not_fetched_and_the_agent_is_told(make_discord: Any) -> None:
    h: DiscordHarness = await make_discord(gateway={"upload_max_bytes": 1024})
    fake = h.fake
    dm = fake.dm_channel(ALICE)
    plan = fake.attachment(dm, "plan.txt", b"ship on friday\n")
    big = fake.attachment(dm, "dump.bin", b"x" * 5000)
    sent = fake.dm(ALICE, "what do these say?", attachments=[plan, big])
    await eventually(lambda: h.answers(dm), what="the answer")
    entry = h.stored(sent["id"])
    assert entry is not None and "dump.bin' was not saved" in entry.text and "1024 bytes" in entry.text
    assert "plan.txt', saved as" in entry.text
    assert sorted(p.name for p in h.gateway.workdir(entry.session_id).iterdir()) == ["plan.txt"]
