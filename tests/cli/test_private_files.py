"""Files that hold conversations are readable only by their owner (0600), whatever was there."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import run_cli, run_vigil
from vigil.store import NewMessage, SQLiteStore
from vigil.testing.fake_model import FakeModelServer

SESSION = "feed00000001"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def one_session(vigil_home: Path) -> str:
    vigil_home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(vigil_home / "state.db")
    try:
        store.create_session(source="cli", title="secret plans", session_id=SESSION)
        store.append_message(SESSION, NewMessage("user", "the launch code is 0000"))
    finally:
        store.close()
    return SESSION


@pytest.fixture
def usual_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])
def test_export_over_an_existing_file_makes_it_private(
    one_session: str, tmp_path: Path, usual_umask: None, fmt: str
) -> None:
    out = tmp_path / "exports" / "transcript.txt"
    out.parent.mkdir()
    out.write_text("old public content\n" * 100)
    out.chmod(0o644)
    result = run_cli("sessions", "export", one_session, "--format", fmt, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert _mode(out) == 0o600
    assert "launch code" in out.read_text() and "old public content" not in out.read_text()
    assert [p.name for p in out.parent.iterdir()] == ["transcript.txt"]  # no temporary file left


def test_export_through_a_symlink_replaces_its_target_privately(
    one_session: str, tmp_path: Path, usual_umask: None
) -> None:
    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    target.chmod(0o664)
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    assert run_cli("sessions", "export", one_session, "-o", str(link)).exit_code == 0
    assert link.is_symlink() and _mode(target) == 0o600 and "launch code" in target.read_text()


def test_export_to_a_fifo_is_refused_without_hanging(one_session: str, tmp_path: Path, vigil_home: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = run_vigil("sessions", "export", one_session, "-o", str(fifo), home=vigil_home, timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip() == f"Error: cannot write {fifo}: it exists and is not a regular file"
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize("existing", [True, False])
def test_the_repl_history_is_private(
    fake_model: FakeModelServer, vigil_home: Path, usual_umask: None, existing: bool
) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    history = vigil_home / "repl_history"
    if existing:
        history.write_text("\n# 2026-01-01 00:00:00.000000\n+an old line\n")
        history.chmod(0o644)
    env = {
        **os.environ,
        "VIGIL_HOME": str(vigil_home),
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": fake_model.api_key,
        "TERM": "dumb",
    }
    child = pexpect.spawn(sys.executable, ["-m", "vigil.cli.main", "chat"], env=env, encoding="utf-8", timeout=20)
    try:
        child.expect("you ›")
        child.sendline("/help")
        child.expect("Commands:")
        child.expect("you ›")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert _mode(history) == 0o600
    lines = history.read_text()
    assert "+/help" in lines and ("+an old line" in lines) == existing


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_history_path_that_is_not_a_file_is_one_clear_line(
    fake_model: FakeModelServer, vigil_home: Path, kind: str
) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    history = vigil_home / "repl_history"
    os.mkfifo(history) if kind == "fifo" else history.mkdir()
    env = {
        **os.environ,
        "VIGIL_HOME": str(vigil_home),
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": fake_model.api_key,
        "TERM": "xterm",
    }
    # the REPL (and so its history) exists only on a terminal: a pipe is read line by line
    child = pexpect.spawn(sys.executable, ["-m", "vigil.cli.main", "chat"], env=env, encoding="utf-8", timeout=30)
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close(force=False)
    output = child.before.replace("\r\n", "\n")
    assert child.exitstatus == 1 and "Traceback" not in output, output
    assert output.strip().startswith(f"Error: cannot use the REPL history {history}:")
