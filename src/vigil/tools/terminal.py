"""The ``terminal`` tool: run a shell command and report its exit code and output."""

from __future__ import annotations

import asyncio
import codecs
import os
import shutil
import signal
from pathlib import Path
from typing import Any

from vigil.tools.boundary import tool_boundary
from vigil.tools.sandbox import Sandbox, Unavailable, for_run
from vigil.tools.base import (
    Tool,
    ToolContext,
    ToolFailure,
    ToolResult,
    request_approval,
    truncate_middle,
)

# After the shell exits, background children may still hold the output pipe open; wait this
# long for them to let go before reporting without them (they keep running).
_DRAIN_GRACE = 1.0
_POLL = 0.1
_CHUNK = 65536
_DRAINING: set[asyncio.Task[None]] = set()
_READ_ONLY = "Read-only file system"  # strerror(EROFS), as most programs print it


class CappedOutput:
    """Collects decoded output, keeping only the first and the last ``cap`` characters.

    Memory stays bounded however much a command prints, and the final text keeps both the
    beginning (what ran) and the end (how it finished), which is where the signal usually is.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total = 0
        self._head = ""
        self._tail = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final=final)
        if not text:
            return
        self.total += len(text)
        room = self.cap - len(self._head)
        if room > 0:
            self._head += text[:room]
            text = text[room:]
        if text:
            self._tail = (self._tail + text)[-self.cap :]

    def text(self) -> str:
        """Everything collected, cut in the middle to about ``cap`` characters if longer."""
        self.feed(b"", final=True)
        if self.total == len(self._head) + len(self._tail):
            return truncate_middle(self._head + self._tail, self.cap)
        head = self._head[: self.cap // 2]
        tail = self._tail[len(self._tail) - (self.cap - len(head)) :]
        omitted = self.total - len(head) - len(tail)
        return f"{head}\n[... {omitted} characters omitted ...]\n{tail}"


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


class TerminalTool(Tool):
    name = "terminal"
    description = (
        "Run a shell command (bash when available) and return its exit code and combined stdout/stderr. "
        "Runs in the session's working directory unless `workdir` is given; stdin is empty, so "
        "interactive programs must be driven with flags. Long output is cut in the middle. "
        "Commands run in a sandbox: only the working directory and a private /tmp are writable, "
        "vigil's own files and the user's secrets are hidden, and the machine's own local services "
        "are out of reach. Running a command outside it (a dangerous one, or one the sandbox "
        "blocked) needs the user's approval; in scheduled runs nothing leaves the sandbox."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command line to run."},
            "workdir": {
                "type": "string",
                "description": "Directory to run in (relative to the working directory).",
            },
            "timeout": {
                "type": "number",
                "description": "Seconds before the command is killed (capped by the configured limit).",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command: str = args["command"]
        if not command.strip():
            raise ToolFailure("the command is empty")
        workdir = ctx.resolve(args["workdir"]) if args.get("workdir") else ctx.cwd
        if not workdir.is_dir():
            raise ToolFailure(f"working directory {workdir} does not exist or is not a directory")
        limit = ctx.settings.tools.terminal.timeout
        requested = args.get("timeout")
        timeout = min(float(requested), limit) if requested and requested > 0 else limit

        from vigil.tools import danger  # the command parser: loaded when a command runs

        reason = danger.check(command)
        settings = ctx.settings.tools.terminal
        try:
            boundary = tool_boundary(ctx)
        except ValueError as exc:
            raise ToolFailure(str(exc)) from None
        placement = for_run(settings, unattended=ctx.unattended, boundary=boundary, start_in=workdir)
        env = command_environment(ctx.settings.model.api_key_env)

        async def outside() -> ToolResult:
            return await run_command(command, workdir, timeout, settings.output_cap, env=env)

        if placement is None:  # tools.terminal.sandbox does not ask for one in this run
            if reason and (refusal := await request_approval(ctx, self.name, f"run a command that {reason}: {command}")):
                return refusal
            return await outside()
        if isinstance(placement, Unavailable):
            if ctx.unattended:
                return ToolResult(
                    f"refused: commands of unattended runs only run in the sandbox, and it is not available "
                    f"({placement.why}); nothing ran. The user can install bubblewrap, or set "
                    "tools.terminal.sandbox to never to run commands unsandboxed.",
                    is_error=True,
                )
            also = f", a command that {reason}" if reason else ""
            what = f"run outside the sandbox (it is not available: {placement.why}){also}: {command}"
            return await outside() if not (refusal := await request_approval(ctx, self.name, what)) else refusal
        if reason:
            # Approval is for leaving the sandbox: an approved dangerous command runs outside it.
            what = f"run a command that {reason}, outside the sandbox: {command}"
            return await outside() if not (refusal := await request_approval(ctx, self.name, what)) else refusal
        inside = await run_command(command, workdir, timeout, settings.output_cap, env=env, sandbox=placement)
        blocked = None if ctx.unattended else _blocked_by_sandbox(inside, placement)
        if blocked is None:
            return inside
        what = f"run outside the sandbox a command that failed inside it ({blocked}): {command}"
        if await request_approval(ctx, self.name, what):
            return ToolResult(f"{inside.content}\n[the user declined to run it outside the sandbox]", is_error=True)
        again = await outside()
        return ToolResult(
            f"first run, in the sandbox ({blocked}):\n{inside.content}\n\n"
            f"run again outside the sandbox, approved by the user:\n{again.content}",
            is_error=again.is_error,
        )


_SANDBOX_SIGNS = (
    (_READ_ONLY, "it writes outside its workspace"),
    ("Network is unreachable", "it needs a network the sandbox closes"),
    ("Connection refused", "it connects to a service the sandbox cannot reach"),
    ("Couldn't connect to server", "it connects to a service the sandbox cannot reach"),
    ("Could not resolve host", "it needs a network the sandbox closes"),
    ("Temporary failure in name resolution", "it needs a network the sandbox closes"),
)


def _blocked_by_sandbox(result: ToolResult, sandbox: Sandbox) -> str | None:
    """Why a command that failed in the sandbox may have failed because of it, or ``None``."""
    if not result.is_error and result.content.startswith("exit code: 0\n"):
        return None
    for sign, why in _SANDBOX_SIGNS:
        if sign in result.content:
            return why
    return None


MODEL_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def command_environment(extra_key_variable: str | None = None) -> dict[str, str]:
    """The environment commands run with: vigil's own model keys removed, so that a command
    like ``env`` cannot copy them into the stored conversation."""
    hidden = {*MODEL_KEY_VARIABLES, *([extra_key_variable] if extra_key_variable else [])}
    return {k: v for k, v in os.environ.items() if k not in hidden}


async def run_command(
    command: str,
    workdir: os.PathLike[str] | str,
    timeout: float,
    cap: int,
    *,
    env: dict[str, str] | None = None,
    sandbox: Sandbox | None = None,
) -> ToolResult:
    """Run ``command`` in its own process group (inside ``sandbox`` when given) and describe
    the outcome. Killing the group on a timeout kills bubblewrap, which takes the whole
    sandboxed process tree with it."""
    argv = [_shell(), "-c", command]
    if sandbox is not None:
        argv = sandbox.argv(argv)
    spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv,
        cwd=workdir,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group, so a timeout can kill every child
    ))
    try:
        proc = await asyncio.shield(spawn)
    except BaseException:
        # Stopped while the command was being started (a signal): it may run already, and
        # nothing else would stop it. Let the start finish, then kill its group.
        await asyncio.wait({spawn}, timeout=_DRAIN_GRACE)
        if spawn.done() and not spawn.cancelled() and spawn.exception() is None:
            started = spawn.result()
            _kill_group(started.pid)
            await asyncio.wait({asyncio.ensure_future(started.wait())}, timeout=_DRAIN_GRACE)
        raise
    assert proc.stdout is not None
    output = CappedOutput(cap)
    reader = asyncio.create_task(_pump(proc.stdout, output))
    timed_out = False
    try:
        await asyncio.wait_for(_exit_code(proc, reader), timeout)
    except asyncio.TimeoutError:
        timed_out = True
        _kill_group(proc.pid)
        await _exit_code(proc, reader)
    except BaseException:
        _kill_group(proc.pid)
        reader.cancel()
        # Reap it now: a process left to the garbage collector after the loop closes (the
        # command is being stopped by a signal) prints "Event loop is closed" tracebacks.
        await asyncio.wait({asyncio.ensure_future(proc.wait())}, timeout=_DRAIN_GRACE)
        if proc.returncode is None:
            # Still not reaped (a loaded machine): close the transport while the loop runs;
            # asyncio offers no public way to do this.
            transport = getattr(proc, "_transport", None)
            if transport is not None:
                transport.close()
        raise
    await asyncio.wait({reader}, timeout=_DRAIN_GRACE)
    detached = not reader.done()
    if detached:
        # Keep draining so a background child never blocks on a full pipe or dies of SIGPIPE.
        _DRAINING.add(reader)
        reader.add_done_callback(_DRAINING.discard)

    text = output.text().rstrip("\n") or "(no output)"
    # Only where it may explain a failure: a clean run needs no word about the sandbox.
    sandboxed = (
        f"\n{sandbox.note()}"
        if sandbox is not None and (timed_out or proc.returncode != 0 or _READ_ONLY in text)
        else ""
    )
    if timed_out:
        return ToolResult(
            f"timed out after {timeout:g}s: the command and its child processes were killed\n"
            f"output so far:\n{text}{sandboxed}",
            is_error=True,
        )
    note = (
        "\n[background processes still hold the output open; they keep running, "
        "their further output is not shown]"
        if detached
        else ""
    )
    return ToolResult(f"exit code: {proc.returncode}\n{text}{note}{sandboxed}")


async def _exit_code(proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> int:
    """Wait for the shell to exit.

    ``Process.wait()`` also waits for the output pipe to close, which a background child can
    hold open indefinitely, so once the output has not ended, watch the exit status directly.
    """
    while proc.returncode is None:
        if reader.done():
            return await proc.wait()
        await asyncio.wait({reader}, timeout=_POLL)
    return proc.returncode


async def _pump(stream: asyncio.StreamReader, output: CappedOutput) -> None:
    while chunk := await stream.read(_CHUNK):
        output.feed(chunk)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
