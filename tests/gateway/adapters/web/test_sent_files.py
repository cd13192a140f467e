"""The agent's `send_file` in the web chat: the page gets a download link, served only to a
logged-in caller, as an attachment, while the file is in the conversation's working directory;
a cron answer is announced on every open page."""

from __future__ import annotations

import asyncio

import httpx

from tests.gateway.conftest import eventually
from tests.gateway.adapters.web.test_contract import WebHarness, web_gateway  # noqa: F401  (fixture)
from vigil.store.gateway.gateway_tables import NewOutbound, RouteKey
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec


async def test_a_file_the_agent_sends_is_a_download_link_on_the_page(
    web_gateway: WebHarness, fake_model: FakeModelServer  # noqa: F811
) -> None:
    h = web_gateway
    workdir = h.run.gateway.workdir(h.session_id)
    (workdir / "report.html").write_text("<script>alert(1)</script>")
    page = h.adapter.state.pages.open(h.session_id)  # what an open page's event stream receives
    fake_model.queue(Reply.tool_calls(ToolCallSpec("send_file", {"path": "report.html", "caption": "your report"})),
                     "Sent it.")
    async with h.client() as client:
        posted = await client.post(f"/api/conversations/{h.session_id}/messages", json={"text": "send me the report",
                                                                                       "client_id": "m1"})
        assert posted.status_code == 202, posted.text

        async def file_event() -> dict:
            while True:
                event = await page.get()
                if event.get("type") == "reply" and event.get("kind") == "file":
                    return event

        event = await asyncio.wait_for(file_event(), 20)
        assert event["name"] == "report.html" and event["text"] == "your report" and event["size"] == 25
        url = event["url"]
        download = await client.get(url)
        assert download.status_code == 200 and download.text == "<script>alert(1)</script>"
        assert download.headers["content-type"] == "application/octet-stream"
        assert download.headers["content-disposition"].startswith("attachment;") and "report.html" in download.headers["content-disposition"]
        assert download.headers["x-content-type-options"] == "nosniff"

        async with httpx.AsyncClient(base_url=h.url) as stranger:
            assert (await stranger.get(url)).status_code == 401
        assert (await client.get("/api/files/999999")).status_code == 404
        (workdir / "report.html").unlink()
        gone = await client.get(url)
        assert gone.status_code == 410 and "no longer" in gone.json()["error"]


async def test_a_cron_answer_is_announced_on_every_open_page(web_gateway: WebHarness) -> None:  # noqa: F811
    h = web_gateway
    page = h.adapter.state.pages.open(h.session_id)
    cron_session = h.run.gateway.store.create_session(source="cron", tool_names=())
    h.run.gateway.store.gateway.outbox_add(NewOutbound(
        RouteKey("web", cron_session.id), "Weekly summary: all green.", kind="cron", session_id=cron_session.id,
        meta={"cron_job": "weekly", "cron_run": "20260302T080000Z"}), now=0.0)
    h.run.gateway.outbox.wake()
    event = await asyncio.wait_for(page.get(), 20)
    assert (event["type"], event["kind"], event["job"], event["session_id"]) == (
        "reply", "cron", "weekly", cron_session.id)
    await eventually(lambda: h.run.gateway.store.gateway.outbox_counts()["sent"] >= 1, what="sent")
