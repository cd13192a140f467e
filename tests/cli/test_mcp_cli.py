"""``vigil mcp add/list/test/remove`` and ``vigil doctor`` against real MCP servers, and the
acceptance run: a server added on the command line answers a one-shot chat's tool call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.helpers import is_clear_error, run_cli, run_vigil
from tests.tools.mcp_helpers import TIME_SERVER
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec


def config_text(home: Path) -> str:
    path = home / "config.yaml"
    return path.read_text() if path.exists() else ""


def test_a_server_is_added_listed_tried_and_removed(vigil_home: Path) -> None:
    added = run_cli("mcp", "add", "time", "--unattended", "--json", "--", TIME_SERVER, "--local-timezone", "UTC")
    assert added.exit_code == 0, added.output
    assert json.loads(added.output)["entry"] == {
        "command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "unattended": True,
    }
    assert "--local-timezone" in config_text(vigil_home)

    listed = run_cli("mcp", "list", "--json")
    assert listed.exit_code == 0, listed.output
    (server,) = json.loads(listed.output)["servers"]
    assert server["state"] == "ok" and server["unattended"] is True and server["trusted"] is False
    tools = {tool["name"]: tool for tool in server["tools"]}
    assert tools["get_current_time"] == {
        "name": "get_current_time",
        "model_name": "mcp__time__get_current_time",
        "description": "Get current time in a specific timezone",
    }

    tried = run_cli("mcp", "test", "time")
    assert tried.exit_code == 0, tried.output
    assert re.search(r"^time — ok, 2 tool\(s\) \(started in [0-9.]+ s", tried.output, re.M)
    assert re.search(r"^  get_current_time +Get current time in a specific timezone$", tried.output, re.M)

    removed = run_cli("mcp", "remove", "time")
    assert removed.exit_code == 0, removed.output
    assert "mcp" not in config_text(vigil_home)
    assert run_cli("mcp", "list").output.startswith("No MCP servers are configured.")
    assert json.loads(run_cli("mcp", "list", "--json").output) == {"servers": []}


def test_an_http_server_is_added_with_its_secret_left_in_the_environment(vigil_home: Path) -> None:
    added = run_cli(
        "mcp", "add", "github", "--url", "https://api.example.com/mcp/",
        "--header", "Authorization: Bearer ${GITHUB_TOKEN}", "--header", "X-Team: core",
    )
    assert added.exit_code == 0, added.output
    text = config_text(vigil_home)
    assert "Bearer ${GITHUB_TOKEN}" in text and "X-Team: core" in text
    tried = run_cli("mcp", "test", "github", "--json")
    assert is_clear_error(tried)
    assert json.loads(tried.output)["error"]["message"] == (
        "the MCP server 'github' did not start: the environment variable GITHUB_TOKEN is not set "
        "(used in mcp.servers.github.headers.Authorization)"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["a__b", "--", "x"], "'a__b' is not a server name"),
        (["-x-", "--", "x"], "No such option"),
        (["time"], "give the command that starts the server after --"),
        (["time", "--url", "ftp://example.com"], "is not an http:// or https:// URL"),
        (["time", "--url", "https://h.example/mcp", "--", "x"], "either --url or a command"),
        (["time", "--url", "https://h.example/mcp", "--env", "A=b"], "--env and --no-sandbox are for a server vigil starts"),
        (["time", "--header", "X-A: b", "--", "x"], "--header is for an HTTP server"),
        (["gh", "--url", "https://h.example/mcp", "--header", "Authorization: Bearer ghp_123"],
         "write it as Bearer ${GH_TOKEN}"),
        (["gh", "--url", "https://h.example/mcp", "--header", "no colon here"], "write 'Name: value'"),
        (["gh", "--url", "https://u:pw@h.example/mcp"], "the URL holds a password"),
        (["gh", "--env", "GITHUB_TOKEN=ghp_123", "--", "x"], "or pass --env GITHUB_TOKEN alone"),
        (["gh", "--env", "1A=b", "--", "x"], "write KEY=VALUE"),
        (["gh", "--env", "A=${oops", "--", "x"], "is not a variable reference"),
        (["gh", "--", "x", "line\nbreak"], "must be one line of text each"),
    ],
)
def test_add_refuses_what_it_cannot_write_in_one_clear_line_and_changes_nothing(
    vigil_home: Path, args: list[str], says: str
) -> None:
    before = config_text(vigil_home)
    result = run_cli("mcp", "add", *args)
    assert is_clear_error(result), result.output
    assert says in result.output
    assert config_text(vigil_home) == before


def test_unknown_or_duplicate_servers_and_one_that_does_not_start_are_clear_errors(vigil_home: Path) -> None:
    assert run_cli("mcp", "add", "gone", "--", "/nonexistent/mcp-server").exit_code == 0
    duplicate = run_cli("mcp", "add", "gone", "--json", "--", "/bin/true")
    assert is_clear_error(duplicate) and json.loads(duplicate.output)["error"]["kind"] == "refused"
    for command in (["test", "nope"], ["remove", "nope"]):
        result = run_cli("mcp", *command, "--json")
        assert is_clear_error(result)
        assert json.loads(result.output)["error"] == {
            "kind": "not_found", "message": "no MCP server named 'nope' is configured (configured: gone)",
        }
    failed = run_cli("mcp", "test", "gone")
    assert is_clear_error(failed)
    assert "Error: the MCP server 'gone' did not start: the program /nonexistent/mcp-server was not found" in failed.output


def test_doctor_checks_each_configured_server(vigil_home: Path) -> None:
    assert run_cli("mcp", "add", "time", "--", TIME_SERVER).exit_code == 0
    assert run_cli("mcp", "add", "gone", "--", "/nonexistent/mcp-server").exit_code == 0
    report = json.loads(run_cli("doctor", "--json").output)
    checks = {c["name"]: c for c in report["checks"] if c["area"] == "mcp"}
    assert checks["time"]["status"] == "ok" and checks["time"]["detail"].startswith("2 tool(s), started in ")
    assert checks["gone"]["status"] == "problem"
    assert checks["gone"]["detail"] == "does not start: the program /nonexistent/mcp-server was not found"
    assert checks["gone"]["fix"].startswith("vigil mcp test gone")


def test_acceptance_a_one_shot_chat_calls_the_real_time_server_and_an_older_session_does_not_see_it(
    fake_model: FakeModelServer, vigil_home: Path
) -> None:
    env = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": fake_model.api_key}
    fake_model.queue("Hello.")
    before = run_vigil("chat", "-q", "hello", home=vigil_home, env=env)
    assert before.returncode == 0, before.stderr
    old_session = re.search(r"session (\S+)", before.stderr).group(1)  # type: ignore[union-attr]

    added = run_cli("mcp", "add", "time", "--unattended", "--", TIME_SERVER, "--local-timezone", "UTC")
    assert added.exit_code == 0, added.output
    listed = run_cli("mcp", "list")
    assert re.search(r"^  get_current_time +Get current time in a specific timezone$", listed.output, re.M)

    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("mcp__time__get_current_time", {"timezone": "Asia/Tokyo"})),
        "It is evening in Tokyo.",
    )
    asked = run_vigil("chat", "-q", "What time is it in Tokyo?", home=vigil_home, env=env)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == "It is evening in Tokyo."
    answer = [m for m in fake_model.requests[-1].body["messages"] if m["role"] == "tool"]
    assert json.loads(answer[0]["content"])["timezone"] == "Asia/Tokyo"

    fake_model.queue("No tools of that kind here.")
    resumed = run_vigil("chat", "-q", "and now?", "-r", old_session, home=vigil_home, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "mcp__" not in json.dumps(fake_model.requests[-1].body.get("tools", []))
