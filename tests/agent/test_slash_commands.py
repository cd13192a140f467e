"""Slash commands that act on the agent, through the same controller every front end uses."""

from __future__ import annotations

import json

from tests.agent.conftest import AgentFactory
from tests.cli.helpers import run_cli
from vigil.agent.compression import SUMMARY_REQUEST_MARKER
from vigil.runtime.controller import ConversationController
from vigil.testing.fake_model import FakeModelServer


async def test_compress_command_moves_the_conversation(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    controller = ConversationController(await make_agent())
    assert (await controller.command("/compress")).is_error
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply="Goal: test. Decisions: none. Progress: some.")
    for i in range(4):
        fake_model.queue(f"answer {i}")
        await controller.turn(f"question {i}")
    before = controller.session_id
    reply = await controller.command("/compress")
    assert not reply.is_error and "continues in" in reply.text
    assert controller.session_id != before
    assert controller.store.get_session(before).end_reason == "compression"
    fake_model.queue("after compression")
    result = await controller.turn("next")
    assert result.session_id == controller.session_id and result.answer == "after compression"
    assert "Goal: test." in str(fake_model.last_request.body)
    conversations = json.loads(run_cli("sessions", "list", "--json").output)
    assert [(c["id"], c["conversation_root"], c["segments"]) for c in conversations] == [
        (controller.session_id, before, 2)
    ]


async def test_cron_command_and_heartbeat_turns_keep_the_title(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    controller = ConversationController(await make_agent())
    listed = await controller.command("/cron list")
    assert not listed.is_error
    added = await controller.command('/cron add report "every 2h" write the report')
    assert "report" in (await controller.command("/cron list")).text, added.text
    fake_model.queue("beat")
    await controller.turn("[Heartbeat — recurring instruction, fires every 15m]\ncheck CI", auto_title=False)
    assert controller.store.get_session(controller.session_id).title is None
    fake_model.queue("hello")
    await controller.turn("Plan the release")
    assert controller.store.get_session(controller.session_id).title == "Plan the release"
