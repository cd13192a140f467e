"""Files both ways: one shared with the app is saved (size-capped) into the conversation's
working directory and read by the agent; an outbox ``file`` is uploaded into the thread."""

from __future__ import annotations

from tests.gateway.adapters.slack.conftest import ALICE, SlackHarness, eventually
from vigil.testing.scripting import Reply, ToolCallSpec


async def test_a_shared_file_is_saved_and_read_by_the_agent(slack: SlackHarness) -> None:
    slack.model.queue(Reply.tool_calls(ToolCallSpec("read_file", {"path": "plan.txt"})), "The plan is to ship on Friday.")
    shared = slack.fake.share_file("plan.txt", b"ship on friday\nnot before\n")
    sent = await slack.sender.message("D0ALICE", ALICE, "what does this say?", files=[shared])
    assert sent.response.status_code == 200
    entry = slack.stored(sent.event_id)
    assert entry is not None and "what does this say?" in entry.text and "plan.txt" in entry.text
    assert await eventually(lambda: slack.answers("D0ALICE"), what="the answer") == ["The plan is to ship on Friday."]
    first, second = slack.model.requests[:2]
    assert "plan.txt" in first.last_user_text
    tool_results = [m for m in second.body["messages"] if m.get("role") == "tool"]
    assert tool_results and "ship on friday" in tool_results[0]["content"]
    workdir = slack.gateway.workdir(slack.gateway.store.gateway.route_get(entry.route))
    assert (workdir / "plan.txt").read_bytes() == b"ship on friday\nnot before\n"


async def test_a_file_over_the_cap_is_not_saved_and_the_agent_is_told(make_slack) -> None:
    h = await make_slack(gateway={"upload_max_bytes": 1024})
    big = h.fake.share_file("dump.bin", b"x" * 5000)
    big["size"] = 10  # Slack's size may be wrong: the cap holds while streaming all the same
    sent = await h.sender.message("D0ALICE", ALICE, "", files=[big])
    entry = h.stored(sent.event_id)
    assert entry is not None and "not saved" in entry.text and "1024 bytes" in entry.text
    workdir = h.gateway.workdir(h.gateway.store.gateway.route_get(entry.route))
    assert list(workdir.iterdir()) == []  # the partial download was removed


async def test_a_file_the_agent_sends_is_uploaded_into_the_thread(slack: SlackHarness) -> None:
    slack.model.queue("hi")
    mention = await slack.sender.mention("C0OPS", ALICE, "hello")
    await eventually(lambda: slack.answers("C0OPS", mention.ts), what="the answer")
    entry = slack.stored(mention.event_id)
    assert entry is not None and entry.session_id is not None
    (slack.gateway.workdir(entry.session_id) / "report.md").write_text("# Report\nall good\n")
    slack.model.queue(Reply.tool_calls(ToolCallSpec("send_file", {"path": "report.md", "caption": "Here is **the** report"})),
                      "sent it")
    await slack.sender.message("C0OPS", ALICE, "send me the report", thread_ts=mention.ts)
    uploads = await eventually(lambda: [u for u in slack.fake.state.uploads.values() if u.channel], what="the upload")
    assert uploads[0].data == b"# Report\nall good\n" and uploads[0].filename == "report.md"
    assert uploads[0].thread_ts == mention.ts and uploads[0].initial_comment == "Here is *the* report"
    assert await eventually(lambda: "sent it" in slack.answers("C0OPS", mention.ts), what="the answer")
