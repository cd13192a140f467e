"""The real gateway (`vigil gateway run`, :mod:`tests.gateway.process`) serving the web chat,
and helpers to talk to it as a browser or a script would."""

from __future__ import annotations

import json
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from tests.gateway.process import GatewayProcess, history, wait_for
from vigil.testing.fake_model import FakeModelServer

HEARTBEAT_MINIMUM = {"VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "2"}
"""Heartbeats down to 2 seconds, so a test can watch one fire."""


@dataclass
class WebGateway(GatewayProcess):
    """A gateway process with clients of its web chat (closed when the test ends)."""

    clients: list[httpx.Client] = field(default_factory=list)

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def http(self, **kwargs: Any) -> httpx.Client:
        """A client with no credentials but those given."""
        kwargs.setdefault("timeout", 30)
        client = httpx.Client(base_url=self.url, **kwargs)
        self.clients.append(client)
        return client

    def api(self) -> httpx.Client:
        """A client authenticated with the bearer token (a script)."""
        return self.http(headers=self.bearer)

    def login_cookie(self) -> str:
        """Log in through the printed URL and return the session cookie's value."""
        response = httpx.get(f"{self.url}/login", params={"token": self.token}, follow_redirects=False)
        assert response.status_code == 303, response.text
        return response.cookies["vigil_session"]

    def close_clients(self) -> None:
        for client in self.clients:
            client.close()

    def close(self, sig: int = signal.SIGTERM) -> None:
        """Close its clients and stop the process if it still runs."""
        self.close_clients()
        self.stop_if_running(sig)


@contextmanager
def web_gateway(home: Path, fake: FakeModelServer, *, config: dict[str, Any] | None = None,
                env: dict[str, str] = HEARTBEAT_MINIMUM, for_module: bool = False) -> Iterator[WebGateway]:
    """`vigil gateway run` on a free port with the fake model for the profile at ``home``
    (``config`` written to its config.yaml first), closed when the block ends (``for_module``:
    not killed after each test, as the gateways the tests start are)."""
    if config is not None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.yaml").write_text(json.dumps(config))
    running = WebGateway(home, fake, env=dict(env))
    running.start_for_module() if for_module else running.start()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def gateway(fake_model_env: FakeModelServer, vigil_home: Path) -> Iterator[WebGateway]:
    """`vigil gateway run` on a free port with the fake model (SIGTERM after the test)."""
    with web_gateway(vigil_home, fake_model_env) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium for the module's browser tests (:mod:`.browsing`); each test's pages
    are in contexts of their own."""
    from tests.gateway.adapters.web.browsing import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture
def open_page(browser: Any) -> Iterator[Callable[..., Any]]:
    """``open_page(**context_options)``: a page in a browser context of its own (its own cookies;
    the desktop's size unless ``viewport`` says otherwise), closed when the test ends; its
    uncaught errors are in ``page.errors``."""
    from tests.gateway.adapters.web.browsing import DESKTOP, watched

    contexts: list[Any] = []

    def open_one(**options: Any) -> Any:
        options.setdefault("viewport", DESKTOP)
        contexts.append(browser.new_context(**options))
        return watched(contexts[-1].new_page())

    try:
        yield open_one
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def browser_page(open_page: Callable[..., Any]) -> Any:
    """A desktop-sized page of the test's own."""
    return open_page()


@contextmanager
def module_gateway(fake: FakeModelServer, factory: pytest.TempPathFactory, name: str) -> Iterator[WebGateway]:
    """One gateway for a whole test module, whose tests each add conversations of their own
    (stopped when the module ends, not after each test)."""
    with web_gateway(factory.mktemp(name) / "home", fake, for_module=True) as running:
        yield running


def post_message(client: httpx.Client, conversation: str, text: str, client_id: str) -> httpx.Response:
    """POST a message and return the response whatever it is (the tests check refusals)."""
    return client.post(f"/api/conversations/{conversation}/messages", json={"text": text, "client_id": client_id})


def answers(client: httpx.Client, conversation: str) -> list[str]:
    return [m["content"] for m in history(client, conversation)["messages"] if m["role"] == "assistant" and m["content"]]


def user_texts(client: httpx.Client, conversation: str) -> list[str]:
    return [m["content"] for m in history(client, conversation)["messages"] if m["role"] == "user"]


def _gateway_tables(home: Path, read: Callable[[Any], Any]) -> Any:
    from vigil.store import open_store

    store = open_store(home / "state.db")
    try:
        return read(store.gateway)
    finally:
        store.close()


def inbox_total(home: Path) -> int:
    """How many inbound messages the gateway has stored, read from the profile's store."""
    return sum(_gateway_tables(home, lambda tables: tables.inbox_counts()).values())


def outbox_counts(home: Path) -> dict[str, int]:
    """The gateway's outbox entries per status, read from the profile's store."""
    return dict(_gateway_tables(home, lambda tables: tables.outbox_counts()))


class EventReader:
    """Reads a conversation's SSE stream in a thread; ``events`` fills as they arrive."""

    def __init__(self, gateway: WebGateway, conversation: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.status = 0
        self.content_type = ""
        self._client = gateway.http(headers=gateway.bearer, timeout=httpx.Timeout(30, read=None))
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(conversation,), daemon=True)
        self._thread.start()
        assert self._opened.wait(15), "the event stream did not open"

    def _read(self, conversation: str) -> None:
        try:
            with self._client.stream("GET", f"/api/conversations/{conversation}/events") as response:
                self.status = response.status_code
                self.content_type = response.headers.get("content-type", "")
                self._opened.set()
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[len("data: "):]))
        except httpx.HTTPError:
            pass
        finally:
            self._opened.set()

    def wait_for(self, kind: str, predicate: Callable[[dict[str, Any]], bool] = lambda e: True) -> dict[str, Any]:
        """The first event of type ``kind`` (matching ``predicate``), waiting for it."""
        return wait_for(
            lambda: next((e for e in self.events if e.get("type") == kind and predicate(e)), None),
            what=f"a {kind} event",
        )

    def close(self) -> None:
        self._client.close()
