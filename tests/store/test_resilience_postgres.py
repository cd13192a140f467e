"""The PostgreSQL store rides out lost connections: a transaction whose connection is lost is
run again whole, and one whose connection is lost while it commits is neither lost nor run
twice. The network is a real TCP relay between the store and the server that the tests cut."""

from __future__ import annotations

import socket
import threading
import time
from typing import Iterator

import psycopg
import pytest

from tests.store import conftest as pg_fixtures
from vigil.store import NewMessage
from vigil.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres

COMMIT = b"COMMIT\x00"
"""How psycopg's ``COMMIT`` looks on the wire (a Parse message holding the statement)."""


class Relay:
    """Forwards TCP connections from a free local port to the PostgreSQL server, and cuts the
    first connection that sends ``COMMIT`` after :meth:`arm`:

    * ``after``: the ``COMMIT`` reaches the server, its answer never reaches the store;
    * ``before``: the ``COMMIT`` never reaches the server, whose side stays open (the
      server's transaction waits, as behind a network that failed).

    :meth:`down` closes every connection and refuses new ones until :meth:`up`."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.cuts = 0
        self._mode: str | None = None
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._kept: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def arm(self, mode: str) -> None:
        with self._lock:
            self._mode = mode

    def down(self) -> None:
        _close(self._listener)  # shut down first: a thread blocked in accept() keeps it open
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                _close(sock)

    def up(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def close(self) -> None:
        self.down()
        for sock in self._kept:
            _close(sock)

    def _accept(self) -> None:
        listener = self._listener
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._pairs.append((client, server))
            cut_answer = threading.Event()
            threading.Thread(target=self._upstream, args=(client, server, cut_answer), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client, cut_answer), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, cut_answer: threading.Event) -> None:
        while data := _recv(client):
            if COMMIT in data:
                with self._lock:
                    mode, self._mode = self._mode, None
                if mode == "before":
                    self.cuts += 1
                    self._kept.append(server)  # the server's side of the connection stays open
                    _close(client)
                    return
                if mode == "after":
                    cut_answer.set()
            try:
                server.sendall(data)
            except OSError:
                break
        _close(server)

    def _downstream(self, server: socket.socket, client: socket.socket, cut_answer: threading.Event) -> None:
        while data := _recv(server):
            if cut_answer.is_set():  # the answer to COMMIT: the server has committed
                self.cuts += 1
                _close(client)
                _close(server)
                return
            try:
                client.sendall(data)
            except OSError:
                break
        _close(client)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@pytest.fixture
def relay(postgres_server: str) -> Iterator[Relay]:
    info = psycopg.conninfo.conninfo_to_dict(postgres_server)
    relay = Relay(str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432))
    yield relay
    relay.close()


@pytest.fixture
def store(relay: Relay, postgres_server: str, pg_schema: str) -> Iterator[PostgresStore]:
    info = psycopg.conninfo.conninfo_to_dict(postgres_server)
    user, dbname = info.get("user") or "postgres", info.get("dbname") or "test"
    store = PostgresStore(f"postgresql://{user}@127.0.0.1:{relay.port}/{dbname}?schema={pg_schema}")
    yield store
    store.close()


def _contents(store: PostgresStore, session_id: str) -> list[str]:
    return [m.content or "" for m in store.get_messages(session_id)]


def test_a_commit_whose_answer_is_lost_counts_once(relay: Relay, store: PostgresStore) -> None:
    session = store.create_session(source="cli")
    relay.arm("after")
    record = store.append_message(session.id, NewMessage("user", "hello"))
    assert relay.cuts == 1
    assert record.seq == 1
    assert _contents(store, session.id) == ["hello"]  # stored, and not a second time


def test_a_commit_that_never_arrived_is_run_again(relay: Relay, store: PostgresStore) -> None:
    session = store.create_session(source="cli")
    relay.arm("before")
    started = time.monotonic()
    record = store.append_message(session.id, NewMessage("user", "hello"))
    took = time.monotonic() - started
    assert relay.cuts == 1
    assert record.seq == 1
    assert _contents(store, session.id) == ["hello"]
    assert took < 10, f"the abandoned transaction was settled in {took:.1f} s"


def test_a_store_call_waits_out_a_server_that_is_away(relay: Relay, store: PostgresStore) -> None:
    session = store.create_session(source="cli")
    relay.down()  # every connection lost; new ones refused, as during a restart
    back = threading.Timer(1.5, relay.up)
    back.start()
    try:
        started = time.monotonic()
        store.append_message(session.id, NewMessage("user", "are you there?"))
        took = time.monotonic() - started
    finally:
        back.join()
    assert _contents(store, session.id) == ["are you there?"]
    assert 1.4 < took < 10, took
    print(f"answered {took - 1.5:.2f} s after the server was back")
