"""`vigil chat -q` and dangerous commands: refused without a terminal, asked for on one.

The dangerous program is a stand-in: a fake ``mkfs.ext4`` first on PATH that only leaves a
marker file, so a command that gets through is seen without harming anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

HIDDEN_MKFS = "echo step1\nmkfs.ext4 /dev/sdX"


def _fake_mkfs(tmp_path: Path) -> tuple[Path, Path]:
    """A bin directory holding a harmless ``mkfs.ext4``, and the marker it writes when run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "mkfs-ran"
    script = bin_dir / "mkfs.ext4"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {marker}\n")
    script.chmod(0o755)
    return bin_dir, marker


def _env(server: FakeModelServer, home: Path, bin_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "VIGIL_HOME": str(home),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": server.api_key,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TERM": "xterm",
    }


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def _script_mkfs(server: FakeModelServer, answer: str) -> None:
    server.queue(
        Reply.tool_calls(ToolCallSpec("terminal", {"command": HIDDEN_MKFS}, id="call_mkfs")),
        answer,
    )


def test_unattended_one_shot_refuses_a_hidden_mkfs_and_runs_nothing(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path
) -> None:
    bin_dir, marker = _fake_mkfs(tmp_path)
    _script_mkfs(fake_model, "I did not format anything.")
    result = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "chat", "-q", "prepare the disk"],
        env=_env(fake_model, vigil_home, bin_dir),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "I did not format anything.\n"
    assert not marker.exists(), "the dangerous command ran"
    (tool_result,) = _tool_results(fake_model.requests[1].body)
    assert tool_result.startswith("refused:")
    assert "formats a filesystem (mkfs.ext4)" in tool_result
    assert "unattended" in tool_result and "nothing was done" in tool_result
    assert "exit code" not in tool_result  # not even `echo step1` ran


def _spawn_one_shot(server: FakeModelServer, home: Path, bin_dir: Path, cwd: Path) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "vigil.cli.main", "chat", "-q", "prepare the disk"],
        env=_env(server, home, bin_dir),
        cwd=str(cwd),
        encoding="utf-8",
        timeout=30,
        dimensions=(30, 120),
    )


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_one_shot_on_a_terminal_asks_and_a_no_runs_nothing(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path
) -> None:
    bin_dir, marker = _fake_mkfs(tmp_path)
    _script_mkfs(fake_model, "Left the disk alone.")
    child = _spawn_one_shot(fake_model, vigil_home, bin_dir, tmp_path)
    try:
        child.expect("needs approval")
        child.expect("formats a filesystem")
        child.expect(r"Allow it\? \[y/N\]")
        child.sendline("n")
        child.expect("Left the disk alone.")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert not marker.exists()
    (tool_result,) = _tool_results(fake_model.requests[1].body)
    assert "declined" in tool_result


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_one_shot_on_a_terminal_runs_the_command_once_approved(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path
) -> None:
    bin_dir, marker = _fake_mkfs(tmp_path)
    _script_mkfs(fake_model, "Formatted.")
    child = _spawn_one_shot(fake_model, vigil_home, bin_dir, tmp_path)
    try:
        child.expect(r"Allow it\? \[y/N\]")
        child.sendline("y")
        child.expect("Formatted.")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert marker.read_text() == "/dev/sdX\n"
    (tool_result,) = _tool_results(fake_model.requests[1].body)
    assert tool_result.startswith("exit code: 0") and "step1" in tool_result
    assert json.dumps(fake_model.requests[1].body).count("call_mkfs") >= 1
