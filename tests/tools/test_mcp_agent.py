"""MCP tools in agent turns, against real MCP servers: ``mcp-server-time`` from PyPI, a stdio
server built with the SDK whose tools misbehave on purpose, and a streamable HTTP server.
The model is the fake model server over real HTTP; every turn goes through the real agent."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest

from tests.tools.mcp_helpers import HttpServer, flaky_entry, time_entry
from tests.tools.sandbox_helpers import require_sandbox
from vigil.agent.turn import Agent
from vigil.config.settings import Settings
from vigil.models.factory import build_client
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.tools.mcp import pool

MakeAgent = Callable[..., Awaitable[Agent]]


def settings_for(server: FakeModelServer, servers: dict[str, Any] | None = None, **mcp: Any) -> Settings:
    data: dict[str, Any] = {
        "model": {"provider": "openai", "name": "fake-model", "base_url": server.base_url,
                  "api_key": server.api_key, "timeout": 10},
    }
    if servers is not None:
        data["mcp"] = {"servers": servers, **mcp}
    return Settings.from_data(data)


@pytest.fixture
async def make_agent(fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path) -> AsyncIterator[MakeAgent]:
    """Agents of one profile sharing its store; every MCP server they start is stopped after."""
    profile = Profile("default", vigil_home).ensure()
    store = SQLiteStore(profile.state_db)
    agents: list[Agent] = []
    work = tmp_path / "work"
    work.mkdir()

    async def make(settings: Settings, approve: Any = None) -> Agent:
        client = await build_client(settings.model, {})
        agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=work, approve=approve)
        agents.append(agent)
        return agent

    yield make
    await pool.close_all()
    for agent in agents:
        await agent.client.aclose()
    store.close()


def tool_results(server: FakeModelServer) -> list[str]:
    """The tool results the model was sent in the last request."""
    body = server.requests[-1].body
    return [str(m["content"]) for m in body["messages"] if m.get("role") == "tool"]


def tools_bytes(request: Any) -> str:
    return json.dumps(request.body.get("tools", []))


def call(tool: str, /, **args: Any) -> ToolCallSpec:
    return ToolCallSpec(tool, args)


async def test_a_turn_calls_the_real_time_server_and_the_session_keeps_its_tools_byte_for_byte(
    make_agent: MakeAgent, fake_model: FakeModelServer
) -> None:
    before = await make_agent(settings_for(fake_model))
    old = await before.new_session()

    agent = await make_agent(settings_for(fake_model, {"time": time_entry(unattended=True)}))
    session = await agent.new_session()
    assert "mcp__time__get_current_time" in session.tool_names
    assert "mcp__time__get_current_time" not in old.tool_names

    fake_model.queue(Reply.tool_calls(call("mcp__time__get_current_time", timezone="Europe/Berlin")), "It is late.")
    result = await agent.run_turn(session.id, "What time is it in Berlin?", unattended=True)
    assert result.answer == "It is late."
    (answer,) = tool_results(fake_model)
    assert json.loads(answer)["timezone"] == "Europe/Berlin" and "T" in json.loads(answer)["datetime"]
    first = fake_model.requests[0]
    described = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert described["mcp__time__get_current_time"]["description"] == "Get current time in a specific timezone"
    assert described["mcp__time__get_current_time"]["parameters"]["required"] == ["timezone"]

    # A session started before the server was added does not see its tools, now either.
    fake_model.queue("no tools here")
    await agent.run_turn(old.id, "hello", unattended=True)
    assert "mcp__" not in tools_bytes(fake_model.requests[-1])

    # The server removed from config.yaml: the session keeps its tools, byte for byte; calls fail
    # cleanly and the turn goes on; new sessions do not get them.
    removed = await make_agent(settings_for(fake_model, {}))
    fake_model.queue(Reply.tool_calls(call("mcp__time__get_current_time", timezone="UTC")), "Could not tell.")
    result = await removed.run_turn(session.id, "And now?", unattended=True)
    assert result.answer == "Could not tell."
    assert "no longer configured" in tool_results(fake_model)[-1]
    requests = fake_model.requests
    assert len(requests) == 5  # two model calls per turn of the session, one for the old session
    assert {tools_bytes(requests[i]) for i in (0, 1, 3, 4)} == {tools_bytes(first)}
    assert not any(name.startswith("mcp__") for name in (await removed.new_session()).tool_names)

    # Its compression continuation keeps them too.
    fake_model.queue("Summary: the user asked for the time in Berlin.")
    compressed = await removed.compress(session.id)
    assert compressed.ok and compressed.child_id is not None, compressed.failure
    fake_model.queue("Still here.")
    await removed.run_turn(compressed.child_id, "and then?", unattended=True)
    assert tools_bytes(fake_model.requests[-1]) == tools_bytes(first)


async def test_a_crashing_hanging_or_failing_server_is_a_clear_tool_error_and_the_turn_goes_on(
    make_agent: MakeAgent, fake_model: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    agent = await make_agent(
        settings_for(fake_model, {"flaky": flaky_entry(unattended=True, sandbox=False)}, call_timeout=2)
    )
    session = await agent.new_session()
    fake_model.queue(
        Reply.tool_calls(
            call("mcp__flaky__crash"),
            call("mcp__flaky__echo", text="back again"),
            call("mcp__flaky__hang"),
            call("mcp__flaky__echo", text="and again"),
            call("mcp__flaky__fail"),
            call("mcp__flaky__picture"),
            call("mcp__flaky__echo", text=5),
        ),
        "Survived.",
    )
    with caplog.at_level(logging.WARNING, logger="vigil.tools.mcp"):
        result = await agent.run_turn(session.id, "Try everything", unattended=True)
    assert result.answer == "Survived." and result.tool_calls == 7
    crashed, echoed, hung, echoed_again, failed, picture, wrong = tool_results(fake_model)
    assert "the MCP server 'flaky' failed during the call of crash: it stopped: flaky: crashing on purpose" in crashed
    assert echoed == "back again" and echoed_again == "and again"  # started again for the next call
    assert "it did not answer within 2 s" in hung
    assert "the disk is on fire" in failed
    assert picture.startswith("[image (image/png, 100 bytes) returned by the tool")
    assert "text" in wrong  # the server's own argument check, as a tool error
    errors = [m for m in fake_model.requests[-1].body["messages"] if m.get("role") == "tool"]
    assert len(errors) == 7
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "MCP server flaky: it stopped" in logged and "did not answer within 2 s" in logged


async def test_a_pinned_session_whose_server_is_down_keeps_its_tools_and_calls_fail_cleanly(
    make_agent: MakeAgent, fake_model: FakeModelServer
) -> None:
    agent = await make_agent(settings_for(fake_model, {"flaky": flaky_entry(unattended=True, sandbox=False)}))
    session = await agent.new_session()
    fake_model.queue("hello")
    await agent.run_turn(session.id, "hi", unattended=True)
    pinned = tools_bytes(fake_model.requests[-1])

    missing = flaky_entry(unattended=True, sandbox=False) | {"command": "/nonexistent/mcp-flaky"}
    down = await make_agent(settings_for(fake_model, {"flaky": missing}))
    fake_model.queue(Reply.tool_calls(call("mcp__flaky__echo", text="x")), "It is down.")
    result = await down.run_turn(session.id, "echo x", unattended=True)
    assert result.answer == "It is down."
    assert tools_bytes(fake_model.requests[-1]) == pinned
    assert tool_results(fake_model)[-1] == (
        "the MCP server 'flaky' is unavailable: the program /nonexistent/mcp-flaky was not found; echo was not called"
    )
    # A new session leaves the server out (it cannot be asked for its tools) and still starts.
    fresh = await down.new_session()
    assert not any(name.startswith("mcp__") for name in fresh.tool_names)


async def test_attended_runs_ask_once_per_tool_and_unattended_runs_call_only_unattended_servers(
    make_agent: MakeAgent, fake_model: FakeModelServer
) -> None:
    asked: list[tuple[str, str]] = []
    answers = [True, False, True]

    async def approve(tool: str, what: str) -> bool:
        asked.append((tool, what))
        return answers.pop(0)

    agent = await make_agent(settings_for(fake_model, {"flaky": flaky_entry(sandbox=False)}), approve=approve)
    session = await agent.new_session()
    fake_model.queue(
        Reply.tool_calls(
            call("mcp__flaky__echo", text="one"),
            call("mcp__flaky__echo", text="two"),
            call("mcp__flaky__env", name="HOME"),
            call("mcp__flaky__env", name="HOME"),
        ),
        "done",
    )
    await agent.run_turn(session.id, "go")
    one, two, declined, allowed = tool_results(fake_model)
    assert (one, two) == ("one", "two")
    assert declined.startswith("the user declined: call env of the MCP server 'flaky'")
    assert allowed != declined and not allowed.startswith("the user declined")
    assert [tool for tool, _ in asked] == ["mcp__flaky__echo", "mcp__flaky__env", "mcp__flaky__env"]
    assert 'with {"text": "one"}' in asked[0][1]

    # A heartbeat (unattended) turn may not call a server added without --unattended.
    fake_model.queue(Reply.tool_calls(call("mcp__flaky__echo", text="three")), "refused")
    await agent.run_turn(session.id, "again", unattended=True)
    assert "it was not added with --unattended" in tool_results(fake_model)[-1]
    assert len(asked) == 3

    # A trusted server is never asked about.
    agent.settings = settings_for(fake_model, {"flaky": flaky_entry(sandbox=False, trusted=True)})
    other = await agent.new_session()
    fake_model.queue(Reply.tool_calls(call("mcp__flaky__echo", text="four")), "ok")
    await agent.run_turn(other.id, "trusted")
    assert tool_results(fake_model)[-1] == "four" and len(asked) == 3


async def test_a_streamable_http_server_gets_its_bearer_token_from_the_environment(
    make_agent: MakeAgent, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with HttpServer("s3cret-token") as http:
        entry = {"url": http.url, "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}, "unattended": True}
        agent = await make_agent(settings_for(fake_model, {"notes": entry}))
        with caplog.at_level(logging.WARNING, logger="vigil.tools.mcp"):
            without = await agent.new_session()
        assert not any(name.startswith("mcp__") for name in without.tool_names)
        assert "the environment variable NOTES_TOKEN is not set" in caplog.text

        monkeypatch.setenv("NOTES_TOKEN", "s3cret-token")
        await pool.close_all()  # forgets the failed start, as a new process would
        session = await agent.new_session()
        assert "mcp__notes__add_note" in session.tool_names
        fake_model.queue(Reply.tool_calls(call("mcp__notes__add_note", text="buy milk")), "Noted.")
        await agent.run_turn(session.id, "remember milk", unattended=True)
        assert tool_results(fake_model) == ["kept: buy milk"]
        assert http.refused == 0
        described = {t["function"]["name"]: t["function"] for t in fake_model.requests[-1].body["tools"]}
        assert described["mcp__notes__add_note"]["description"].startswith("Keep a note.")
        assert "s3cret" not in json.dumps(agent.store.get_session(session.id).model_config)


async def test_a_stdio_server_runs_in_the_sandbox_with_only_the_variables_it_was_given(
    make_agent: MakeAgent, fake_model: FakeModelServer, vigil_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_sandbox()
    monkeypatch.setenv("VIGIL_TEST_SECRET", "do-not-pass")
    monkeypatch.setenv("FLAVOR_SOURCE", "vanilla")
    entry = flaky_entry(unattended=True, env={"FLAVOR": "${FLAVOR_SOURCE}"})
    agent = await make_agent(settings_for(fake_model, {"flaky": entry}))
    (vigil_home / "config.yaml").write_text("# the profile's own settings\n")
    session = await agent.new_session()
    fake_model.queue(
        Reply.tool_calls(
            call("mcp__flaky__read", path=str(vigil_home / "config.yaml")),
            call("mcp__flaky__env", name="VIGIL_TEST_SECRET"),
            call("mcp__flaky__env", name="FLAVOR"),
            call("mcp__flaky__env", name="XDG_CACHE_HOME"),
        ),
        "done",
    )
    await agent.run_turn(session.id, "look around", unattended=True)
    config, secret, flavor, cache = tool_results(fake_model)
    assert config.startswith("cannot read")
    assert secret == "<unset>" and flavor == "vanilla"
    assert cache == str(vigil_home / "workspaces" / "mcp-flaky" / ".cache")
