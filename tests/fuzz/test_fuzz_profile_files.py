"""Fuzzing the files of a profile through the real CLI: damaged SOUL.md / USER.md / MEMORY.md
under ``chat -q``, and damaged ``state.db`` files under ``sessions list``. Kinds of damage that
could hang (a FIFO, a device) run in a subprocess with a timeout; the rest run in-process."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.fuzz.helpers import assert_clean, assert_result, invoke, run, snapshot
from vigil.store import NewMessage, SQLiteStore
from vigil.testing.fake_model import FakeModelServer

FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
PROMPT_FILES = ("SOUL.md", "USER.md", "MEMORY.md")
HANGS_IF_BROKEN = ("fifo", "dev-zero")

damage_kinds = st.sampled_from(
    ["bytes", "invalid-utf8", "huge", "empty", "fifo", "dev-zero", "loop", "dangling", "directory"]
)


def _damage(path: Path, kind: str, data: bytes, size: int) -> None:
    if kind == "bytes":
        path.write_bytes(data)
    elif kind == "invalid-utf8":
        path.write_bytes(b"- a note\n" + data + b"\xff\xfe\xc3(\n")
    elif kind == "huge":
        with open(path, "wb") as handle:
            handle.write(data)
            handle.truncate(size)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "loop":
        other = path.with_name(path.name + ".loop")
        other.symlink_to(path)
        path.symlink_to(other)
    elif kind == "dangling":
        path.symlink_to(path.with_name("nowhere"))
    elif kind == "directory":
        path.mkdir()
        (path / "inside.md").write_text("x")


@pytest.fixture
def model(fake_model: FakeModelServer) -> Iterator[FakeModelServer]:
    fake_model.set_default_reply("fuzzed answer")
    yield fake_model


@settings(FUZZ, max_examples=20)
@given(
    damaged=st.lists(st.tuples(st.sampled_from(PROMPT_FILES), damage_kinds), min_size=1, max_size=3, unique_by=lambda t: t[0]),
    data=st.binary(max_size=600),
    size=st.integers(min_value=5 << 20, max_value=256 << 20),
)
def test_chat_answers_or_names_the_broken_prompt_file(
    model: FakeModelServer, damaged: list[tuple[str, str]], data: bytes, size: int
) -> None:
    model.reset()
    model.set_default_reply("fuzzed answer")
    env = {"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": model.api_key}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        assert invoke(home, "config", "show").exit_code == 0  # creates the profile
        for name, kind in damaged:
            _damage(home / name, kind, data, size)
        before = snapshot(home, [name for name, _ in damaged])
        if any(kind in HANGS_IF_BROKEN for _, kind in damaged):
            code, output = run(home, "chat", "-q", "hi", env=env, timeout=30)
            assert_clean(code, output)
        else:
            result = invoke_with_env(home, env, "chat", "-q", "hi")
            assert_result(result)
            code, output = result.exit_code, result.output
        assert snapshot(home, [name for name, _ in damaged]) == before
        sessions = json.loads(invoke(home, "sessions", "list", "--json").output)
        if code == 0:
            assert "fuzzed answer" in output and len(sessions) == 1
        else:
            assert sessions == [] and model.requests == []  # refused before anything began


def invoke_with_env(home: Path, env: dict[str, str], *args: str):  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from vigil.cli.main import cli

    return CliRunner().invoke(cli, list(args), env={"VIGIL_HOME": str(home), **env}, catch_exceptions=True)


@pytest.fixture(scope="module")
def good_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real vigil store with a few sessions (WAL checkpointed on close)."""
    path = tmp_path_factory.mktemp("template") / "state.db"
    store = SQLiteStore(path)
    for number in range(4):
        session = store.create_session(source="cli", title=f"talk {number}", tool_names=["terminal"])
        for turn in range(5):
            store.append_message(session.id, NewMessage(role="user", content=f"question {turn} " * 40))
            store.append_message(session.id, NewMessage(role="assistant", content=f"answer {turn} " * 40))
    store.close()
    return path


db_damage = st.one_of(
    st.tuples(st.just("truncate"), st.integers(min_value=0, max_value=200_000)),
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, 200_000), st.integers(0, 255)), min_size=1, max_size=16)),
    st.tuples(st.just("random"), st.binary(max_size=8192)),
    st.tuples(st.just("zero-with-wal"), st.binary(min_size=1, max_size=4096)),
    st.tuples(st.just("zero-with-journal"), st.binary(min_size=1, max_size=4096)),
    st.tuples(st.just("header-only"), st.binary(max_size=200)),
    st.tuples(st.sampled_from(["directory", "loop", "dangling", "fifo"]), st.none()),
)


@settings(FUZZ, max_examples=30)
@given(damage=db_damage)
@example(damage=("flip", [(73552, 128)]))  # a byte of the schema's text: SQLite's error quoted it undecodable
def test_sessions_list_answers_or_refuses_a_damaged_state_db_untouched(
    good_database: Path, damage: tuple[str, object]
) -> None:
    kind, detail = damage
    template = good_database.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        assert invoke(home, "config", "show").exit_code == 0
        db = home / "state.db"
        if kind == "truncate":
            db.write_bytes(template[: int(detail) % (len(template) + 1)])  # type: ignore[call-overload]
        elif kind == "flip":
            data = bytearray(template)
            for position, byte in detail:  # type: ignore[attr-defined]
                data[position % len(data)] = byte
            db.write_bytes(bytes(data))
        elif kind == "random":
            db.write_bytes(detail)  # type: ignore[arg-type]
        elif kind in ("zero-with-wal", "zero-with-journal"):
            db.write_bytes(b"")
            db.with_name("state.db-" + kind.rsplit("-", 1)[1]).write_bytes(detail)  # type: ignore[arg-type]
        elif kind == "header-only":
            db.write_bytes(b"SQLite format 3\x00" + detail)  # type: ignore[operator]
        else:
            _damage(db, {"directory": "directory", "loop": "loop", "dangling": "dangling", "fifo": "fifo"}[kind], b"", 0)
        names = [p.name for p in home.iterdir() if p.name.startswith("state.db")]
        before = snapshot(home, None)
        if kind == "fifo":
            code, output = run(home, "sessions", "list", timeout=30)
            assert_clean(code, output)
        else:
            result = invoke(home, "sessions", "list")
            assert_result(result)
            code = result.exit_code
        if code != 0:
            after = snapshot(home, None)
            assert {k: v for k, v in after.items() if k.startswith("state.db")} == {
                k: v for k, v in before.items() if k.startswith("state.db")
            }, names
        else:
            assert_result(invoke(home, "sessions", "list"))
