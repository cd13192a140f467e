"""``send_file``: queues a file for the conversation's platform route, within the size cap and
the working directory (elsewhere only with the user's approval); without a route it says what
it needs and queues nothing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Iterator

import pytest

from vigil.config.settings import Settings
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.store.records import ToolCall
from vigil.tools.base import ToolContext
from vigil.tools.registry import ALL_TOOL_NAMES, run_tool_call


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "state.db")
    yield s
    s.close()


def _context(store: SQLiteStore, tmp_path: Path, *, routed: bool = True, cap: int = 1_000, approve=None) -> ToolContext:
    session = store.create_session(source="gateway", tool_names=ALL_TOOL_NAMES)
    if routed:
        store.gateway.route_set(RouteKey("telegram", "4242", "7"), session.id, now=1.0)
    settings = Settings()
    settings = settings.copy_with(update={"gateway": settings.gateway.copy_with(update={"upload_max_bytes": cap})})
    cwd = tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    return ToolContext(profile=Profile("default", tmp_path / "home"), settings=settings, store=store,
                       session_id=session.id, cwd=cwd, approve=approve)


async def _send(ctx: ToolContext, **args: object):
    return await run_tool_call(ToolCall("c1", "send_file", json.dumps(args)), ctx, ALL_TOOL_NAMES)


async def test_a_file_in_the_working_directory_is_queued_for_the_conversations_route(
    store: SQLiteStore, tmp_path: Path
) -> None:
    ctx = _context(store, tmp_path)
    (ctx.cwd / "report.csv").write_text("a,b\n1,2\n")
    result = await _send(ctx, path="report.csv", caption="the numbers")
    assert not result.is_error and "queued report.csv (8 bytes) for telegram chat 4242 (thread 7)" in result.content
    [entry] = store.gateway.outbox_list(statuses=("pending",))
    assert (entry.kind, entry.route, entry.text) == ("file", RouteKey("telegram", "4242", "7"), "the numbers")
    assert entry.meta["path"] == str((ctx.cwd / "report.csv").resolve()) and entry.meta["name"] == "report.csv"
    assert entry.session_id == ctx.session_id


async def test_without_a_platform_conversation_it_says_so_and_queues_nothing(
    store: SQLiteStore, tmp_path: Path
) -> None:
    ctx = _context(store, tmp_path, routed=False)
    (ctx.cwd / "a.txt").write_text("x")
    result = await _send(ctx, path="a.txt")
    assert result.is_error and "needs a conversation on a messaging platform or the web chat" in result.content
    assert store.gateway.outbox_counts()["pending"] == 0


async def test_too_big_missing_empty_and_directory_are_refused(store: SQLiteStore, tmp_path: Path) -> None:
    ctx = _context(store, tmp_path, cap=10)
    (ctx.cwd / "big.bin").write_bytes(b"x" * 11)
    (ctx.cwd / "empty.txt").write_text("")
    (ctx.cwd / "folder").mkdir()
    big = await _send(ctx, path="big.bin")
    assert big.is_error and "is 11 bytes; files up to 10 bytes can be sent (gateway.upload_max_bytes)" in big.content
    assert "does not exist" in (await _send(ctx, path="nope.txt")).content
    assert "is empty" in (await _send(ctx, path="empty.txt")).content
    assert "not a regular file" in (await _send(ctx, path="folder")).content
    assert store.gateway.outbox_counts()["pending"] == 0


async def test_a_file_outside_the_working_directory_needs_approval_and_is_sent_as_approved(
    store: SQLiteStore, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("private")
    unattended = _context(store, tmp_path)
    (unattended.cwd / "link.txt").symlink_to(outside)  # a link out of the directory is outside too
    for path in (str(outside), "link.txt"):
        refused = await _send(unattended, path=path)
        assert refused.is_error and "needs approval" in refused.content and "outside the working directory" in refused.content
    assert store.gateway.outbox_counts()["pending"] == 0

    asked: list[str] = []

    async def approve(tool: str, what: str) -> bool:
        asked.append(what)
        return True

    ctx = _context(store, tmp_path, approve=approve)
    result = await _send(ctx, path=str(outside), name="notes.txt")
    assert not result.is_error and asked and "secret.txt" in asked[0]
    [entry] = store.gateway.outbox_list(statuses=("pending",))
    copy = Path(entry.meta["path"])
    assert copy.is_relative_to(ctx.cwd.resolve()) and copy.read_text() == "private" and entry.meta["name"] == "notes.txt"
    assert stat.S_IMODE(os.stat(copy).st_mode) == 0o600
    outside.write_text("changed later")
    assert copy.read_text() == "private"  # what was approved is what goes out
