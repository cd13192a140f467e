"""Every destructive command asks the same way: at a terminal it asks, ``-y/--yes`` skips the
question, and without a terminal and without ``--yes`` it refuses and changes nothing."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

import pexpect
import pytest

from tests.cli.helpers import is_clear_error, run_cli, state_digest
from vigil.store import NewMessage, SQLiteStore

SESSION = "ccc333000001"


def _make_session(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(home / "state.db")
    try:
        store.create_session(source="cli", title="to delete", session_id=SESSION)
        store.append_message(SESSION, NewMessage("user", "delete me"))
    finally:
        store.close()


def _make_job(home: Path) -> None:
    assert run_cli("cron", "add", "pulse", "-s", "every 2h", "--prompt", "Check").exit_code == 0


def _make_profile(home: Path) -> None:
    assert run_cli("profile", "create", "work").exit_code == 0


def _session_exists(home: Path) -> bool:
    return run_cli("sessions", "show", SESSION).exit_code == 0


def _job_exists(home: Path) -> bool:
    return run_cli("cron", "show", "pulse").exit_code == 0


def _profile_exists(home: Path) -> bool:
    return (home / "profiles" / "work").is_dir()


DESTRUCTIVE: list[tuple[list[str], Callable[[Path], None], Callable[[Path], bool]]] = [
    (["sessions", "delete", SESSION], _make_session, _session_exists),
    (["cron", "remove", "pulse"], _make_job, _job_exists),
    (["profile", "delete", "work"], _make_profile, _profile_exists),
]
IDS = ["sessions-delete", "cron-remove", "profile-delete"]


@pytest.mark.parametrize(("command", "make", "exists"), DESTRUCTIVE, ids=IDS)
def test_without_a_terminal_and_without_yes_nothing_is_deleted(
    vigil_home: Path, command: list[str], make: Callable[[Path], None], exists: Callable[[Path], bool]
) -> None:
    make(vigil_home)
    before = state_digest(vigil_home)
    # an answer waiting on a pipe is not a person agreeing
    refused = run_cli(*command, input="y\n")
    assert is_clear_error(refused), refused.output
    assert "without a terminal" in refused.output and "--yes" in refused.output
    assert state_digest(vigil_home) == before and exists(vigil_home)


@pytest.mark.parametrize("flag", ["-y", "--yes"])
@pytest.mark.parametrize(("command", "make", "exists"), DESTRUCTIVE, ids=IDS)
def test_yes_deletes_without_asking(
    vigil_home: Path,
    command: list[str],
    make: Callable[[Path], None],
    exists: Callable[[Path], bool],
    flag: str,
) -> None:
    make(vigil_home)
    done = run_cli(*command, flag)
    assert done.exit_code == 0, done.output
    assert "?" not in done.output  # no question was asked
    assert not exists(vigil_home)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize(("command", "make", "exists"), DESTRUCTIVE, ids=IDS)
def test_at_a_terminal_it_asks_and_honours_the_answer(
    vigil_home: Path, command: list[str], make: Callable[[Path], None], exists: Callable[[Path], bool]
) -> None:
    make(vigil_home)
    env = {**os.environ, "VIGIL_HOME": str(vigil_home), "TERM": "dumb"}
    for answer, kept in (("n", True), ("y", False)):
        child = pexpect.spawn(
            sys.executable, ["-m", "vigil.cli.main", *command], env=env, encoding="utf-8", timeout=20
        )
        try:
            child.expect(r"\? \[y/N\]")
            child.sendline(answer)
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert (child.exitstatus == 0) is not kept
        assert exists(vigil_home) is kept
