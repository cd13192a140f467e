"""session_search against a real SQLite session store."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from vigil.config.settings import Settings
from vigil.store import NewMessage, SessionStore, open_store
from vigil.tools.base import ToolContext

MARCH_4 = datetime(2025, 3, 4, 12, 30, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    store = open_store(tmp_path / "state.db")
    yield store
    store.close()


def add_session(store: SessionStore, title: str | None, *texts: str) -> str:
    session = store.create_session(source="cli", title=title)
    for text in texts:
        store.append_message(session.id, NewMessage(role="user", content=text), created_at=MARCH_4)
    return session.id


def search_ctx(make_ctx, store: SessionStore, session_id: str | None = None) -> ToolContext:
    return make_ctx(store=store, session_id=session_id, settings=Settings(timezone="UTC"))


async def test_finds_past_conversations(make_ctx, call_tool, store: SessionStore) -> None:
    sid = add_session(store, "Deploy plans", "we decided to deploy the gateway on friday")
    add_session(store, None, "unrelated chat about lunch")
    result = await call_tool(search_ctx(make_ctx, store), "session_search", query="gateway friday")
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[0] == "1 match(es) for 'gateway friday':"
    assert lines[1] == f'1. session {sid} — "Deploy plans" — 2025-03-04 12:30 (user)'
    assert "gateway" in lines[2] and "friday" in lines[2]


async def test_untitled_session_and_limit(make_ctx, call_tool, store: SessionStore) -> None:
    for i in range(5):
        add_session(store, None, f"note number {i} about kubernetes")
    result = await call_tool(search_ctx(make_ctx, store), "session_search", query="kubernetes", limit=2)
    lines = result.content.splitlines()
    assert lines[0] == "2 match(es) for 'kubernetes':"
    assert "(untitled)" in lines[1]
    assert len(lines) == 5


async def test_current_session_is_left_out(make_ctx, call_tool, store: SessionStore) -> None:
    current = add_session(store, "now", "talking about zebras right now")
    past = add_session(store, "before", "zebras came up last week")
    result = await call_tool(search_ctx(make_ctx, store, current), "session_search", query="zebras")
    assert past in result.content
    assert current not in result.content


async def test_no_match_says_so(make_ctx, call_tool, store: SessionStore) -> None:
    add_session(store, "x", "something else entirely")
    result = await call_tool(search_ctx(make_ctx, store), "session_search", query="platypus")
    assert not result.is_error
    assert result.content == "no past conversations match 'platypus'"


async def test_query_syntax_is_searched_as_words(make_ctx, call_tool, store: SessionStore) -> None:
    add_session(store, "x", "hello world")
    result = await call_tool(search_ctx(make_ctx, store), "session_search", query='NEAR( "hello')
    assert not result.is_error


async def test_without_a_store_or_query(ctx: ToolContext, call_tool) -> None:
    no_store = await call_tool(ctx, "session_search", query="anything")
    assert no_store.is_error and "no session store" in no_store.content
    blank = await call_tool(ctx, "session_search", query="  ")
    assert blank.is_error and "query is empty" in blank.content
