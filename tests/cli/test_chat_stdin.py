"""`vigil chat` fed through standard input, as a shell pipeline feeds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import run_cli
from vigil.testing.fake_model import FakeModelServer


def _chat(server: FakeModelServer, home: Path, *args: str, input: bytes) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "VIGIL_HOME": str(home),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": server.api_key,
    }
    completed = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "chat", *args],
        env=env,
        input=input,
        capture_output=True,
        timeout=60,
    )
    return subprocess.CompletedProcess(
        completed.args, completed.returncode, completed.stdout.decode(), completed.stderr.decode()
    )


def _users(session_id: str) -> list[str]:
    shown = json.loads(run_cli("sessions", "show", session_id, "--json").output)
    return [m["content"] for m in shown["messages"] if m["role"] == "user"]


def test_q_dash_sends_the_whole_of_standard_input(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.rule(contains="what is 2+2", reply="Four.")
    result = _chat(fake_model, vigil_home, "-q", "-", input=b"what is 2+2?\nanswer briefly\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Four.\n"
    session_id = result.stderr.strip().split()[-1]
    assert _users(session_id) == ["what is 2+2?\nanswer briefly"]


def test_q_dash_with_nothing_on_standard_input_is_refused(fake_model: FakeModelServer, vigil_home: Path) -> None:
    for empty in (b"", b"\n  \n"):
        result = _chat(fake_model, vigil_home, "-q", "-", input=empty)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "standard input is empty" in result.stderr
    assert fake_model.requests == []
    assert json.loads(run_cli("sessions", "list", "--json").output) == []


def test_q_dash_refuses_bytes_that_are_not_text(fake_model: FakeModelServer, vigil_home: Path) -> None:
    result = _chat(fake_model, vigil_home, "-q", "-", input=b"caf\xe9?\n")
    assert result.returncode == 2 and "not valid UTF-8" in result.stderr and "Traceback" not in result.stderr
    assert fake_model.requests == []


def test_piped_chat_runs_one_turn_per_line_without_the_prompt(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.queue("Answer one.", "Answer two.")
    result = _chat(fake_model, vigil_home, input=b"first question\n\n/title piped run\nsecond question\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Answer one.\nTitle set: piped run\nAnswer two.\n"
    # no full-screen prompt: no terminal warning, no escape sequences, no prompt text
    assert "not a terminal" not in result.stderr and "\x1b" not in result.stdout + result.stderr
    assert "you ›" not in result.stdout
    session_id = result.stderr.strip().split()[-1]
    assert _users(session_id) == ["first question", "second question"]


def test_piped_chat_stops_at_quit(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.queue("Only this.")
    result = _chat(fake_model, vigil_home, input=b"one\n/quit\ntwo\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Only this.\nBye.\n"
    assert len(fake_model.requests) == 1


def test_piped_chat_continues_a_conversation(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.queue("First.", "Second.")
    first = _chat(fake_model, vigil_home, "-q", "-", input=b"start\n")
    session_id = first.stderr.strip().split()[-1]
    again = _chat(fake_model, vigil_home, "--continue", input=b"go on\n")
    assert again.returncode == 0 and again.stdout == "Second.\n", again.stderr
    assert _users(session_id) == ["start", "go on"]
