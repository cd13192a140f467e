"""The terminal tool against real subprocesses, unsandboxed and (where bubblewrap works) in
the sandbox: both must keep the same limits, output handling and approval rules."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.tools.sandbox_helpers import require_sandbox
from vigil.tools.base import ToolContext
from vigil.tools.terminal import CappedOutput
from vigil.testing.waiting import eventually


@pytest.fixture(params=["never", "always"], ids=["plain", "sandboxed"])
def sandbox_mode(request: pytest.FixtureRequest) -> str:
    if request.param == "always":
        require_sandbox()
    return request.param


MakeCtx = Callable[..., ToolContext]


@pytest.fixture
def make_ctx(make_ctx: MakeCtx, sandbox_mode: str) -> MakeCtx:
    """The shared ``make_ctx`` with ``tools.terminal.sandbox`` set to this run's mode."""

    def make(**overrides: Any) -> ToolContext:
        ctx = make_ctx(**overrides)
        ctx.settings.tools.terminal.sandbox = sandbox_mode  # type: ignore[assignment]
        return ctx

    return make


@pytest.fixture
def ctx(make_ctx: MakeCtx) -> ToolContext:
    return make_ctx()

# Matches the danger patterns (mkfs) but only calls a shell function defined right there, so
# running it for real is harmless; the marker file shows whether it ran.
DANGEROUS_BUT_HARMLESS = "mkfs.vigiltest() { touch ran.marker; }; mkfs.vigiltest /dev/null"


class Approver:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, tool: str, what: str) -> bool:
        self.asked.append((tool, what))
        return self.answer


async def test_runs_a_command_and_reports_exit_code(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "terminal", command="echo hello")
    assert not result.is_error
    assert result.content == "exit code: 0\nhello"


async def test_nonzero_exit_is_reported_not_raised(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "terminal", command="echo failing; exit 3")
    assert result.content.startswith("exit code: 3\n")
    assert "failing" in result.content
    assert not result.is_error  # the command ran; the exit code tells the model how it went


async def test_stdout_and_stderr_are_combined(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "terminal", command="echo out; echo err >&2")
    assert "out" in result.content and "err" in result.content


async def test_no_output(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "terminal", command="true")
    assert result.content == "exit code: 0\n(no output)"


async def test_runs_in_ctx_cwd_by_default(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "terminal", command="pwd")
    assert result.content.splitlines()[1] == str(ctx.cwd.resolve())


async def test_workdir_relative_to_cwd(ctx: ToolContext, call_tool) -> None:
    (ctx.cwd / "sub").mkdir()
    result = await call_tool(ctx, "terminal", command="pwd", workdir="sub")
    assert result.content.splitlines()[1] == str((ctx.cwd / "sub").resolve())


async def test_missing_workdir_is_an_error(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "terminal", command="pwd", workdir="nope")
    assert result.is_error
    assert "does not exist" in result.content


async def test_empty_command_is_an_error(ctx: ToolContext, call_tool) -> None:
    result = await call_tool(ctx, "terminal", command="   ")
    assert result.is_error and "empty" in result.content


async def test_timeout_kills_the_whole_process_group(ctx: ToolContext, call_tool) -> None:
    # The background child would leave a marker after a second unless it is killed too.
    command = "(sleep 1; touch late.marker) & echo started; sleep 30"
    start = time.monotonic()
    result = await call_tool(ctx, "terminal", command=command, timeout=0.5)
    elapsed = time.monotonic() - start
    assert result.is_error
    assert "timed out after 0.5s" in result.content
    assert "started" in result.content  # output so far is kept
    assert elapsed < 5
    # the child is gone, not merely late: no process of the command is left to write the marker
    await eventually(lambda: not _processes_naming("late.marker"), what="the background child killed")
    assert not (ctx.cwd / "late.marker").exists()


async def test_configured_timeout_caps_the_requested_one(make_ctx, call_tool) -> None:
    ctx = make_ctx()
    ctx.settings.tools.terminal.timeout = 0.5
    start = time.monotonic()
    result = await call_tool(ctx, "terminal", command="sleep 30", timeout=100)
    assert result.is_error and "timed out after 0.5s" in result.content
    assert time.monotonic() - start < 5


async def test_output_is_capped_keeping_head_and_tail(make_ctx, call_tool) -> None:
    ctx = make_ctx()
    ctx.settings.tools.terminal.output_cap = 256
    result = await call_tool(ctx, "terminal", command="seq 1 2000")
    body = result.content.split("\n", 1)[1]
    assert body.startswith("1\n2\n3\n")
    assert body.endswith("1999\n2000")
    assert re.search(r"\[\.\.\. \d+ characters omitted \.\.\.\]", body)
    assert len(body) < 256 + 60


async def test_huge_output_counts_what_was_dropped(make_ctx, call_tool) -> None:
    ctx = make_ctx()
    ctx.settings.tools.terminal.output_cap = 256
    result = await call_tool(ctx, "terminal", command="seq 1 200000")
    total = sum(len(str(i)) + 1 for i in range(1, 200001))
    omitted = int(re.search(r"\[\.\.\. (\d+) characters omitted", result.content).group(1))
    assert omitted == total - 256
    assert result.content.endswith("199999\n200000")


async def test_background_process_holding_output_does_not_hang(ctx: ToolContext, call_tool, sandbox_mode) -> None:
    if sandbox_mode != "never":
        pytest.skip("in the sandbox background processes end with the command (tests/tools/test_sandbox.py)")
    start = time.monotonic()
    result = await call_tool(ctx, "terminal", command="sleep 2 & echo started")
    assert time.monotonic() - start < 1.9
    assert result.content.startswith("exit code: 0\nstarted")
    assert "background processes" in result.content
    await asyncio.sleep(2)  # let the background sleep end while this test's loop still runs


async def test_dangerous_command_runs_when_approved(make_ctx, call_tool) -> None:
    approver = Approver(True)
    ctx = make_ctx(approve=approver)
    result = await call_tool(ctx, "terminal", command=DANGEROUS_BUT_HARMLESS)
    assert not result.is_error, result.content
    assert (ctx.cwd / "ran.marker").exists()
    [(tool, what)] = approver.asked
    assert tool == "terminal"
    assert "formats a filesystem" in what and DANGEROUS_BUT_HARMLESS in what


async def test_dangerous_command_does_not_run_when_declined(make_ctx, call_tool) -> None:
    approver = Approver(False)
    ctx = make_ctx(approve=approver)
    result = await call_tool(ctx, "terminal", command=DANGEROUS_BUT_HARMLESS)
    assert result.is_error
    assert "the user declined" in result.content
    assert len(approver.asked) == 1
    assert not (ctx.cwd / "ran.marker").exists()


async def test_dangerous_command_refused_without_an_approver(ctx: ToolContext, call_tool) -> None:
    assert ctx.approve is None
    result = await call_tool(ctx, "terminal", command=DANGEROUS_BUT_HARMLESS)
    assert result.is_error
    assert "refused" in result.content and "approv" in result.content
    assert not (ctx.cwd / "ran.marker").exists()


async def test_ordinary_command_does_not_ask(make_ctx, call_tool) -> None:
    approver = Approver(False)
    ctx = make_ctx(approve=approver)
    result = await call_tool(ctx, "terminal", command="mkdir -p build && rm -rf ./build && echo ok")
    assert result.content == "exit code: 0\nok"
    assert approver.asked == []


def test_capped_output_decodes_characters_split_across_chunks() -> None:
    out = CappedOutput(100)
    data = "héllo wörld €".encode()
    for i in range(len(data)):
        out.feed(data[i : i + 1])
    assert out.text() == "héllo wörld €"


async def test_model_keys_do_not_reach_commands(monkeypatch, make_ctx) -> None:
    from vigil.config.settings import ModelSettings, Settings
    from vigil.store.records import ToolCall
    from vigil.tools.registry import run_tool_call

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-custom-secret")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    ctx = make_ctx(settings=Settings(model=ModelSettings(api_key_env="MY_GATEWAY_KEY")))
    call = ToolCall("c1", "terminal", '{"command": "env"}')
    result = await run_tool_call(call, ctx, ["terminal"])
    assert "visible" in result.content
    assert "sk-openai-secret" not in result.content and "sk-custom-secret" not in result.content


def _processes_naming(text: str) -> list[int]:
    """Pids of the processes whose command line holds ``text`` (this test's own aside)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue  # ended meanwhile
    return found
