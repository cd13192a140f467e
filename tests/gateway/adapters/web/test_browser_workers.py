"""The web chat in a real browser across two gateway workers sharing one PostgreSQL store: a
page served by one worker chats in a conversation the other worker runs, sees its answer stream
in once, and goes on when the running worker is killed. Skipped (with the reason) where
Chromium, Playwright or a PostgreSQL server is missing."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.gateway.process import new_conversation, send, share_store, wait_for
from tests.gateway.adapters.web.browsing import BROWSER_TESTS, log_in, send_text
from tests.gateway.adapters.web.conftest import WebGateway, answers
from tests.gateway.adapters.web.page_probes import record_streaming
from tests.store import conftest as store_fixtures
from vigil.gateway.cluster.ownership import PREFIX as CONVERSATION_LEASE
from vigil.schedule.heartbeat.lease import live_leases
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = [*BROWSER_TESTS, pytest.mark.postgres, pytest.mark.timeout(180)]

# the per-test PostgreSQL schema, skipping with the reason when no server answers
postgres_server, pg_schema, pg_url = store_fixtures.postgres_server, store_fixtures.pg_schema, store_fixtures.pg_url

LEASE = 3.0
FIRST_ANSWER = "First answer, from the worker that runs it."
SECOND_ANSWER = "The second answer streams in **token by token** from the other worker."
SECOND_RENDERED = "The second answer streams in token by token from the other worker."
THIRD_ANSWER = "Third answer, after the take-over."


@pytest.fixture
def store(pg_url: str) -> Iterator[Any]:
    from vigil.store.postgres import PostgresStore

    opened = PostgresStore(pg_url)
    yield opened
    opened.close()


@pytest.fixture
def workers(vigil_home: Path, pg_url: str, fake_model: FakeModelServer, store: Any) -> Iterator[list[WebGateway]]:
    """Two `vigil gateway run` workers on one schema and one VIGIL_HOME (one login token)."""
    share_store(vigil_home, pg_url, lease=LEASE)
    started = [WebGateway(vigil_home, fake_model).start() for _ in range(2)]
    try:
        yield started
    finally:
        for worker in started:
            worker.close(signal.SIGKILL)


def _open_page(open_page: Callable[..., Any], worker: WebGateway, conversation: str) -> Any:
    """A page of its own (own cookies) logged in at ``worker``, showing ``conversation``."""
    page = open_page()
    log_in(page, worker)
    page.goto(f"{worker.url}/#{conversation}")
    page.wait_for_function("(id) => document.querySelector('#conversation-list .conversation.selected') && "
                           "location.hash.slice(1) === id", arg=conversation)
    return page


def _rows(page: Any) -> list[tuple[str, str]]:
    """Every message row of the page as (kind, text): ``user``, ``user pending``, ``assistant``
    or ``assistant streaming``, and the other rows by their first class."""
    return [tuple(row) for row in page.evaluate("""() => [...document.querySelectorAll('#messages > .message')]
        .map(r => {
            const kind = r.classList.contains('user') ? 'user' : r.classList.contains('assistant') ? 'assistant'
                : [...r.classList].filter(c => c !== 'message').join(' ');
            const flags = ['pending', 'failed', 'streaming'].filter(c => r.classList.contains(c));
            const bubble = r.querySelector('.bubble');
            return [[kind, ...flags].join(' '), (bubble || r).textContent];
        })""")]


def _wait_for_answer(page: Any, text: str) -> None:
    page.wait_for_function("""(text) => [...document.querySelectorAll('.message.assistant:not(.streaming) .bubble')]
        .some(b => b.textContent === text)""", arg=text)


def _partial(page: Any, full: str) -> list[str]:
    return [text for text in page.evaluate("() => window.__seen") if text and len(text) < len(full)]


def _owner(store: Any, conversation: str) -> int | None:
    lease = live_leases(store, [conversation], time.time(), prefix=CONVERSATION_LEASE).get(conversation)
    return lease.pid if lease is not None else None


def _answered_in(worker: WebGateway, conversation: str) -> int:
    line = f"user turn in {conversation[:8]} answered"
    return sum(line in printed for printed in list(worker.output))


def test_a_page_on_one_worker_chats_in_a_conversation_the_other_runs(
    workers: list[WebGateway], fake_model: FakeModelServer, store: Any, open_page: Callable[..., Any],
) -> None:
    worker_a, worker_b = workers
    fake_model.rule(contains="first question", reply=FIRST_ANSWER)
    fake_model.rule(contains="second question", reply=Reply.text(SECOND_ANSWER, chunk_delay=0.05))
    fake_model.rule(contains="third question", reply=THIRD_ANSWER)

    # A conversation made and answered once through worker A's API: A runs it.
    api_a = worker_a.api()
    conversation = new_conversation(api_a)
    send(api_a, conversation, "first question")
    wait_for(lambda: answers(api_a, conversation) == [FIRST_ANSWER], what="the first answer")
    assert _owner(store, conversation) == worker_a.process.pid

    # A page at B and a page at A show it; B's page sends a message.
    page_b = _open_page(open_page, worker_b, conversation)
    page_a = _open_page(open_page, worker_a, conversation)
    for page in (page_a, page_b):
        _wait_for_answer(page, FIRST_ANSWER)
        record_streaming(page)
    send_text(page_b, "second question")

    # Both pages see the answer grow token by token and end rendered; A ran the turn.
    for page in (page_b, page_a):
        page.wait_for_function("""(text) => [...document.querySelectorAll('.message.assistant:not(.streaming) .markdown')]
            .some(m => m.textContent === text && m.querySelector('strong'))""", arg=SECOND_RENDERED)
        assert _partial(page, SECOND_RENDERED), f"the answer never showed part way: {page.evaluate('() => window.__seen')[:5]}"
    expected = [("user", "first question"), ("assistant", FIRST_ANSWER),
                ("user", "second question"), ("assistant", SECOND_RENDERED)]
    page_b.wait_for_function("() => !document.querySelector('#messages .message.pending')")
    assert _rows(page_b) == expected
    assert _rows(page_a) == expected
    wait_for(lambda: _answered_in(worker_a, conversation) == 2, what="A's log of the second answer")
    assert _answered_in(worker_b, conversation) == 0
    assert _owner(store, conversation) == worker_a.process.pid

    # After a reload B's page shows each message once.
    page_b.reload()
    _wait_for_answer(page_b, SECOND_RENDERED)
    assert _rows(page_b) == expected

    # A killed: B's page goes on, B takes the conversation over and answers.
    assert page_a.errors == []
    page_a.context.close()
    worker_a.kill()
    send_text(page_b, "third question")
    _wait_for_answer(page_b, THIRD_ANSWER)
    page_b.wait_for_function("() => !document.querySelector('#messages .message.pending')")
    assert _rows(page_b) == expected + [("user", "third question"), ("assistant", THIRD_ANSWER)]
    wait_for(lambda: _answered_in(worker_b, conversation) == 1, what="B's log of the third answer")
    assert _owner(store, conversation) == worker_b.process.pid
    page_b.reload()
    _wait_for_answer(page_b, THIRD_ANSWER)
    assert _rows(page_b) == expected + [("user", "third question"), ("assistant", THIRD_ANSWER)]
    assert page_b.errors == []
