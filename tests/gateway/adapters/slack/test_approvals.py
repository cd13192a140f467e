"""Approval of a dangerous command as Slack buttons: only the conversation's owner decides."""

from __future__ import annotations

from pathlib import Path

from tests.gateway.adapters.slack.conftest import ALICE, BOB, SlackHarness, eventually
from vigil.gateway.adapters.slack.approvals import APPROVE, DENY
from vigil.testing.scripting import Reply, ToolCallSpec


def dangerous(target: Path) -> Reply:
    return Reply.tool_calls(ToolCallSpec("terminal", {"command": f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"}))


async def ask(h: SlackHarness, target: Path) -> tuple[str, str, str, str]:
    """Alice asks for something dangerous in a channel thread: the request's ts and id, the
    thread, and the event id of her message."""
    h.model.queue(dangerous(target), "done as you said")
    mention = await h.sender.mention("C0OPS", ALICE, "format the spare disk")
    def buttons():
        return [m for m in h.fake.state.posted("C0OPS", mention.ts) if m.blocks]
    request = (await eventually(buttons, what="the approval request"))[0]
    actions = [b for b in request.blocks if b["type"] == "actions"][0]["elements"]
    assert [a["action_id"] for a in actions] == [APPROVE, DENY]
    assert "mkfs.ext4" in request.blocks[0]["text"]["text"] and f"<@{ALICE}>" in request.blocks[0]["text"]["text"]
    return request.ts, actions[0]["value"], mention.ts, mention.event_id


async def test_another_person_is_refused_and_the_owner_approves(make_slack, tmp_path: Path) -> None:
    h = await make_slack(gateway={"approval_timeout": 600})
    target = tmp_path / "disk"
    target.mkdir()
    ts, approval, thread, asked = await ask(h, target)
    press = await h.sender.press(APPROVE, approval, user=BOB, channel="C0OPS", message_ts=ts, thread_ts=thread)
    assert press.response.status_code == 200
    note = (await eventually(lambda: h.fake.state.ephemerals, what="Bob's note"))[0]
    assert note.user == BOB and "Only <@U0ALICE>" in note.text
    assert not (target / "ran").exists()
    assert h.gateway.approvals.pending_for(h.stored(asked).session_id)  # still undecided
    await h.sender.press(APPROVE, approval, user=ALICE, channel="C0OPS", message_ts=ts, thread_ts=thread)
    await eventually(lambda: (target / "ran").exists(), what="the approved command to run")
    request = [m for m in h.fake.state.posted("C0OPS", thread) if m.ts == ts][0]
    await eventually(lambda: "Approved" in request.text, what="the request marked approved")
    assert not any(b["type"] == "actions" for b in request.blocks or [])
    assert await eventually(lambda: "done as you said" in h.answers("C0OPS", thread), what="the answer")


async def test_the_owner_denies(make_slack, tmp_path: Path) -> None:
    h = await make_slack(gateway={"approval_timeout": 600})
    target = tmp_path / "disk"
    target.mkdir()
    ts, approval, thread, _ = await ask(h, target)
    await h.sender.press(DENY, approval, user=ALICE, channel="C0OPS", message_ts=ts, thread_ts=thread)
    request = [m for m in h.fake.state.posted("C0OPS", thread) if m.ts == ts][0]
    await eventually(lambda: "Denied" in request.text, what="the request marked denied")
    await eventually(lambda: "done as you said" in h.answers("C0OPS", thread), what="the answer")
    assert not (target / "ran").exists()
    late = await h.sender.press(APPROVE, approval, user=ALICE, channel="C0OPS", message_ts=ts, thread_ts=thread)
    assert late.response.status_code == 200
    note = (await eventually(lambda: h.fake.state.ephemerals, what="the late note"))[0]
    assert "no longer waiting" in note.text
    assert not (target / "ran").exists()



async def test_no_answer_in_time_is_denied_and_the_buttons_go(make_slack, tmp_path: Path) -> None:
    h = await make_slack(gateway={"approval_timeout": 0.5})
    target = tmp_path / "disk"
    target.mkdir()
    ts, _approval, thread, _ = await ask(h, target)
    request = [m for m in h.fake.state.posted("C0OPS", thread) if m.ts == ts][0]
    await eventually(lambda: "no answer in time" in request.text, what="the request timed out")
    assert not any(b["type"] == "actions" for b in request.blocks or [])
    assert not (target / "ran").exists()
