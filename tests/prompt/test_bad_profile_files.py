"""Profile files that are not what they should be: FIFOs, devices, symlink loops, directories,
huge files. Every command answers with one line naming the file, never hangs, never leaves an
empty session behind; the commands run as real subprocesses so a hang is caught by a timeout."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pytest

from tests.cli.helpers import run_cli, run_vigil
from vigil.profiles import Profile
from vigil.testing.fake_model import FakeModelServer

Damage = Callable[[Path], str]
"""Damages the file at a path; returns the words the refusal must contain."""


def fifo(path: Path) -> str:
    os.mkfifo(path)
    return "is a FIFO (named pipe), not a regular file"


def symlink_loop(path: Path) -> str:
    other = path.with_name(path.name + ".loop")
    other.symlink_to(path)
    path.symlink_to(other)
    return "is a symbolic link loop"


def dev_zero(path: Path) -> str:
    path.symlink_to("/dev/zero")
    return "is a character device, not a regular file"


def directory(path: Path) -> str:
    path.mkdir()
    return "is a directory, not a regular file"


@pytest.fixture
def home(vigil_home: Path) -> Path:
    Profile("default", vigil_home).ensure()
    return vigil_home


def _env(server: FakeModelServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}


def _sessions() -> list[object]:
    return json.loads(run_cli("sessions", "list", "--json").output)


@pytest.mark.parametrize("name", ["SOUL.md", "USER.md", "MEMORY.md"])
@pytest.mark.parametrize("damage", [fifo, symlink_loop, dev_zero, directory])
def test_a_broken_prompt_file_refuses_the_chat_and_leaves_no_session(
    fake_model: FakeModelServer, home: Path, name: str, damage: Damage
) -> None:
    reason = damage(home / name)
    result = run_vigil("chat", "-q", "hi", home=home, env=_env(fake_model), timeout=30)
    assert result.returncode == 1, result.stdout
    assert "Traceback" not in result.stderr
    assert f"cannot use {name} for the system prompt: {home / name}: {reason}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert fake_model.requests == [] and _sessions() == []


def test_a_huge_soul_md_is_read_only_up_to_the_cap(fake_model: FakeModelServer, home: Path) -> None:
    with open(home / "SOUL.md", "wb") as handle:  # 64 MiB: far more than is ever read
        handle.write(b"You are a careful agent.\n")
        handle.truncate(64 << 20)
    fake_model.queue("ok")
    result = run_vigil("chat", "-q", "hi", home=home, env=_env(fake_model), timeout=60)
    assert result.returncode == 0, result.stderr
    system = json.dumps(fake_model.last_request.body["messages"][0])  # type: ignore[union-attr]
    assert "You are a careful agent." in system
    assert "SOUL.md truncated: 67,108,864 bytes, the first 20,000 shown" in system


@pytest.mark.parametrize("damage", [fifo, symlink_loop, dev_zero, directory])
def test_a_broken_config_yaml_is_named_by_every_command(home: Path, damage: Damage) -> None:
    reason = damage(home / "config.yaml")
    for args in (("config", "show"), ("config", "set", "model.name", "x"), ("sessions", "list")):
        result = run_vigil(*args, home=home, timeout=30)
        assert result.returncode == 1 and "Traceback" not in result.stderr, args
        assert result.stderr.startswith(f"Error: cannot read the config: {home / 'config.yaml'}: {reason}")
        assert len(result.stderr.strip().splitlines()) == 1, args


@pytest.mark.parametrize("damage", [fifo, symlink_loop, directory])
def test_a_broken_state_db_is_named_by_every_command(home: Path, damage: Damage) -> None:
    reason = damage(home / "state.db")
    for args in (("sessions", "list"), ("cron", "list")):
        result = run_vigil(*args, home=home, timeout=30)
        assert result.returncode == 1 and "Traceback" not in result.stderr, args
        assert f"the session database {home / 'state.db'} {reason}" in result.stderr
    assert run_vigil("config", "show", home=home, timeout=30).returncode == 0  # needs no store


def test_skills_as_a_regular_file_is_named(home: Path) -> None:
    (home / "skills").rmdir()
    (home / "skills").write_text("not a folder")
    result = run_vigil("config", "show", home=home, timeout=30)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"Error: {home / 'skills'} is a regular file, but vigil keeps a folder there; move it aside"
    )
    assert (home / "skills").read_text() == "not a folder"


def test_a_fifo_or_a_loop_as_a_skill_file_skips_that_skill(fake_model: FakeModelServer, home: Path) -> None:
    (home / "skills" / "good").mkdir()
    (home / "skills" / "good" / "SKILL.md").write_text("---\nname: good\ndescription: works\n---\nbody\n")
    (home / "skills" / "piped").mkdir()
    os.mkfifo(home / "skills" / "piped" / "SKILL.md")
    (home / "skills" / "big").mkdir()
    with open(home / "skills" / "big" / "SKILL.md", "wb") as handle:
        handle.truncate(8 << 20)
    fake_model.queue("ok")
    result = run_vigil("chat", "-q", "hi", home=home, env=_env(fake_model), timeout=30)
    assert result.returncode == 0, result.stderr
    system = json.dumps(fake_model.last_request.body["messages"][0])  # type: ignore[union-attr]
    assert "- good: works" in system and "piped" not in system
    assert "skipped skill 'big'" in result.stderr and "too large" in result.stderr
