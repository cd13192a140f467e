"""`vigil store migrate --to postgresql://...`: a profile's SQLite store copied into PostgreSQL
through the real command, read back through the PostgreSQL store and vigil's own commands,
refused when the target is taken, resumed after a Ctrl-C and a SIGKILL, and a fuzzed ``--to``.

PostgreSQL tests use the fixtures of ``tests/store/conftest.py`` (a fresh schema each) and are
skipped, saying why, when no server answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.cli.helpers import is_clear_error, run_cli, state_digest
from tests.fuzz.cli_helpers import check, fresh_home, nasty_text
from tests.store.conftest import DEFAULT_POSTGRES_URL, POSTGRES_URL_ENV, drop_schema, with_schema
from vigil.store import NewMessage, SessionStore, ToolCall
from vigil.store.conversations import COMPRESSION
from vigil.store.gateway.gateway_tables import NewOutbound, RouteKey
from vigil.store.sqlite import SQLiteStore
from vigil.store.transfer.errors import MigrateError
from vigil.store.transfer.migrate import BATCH_ROWS, TEST_PAUSE_ENV
from vigil.store.transfer.tables import MARKER_KEY, TABLES
from vigil.store.transfer.target import check_url
from vigil.testing.fake_model import FakeModelServer
from vigil.usage import Usage

postgres = pytest.mark.postgres
WEB = RouteKey("web", "browser-1")
TELEGRAM = RouteKey("telegram", "-100200", thread="7", user="alice")


# -- a populated profile ---------------------------------------------------------------------
def populate(home: Path, fake_model: FakeModelServer) -> dict[str, str]:
    """Sessions with messages of every kind, a compression continuation, a deleted session
    (its ids must never come back), gateway routes, inbox and outbox, pairing rows, and
    through the CLI a heartbeat, a cron job and a cron run. Returns the session ids."""
    store = SQLiteStore(home / "state.db")
    try:
        root = store.create_session(
            source="cli", title="planning", model="fake-model", model_config={"temperature": 0.2},
            tool_names=["terminal", "files"], system_prompt="You are vigil.\n\x00 with a NUL",
        )
        store.append_message(root.id, NewMessage("user", "please deploy the site — ünïcode \x00 \ufdd0 🚀"))
        store.append_message(
            root.id,
            NewMessage("assistant", None, tool_calls=(ToolCall("call-1", "terminal", '{"cmd": "make deploy"}'),),
                       usage=Usage(120, 80, 10, 25), meta={"finish": "tool_calls", "ratio": 0.5}),
        )
        store.append_message(root.id, NewMessage("tool", "deployed", tool_call_id="call-1", tool_name="terminal"))
        store.end_session(root.id, COMPRESSION)
        child = store.create_session(source="cli", parent_id=root.id, system_prompt="You are vigil, continued.")
        store.append_message(child.id, NewMessage("summary", "## Goal\nDeploy the site."))
        store.append_message(child.id, NewMessage("user", "and now the docs"))
        chat = store.create_session(source="gateway", title="web chat")
        store.append_message(chat.id, NewMessage("user", "hi from the browser"))
        store.gateway.route_set(WEB, chat.id, now=1000.0)
        store.gateway.route_set(TELEGRAM, child.id, now=1001.0)
        entry, _ = store.gateway.inbox_accept(WEB, "ext-1", "hi from the browser", sender="alice",
                                              received_at=1002.0, meta={"ip": "127.0.0.1"})
        store.gateway.inbox_start(entry.id, chat.id, now=1003.0)
        store.gateway.inbox_accept(TELEGRAM, "ext-2", "still waiting", received_at=1004.0)
        store.gateway.outbox_add(NewOutbound(WEB, "hello!", session_id=chat.id, inbox_id=entry.id), now=1005.0)
        store.gateway.outbox_add(NewOutbound(TELEGRAM, "a file", kind="file", meta={"name": "a.txt"}), now=1006.0)
        store.pairing.request_code("telegram", "42", display_name="Alice", chat="c-42", thread="", user_key="",
                                   code_hash="a" * 64, nonce="n-1", now=2000.0)
        store.pairing.request_code("telegram", "43", display_name="Bob", chat="c-43", thread="", user_key="",
                                   code_hash="b" * 64, nonce="n-2", now=2001.0)
        store.pairing.approve("b" * 64, by="owner@host", now=2002.0)
        store.pairing.speak("telegram", "-100200", "7", "42", now=2003.0)
    finally:
        store.close()
    env = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": fake_model.api_key}
    for args in (
        ["heartbeat", "set", "-s", child.id, "15m", "check the CI run"],
        ["cron", "add", "daily", "-s", "every 1d", "--prompt", "write the report"],
    ):
        assert run_cli(*args).exit_code == 0, args
    fake_model.queue("the report is written")
    with _env(env):
        ran = run_cli("cron", "run", "daily")
    assert ran.exit_code == 0, ran.output
    store = SQLiteStore(home / "state.db")
    try:
        doomed = store.create_session(source="cli", title="to be deleted")
        for n in range(3):
            store.append_message(doomed.id, NewMessage("user", f"gone {n}"))
        store.delete_session(doomed.id)
    finally:
        store.close()
    return {"root": root.id, "child": child.id, "chat": chat.id}


def source_counts(home: Path) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(home / "state.db")) as conn:
        return {t.name: conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0] for t in TABLES}


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def open_pg(url: str) -> SessionStore:
    from vigil.store.postgres import PostgresStore

    return PostgresStore(url)


def target_dump(server: str, schema: str) -> list[Any]:
    """Every row of every vigil table of ``schema`` (empty when it does not exist)."""
    import psycopg

    with psycopg.connect(server) as conn:
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        if not exists:
            return []
        return [
            (t.name, sorted(map(repr, conn.execute(f'SELECT * FROM "{schema}".{t.name}').fetchall())))
            for t in TABLES
        ]


def schema_exists(server: str, schema: str) -> bool:
    import psycopg

    with psycopg.connect(server) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


def migrate_json(*args: str) -> tuple[int, dict[str, Any], str]:
    result = run_cli("store", "migrate", *args, "--json")
    return result.exit_code, json.loads(result.stdout), result.stderr


# -- the whole copy ----------------------------------------------------------------------------
@postgres
def test_every_table_of_both_backends_is_copied(tmp_path: Path, pg_url: str) -> None:
    """The list of copied tables and columns is the schema of both backends, so a table or
    column added to one by a later migration cannot be left behind silently."""
    import psycopg

    SQLiteStore(tmp_path / "s.db").close()
    open_pg(pg_url).close()
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        sqlite_tables = {n for n in names if not n.startswith(("sqlite_", "messages_fts")) and n != "schema_migrations"}
        sqlite_columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in sqlite_tables}
    schema = pg_url.rpartition("schema=")[2]
    with psycopg.connect(pg_url.partition("?")[0]) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s"
            " ORDER BY table_name, ordinal_position", (schema,)).fetchall()
    pg_columns: dict[str, list[str]] = {}
    for table, column in rows:
        if table != "schema_migrations" and column not in ("created_order", "words"):
            pg_columns.setdefault(table, []).append(column)
    assert sqlite_tables == set(pg_columns) == {t.name for t in TABLES}
    for table in TABLES:
        assert pg_columns[table.name] == list(table.column_names), table.name
        if table.name == "messages":
            assert sqlite_columns["messages"] == ["id", "session_id", "seq", "role", "content", "created_at", "extra"]
        else:  # read by name: the order (columns added later come last) does not matter
            assert sorted(sqlite_columns[table.name]) == sorted(table.column_names), table.name


@postgres
def test_a_populated_profile_is_copied_and_reads_back_the_same(
    vigil_home: Path, fake_model: FakeModelServer, pg_url: str
) -> None:
    ids = populate(vigil_home, fake_model)
    views = {args: run_cli(*args.split()).stdout for args in (
        "heartbeat list --json", "cron list --json", "cron runs --json", "sessions list --json")}
    before = state_digest(vigil_home)

    code, report, stderr = migrate_json("--to", pg_url, "--switch")

    assert code == 0 and report["ok"] and report["switched"] and not report["resumed"], stderr
    expected = source_counts(vigil_home)
    assert {t["table"]: (t["source_count"], t["target_count"], t["hash_match"]) for t in report["tables"]} == {
        name: (rows, rows, True) for name, rows in expected.items()
    }
    assert all(expected.values()) and expected["sessions"] == 4  # every table has rows to copy
    assert sum(1 for line in stderr.splitlines() if " rows copied" in line) == len(TABLES)  # no terminal: quiet lines
    assert f"messages: {expected['messages']} of {expected['messages']} rows copied" in stderr
    assert state_digest(vigil_home, ignore=("config.yaml",)) == before  # the source is only read
    assert "store:\n  url: " in (vigil_home / "config.yaml").read_text()

    # vigil itself, now on PostgreSQL, shows what it showed on SQLite.
    for args, shown in views.items():
        assert run_cli(*args.split()).stdout == shown, args

    source, target = SQLiteStore(vigil_home / "state.db"), open_pg(pg_url)
    try:
        assert target.list_sessions() == source.list_sessions()
        assert target.list_conversations() == source.list_conversations()
        for session in source.list_sessions():
            assert target.get_messages(session.id) == source.get_messages(session.id)
            if session.system_prompt_hash:
                assert target.get_prompt(session.system_prompt_hash) == source.get_prompt(session.system_prompt_hash)
        assert target.newest_continuation(ids["root"]) == ids["child"]
        assert target.list_meta("") == source.list_meta("")
        assert target.get_meta(MARKER_KEY) is None  # verified: the progress record is gone
        assert [h.message_id for h in target.search("deploy")] == [h.message_id for h in source.search("deploy")]
        for key in (WEB, TELEGRAM):
            assert target.gateway.route_get(key) == source.gateway.route_get(key)
        assert target.gateway.inbox_unfinished() == source.gateway.inbox_unfinished()
        assert target.gateway.outbox_list() == source.gateway.outbox_list()
        assert target.pairing.users() == source.pairing.users()
        assert target.pairing.pending(now=2010.0) == source.pairing.pending(now=2010.0)
        assert target.pairing.speakers("telegram", "-100200", "7") == ["42"]
        # Ids go on after the highest the source ever gave out, the deleted session's too.
        highest = max(m.id for s in source.list_sessions() for m in source.get_messages(s.id))
        added = target.append_message(ids["chat"], NewMessage("user", "first message on PostgreSQL"))
        assert (added.id, added.seq) == (highest + 3 + 1, 2)
    finally:
        source.close()
        target.close()


@postgres
def test_without_switch_config_stays_and_the_command_to_switch_is_printed(vigil_home: Path, pg_url: str) -> None:
    store = SQLiteStore(vigil_home / "state.db")
    store.append_message(store.create_session(source="cli").id, NewMessage("user", "hello"))
    store.close()
    (vigil_home / "config.yaml").write_text("# my settings\nagent: {}\n")

    result = run_cli("store", "migrate", "--to", pg_url)

    assert result.exit_code == 0, result.output
    assert "Verified: all 11 tables match." in result.stdout and "messages" in result.stdout
    assert f"To use it: vigil config set store.url '{pg_url}'" in result.stdout
    assert (vigil_home / "config.yaml").read_text() == "# my settings\nagent: {}\n"


@postgres
def test_a_session_older_than_its_parent_keeps_its_parent(vigil_home: Path, pg_url: str) -> None:
    """vigil never makes one (a parent exists before its continuation), but a store edited by
    hand may hold it, and the foreign key must not stop the copy."""
    store = SQLiteStore(vigil_home / "state.db")
    early, late = store.create_session(source="cli"), store.create_session(source="cli")
    store.close()
    with contextlib.closing(sqlite3.connect(vigil_home / "state.db", isolation_level=None)) as conn:
        conn.execute("UPDATE sessions SET parent_id = ? WHERE id = ?", (late.id, early.id))
    result = run_cli("store", "migrate", "--to", pg_url)
    assert result.exit_code == 0, result.output
    target = open_pg(pg_url)
    try:
        assert target.get_session(early.id).parent_id == late.id
    finally:
        target.close()


# -- refusals ----------------------------------------------------------------------------------
@postgres
def test_a_non_empty_target_is_refused_untouched_and_force_empties_it(
    vigil_home: Path, postgres_server: str, pg_url: str
) -> None:
    schema = pg_url.rpartition("schema=")[2]
    store = SQLiteStore(vigil_home / "state.db")
    store.append_message(store.create_session(source="cli", title="mine").id, NewMessage("user", "mine"))
    store.close()
    other = open_pg(pg_url)
    stranger = other.create_session(source="cli", title="someone else's")
    other.set_meta("cron:job:theirs", {"x": 1})
    other.close()
    before = target_dump(postgres_server, schema)

    refused = run_cli("store", "migrate", "--to", pg_url)
    assert is_clear_error(refused) and refused.exit_code == 1
    assert f"schema '{schema}'" in refused.output and "already holds a vigil store (1 sessions" in refused.output
    assert "--force" in refused.output and "nothing was written" in refused.output
    code, error, _ = migrate_json("--to", pg_url)
    assert code == 1 and error["error"]["kind"] == "refused"
    assert target_dump(postgres_server, schema) == before

    forced = run_cli("store", "migrate", "--to", pg_url, "--force")
    assert forced.exit_code == 0, forced.output
    assert "Emptied the vigil tables" in forced.stderr and "(--force)" in forced.stderr
    target = open_pg(pg_url)
    try:
        assert [s.title for s in target.list_sessions()] == ["mine"]
        assert target.get_meta("cron:job:theirs") is None
        with pytest.raises(Exception):
            target.get_session(stranger.id)
    finally:
        target.close()
    again = run_cli("store", "migrate", "--to", pg_url)  # a finished migrate is a store like any
    assert is_clear_error(again) and "already holds a vigil store" in again.output


@postgres
def test_a_schema_of_another_program_is_refused_untouched(vigil_home: Path, postgres_server: str, pg_schema: str) -> None:
    import psycopg

    SQLiteStore(vigil_home / "state.db").close()
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{pg_schema}"')
        conn.execute(f'CREATE TABLE "{pg_schema}".customers (id int)')
        conn.execute(f'INSERT INTO "{pg_schema}".customers VALUES (7)')
    result = run_cli("store", "migrate", "--to", with_schema(postgres_server, pg_schema), "--force")
    assert is_clear_error(result) and "holds tables of some other program" in result.output
    with psycopg.connect(postgres_server) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (pg_schema,)).fetchall()
        assert tables == [("customers",)]
        assert conn.execute(f'SELECT id FROM "{pg_schema}".customers').fetchall() == [(7,)]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_bad_input_gets_one_clear_line_and_writes_nothing(vigil_home: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/test?schema=nowhere"
    missing = run_cli("store", "migrate", "--to", url)
    assert is_clear_error(missing) and "no SQLite session store at" in missing.output

    store = SQLiteStore(vigil_home / "state.db")
    store.create_session(source="cli")
    store.close()
    before = state_digest(vigil_home)
    cases = {
        "postgresql://postgres@127.0.0.1:5432/test?schema=Not-Valid": "invalid PostgreSQL schema name",
        "mysql://db/x": "not a supported store",
        str(vigil_home / "other.db"): "must name a PostgreSQL database",
        "relative/state.db": "relative path",
        "postgresql://[::1/test": "invalid PostgreSQL URL",
        url: "cannot connect to PostgreSQL at postgres@127.0.0.1:",
        "postgresql://u:hunter2@127.0.0.1:1/test?sslmode=sometimes": "invalid sslmode",
    }
    for to, reason in cases.items():
        result = run_cli("store", "migrate", "--to", to)
        assert is_clear_error(result) and reason in result.output, (to, result.output)
        assert "hunter2" not in result.output
    assert state_digest(vigil_home) == before

    (vigil_home / "config.yaml").write_text("store:\n  url: postgresql://vigil@db.example/vigil\n")
    on_postgres = run_cli("store", "migrate", "--to", url)
    assert is_clear_error(on_postgres) and "already keeps its sessions in PostgreSQL" in on_postgres.output


def test_a_source_this_vigil_cannot_read_as_it_is_is_refused(vigil_home: Path) -> None:
    from vigil.store.sqlite.migrations import migrate as migrate_schema

    path = vigil_home / "state.db"
    vigil_home.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        migrate_schema(conn, 3)
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/test"
    old = run_cli("store", "migrate", "--to", url)
    assert is_clear_error(old) and "is at schema 3" in old.output and "vigil sessions list" in old.output
    path.write_bytes(b"not a database at all, just text" * 100)
    junk = run_cli("store", "migrate", "--to", url)
    assert is_clear_error(junk) and "not an SQLite file" in junk.output


def test_a_running_gateway_is_named_and_nothing_is_copied(vigil_home: Path) -> None:
    from vigil.gateway.lock import acquire
    from vigil.profiles import get_profile

    SQLiteStore(vigil_home / "state.db").close()
    with acquire(get_profile(None)):
        result = run_cli("store", "migrate", "--to", f"postgresql://postgres@127.0.0.1:{_closed_port()}/test")
    assert is_clear_error(result) and "a gateway is running for profile 'default'" in result.output
    assert f"kill {os.getpid()}" in result.output and "systemctl --user stop" in result.output


# -- interrupted and resumed ---------------------------------------------------------------------
def _spawn(home: Path, url: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "store", "migrate", "--to", url, *extra],
        env={**os.environ, "VIGIL_HOME": str(home), **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for_pause(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "paused after" in line:
            return line
    process.wait()
    raise AssertionError(f"the migrate ended without pausing: {''.join(seen)}{process.stdout.read()}")


def _copied_messages(server: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(server) as conn:
        return int(conn.execute(f'SELECT count(*) FROM "{schema}".messages').fetchone()[0])


@postgres
def test_an_interrupted_migrate_resumes_after_ctrl_c_and_sigkill(
    vigil_home: Path, postgres_server: str, pg_url: str
) -> None:
    schema = pg_url.rpartition("schema=")[2]
    store = SQLiteStore(vigil_home / "state.db", durable=False)
    sessions = [store.create_session(source="cli", title=f"long {n}") for n in range(3)]
    for session in sessions:
        for n in range(1000):
            store.append_message(session.id, NewMessage("user" if n % 2 else "assistant", f"message {n} of {session.id}"))
    store.close()
    before = state_digest(vigil_home)
    pause = {TEST_PAUSE_ENV: str(BATCH_ROWS * 2)}

    # Ctrl-C in the middle: what was committed stays, and it says how to go on.
    first = _spawn(vigil_home, pg_url, env=pause)
    _wait_for_pause(first)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=30)
    assert first.returncode == 130 and "run the same command again to finish" in err and "Traceback" not in err
    after_interrupt = _copied_messages(postgres_server, schema)
    assert 0 < after_interrupt < 3000

    # SIGKILL in the middle of the second run: nothing to clean up, and nothing lost.
    second = _spawn(vigil_home, pg_url, env=pause)
    _wait_for_pause(second)
    meanwhile = run_cli("store", "migrate", "--to", pg_url)  # two migrates never write one schema
    assert is_clear_error(meanwhile) and "another `vigil store migrate` is writing into schema" in meanwhile.output
    second.kill()
    second.wait(timeout=30)
    after_kill = _copied_messages(postgres_server, schema)
    assert after_interrupt < after_kill < 3000

    # Someone else's store is still refused while it is unfinished.
    assert run_cli("profile", "create", "other").exit_code == 0
    SQLiteStore(vigil_home / "profiles" / "other" / "state.db").close()
    refused = run_cli("-p", "other", "store", "migrate", "--to", pg_url)
    assert is_clear_error(refused) and "unfinished migrate from another store" in refused.output

    # The same command finishes, copying only what is missing.
    done = _spawn(vigil_home, pg_url, "--json")
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    report = json.loads(out)
    assert report["ok"] and report["resumed"] and "Resuming the unfinished migrate" in err
    messages = next(t for t in report["tables"] if t["table"] == "messages")
    assert (messages["source_count"], messages["target_count"]) == (3000, 3000)
    assert messages["copied"] == 3000 - after_kill
    shutil.rmtree(vigil_home / "profiles")  # the other profile made above
    assert state_digest(vigil_home) == before
    target = open_pg(pg_url)
    try:
        source = SQLiteStore(vigil_home / "state.db")
        for session in sessions:
            assert target.get_messages(session.id) == source.get_messages(session.id)
        source.close()
    finally:
        target.close()


@postgres
def test_a_source_changed_between_runs_fails_the_verification_naming_the_table(vigil_home: Path, pg_url: str) -> None:
    store = SQLiteStore(vigil_home / "state.db", durable=False)
    session = store.create_session(source="cli", title="before")
    for n in range(BATCH_ROWS * 2):
        store.append_message(session.id, NewMessage("user", f"message {n}"))
    store.close()
    killed = _spawn(vigil_home, pg_url, env={TEST_PAUSE_ENV: str(BATCH_ROWS)})
    _wait_for_pause(killed)  # the session is copied, the messages half
    killed.kill()
    killed.wait(timeout=30)
    store = SQLiteStore(vigil_home / "state.db")
    store.update_session(session.id, title="renamed after it was copied")
    store.close()

    result = run_cli("store", "migrate", "--to", pg_url)
    assert is_clear_error(result) and result.exit_code == 1
    assert "differs from the source in sessions (did something" in result.output, result.output
    assert "MISMATCH" in result.output, result.output
    code, report, _ = migrate_json("--to", pg_url)  # verifies again, and still says so
    assert (code, report["ok"], report["mismatched"], report["resumed"]) == (1, False, ["sessions"], True)
    assert [t["hash_match"] for t in report["tables"] if t["table"] == "sessions"] == [False]

    assert run_cli("store", "migrate", "--to", pg_url, "--force").exit_code == 0
    target = open_pg(pg_url)
    try:
        assert target.get_session(session.id).title == "renamed after it was copied"
    finally:
        target.close()


# -- fuzz -------------------------------------------------------------------------------------
_SERVER = os.environ.get(POSTGRES_URL_ENV, DEFAULT_POSTGRES_URL)
_RUN = uuid.uuid4().hex[:8]
_SAFE = nasty_text(12).map(lambda t: "".join(ch for ch in t if ch not in "#?&@/"))


def _schema_value() -> st.SearchStrategy[str]:
    # A valid name is always this run's own, so a copy that succeeds never lands elsewhere.
    unique = st.integers(0, 10**6).map(lambda n: f"vigil_fuzz_{_RUN}_{n}")
    return st.one_of(unique, unique.map(str.upper), unique.flatmap(lambda u: _SAFE.map(lambda t: u + t)), _SAFE)


_URLS = st.one_of(
    nasty_text(60),
    _schema_value().map(lambda schema: f"{_SERVER}{'&' if '?' in _SERVER else '?'}schema={schema}"),
    st.builds(
        lambda scheme, user, host, db, params, schema: (
            f"{scheme}{user}@{host}/{db}?{'&'.join(params + [f'schema={schema}'])}"
        ),
        st.sampled_from(["postgresql://", "postgres://", "PostgreSQL://", "postgresql:/", "sqlite://", "http://"]),
        st.one_of(st.just("postgres"), st.just("postgres:pw"), _SAFE),
        st.sampled_from(["127.0.0.1:5432", "127.0.0.1:1", "127.0.0.1:99999", "[::1]:1", "127.0.0.1:x", ""]),
        st.one_of(st.just("test"), _SAFE),
        st.lists(
            st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["sslmode", "connect_timeout", "application_name"])
                      | _SAFE, _SAFE | st.sampled_from(["disable", "2", "x"])),
            max_size=2,
        ),
        _schema_value(),
    ),
)


@postgres
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(url=_URLS, json_flag=st.booleans())
def test_fuzzed_to_urls_never_crash_and_a_refusal_writes_nothing(postgres_server: str, url: str, json_flag: bool) -> None:
    try:
        chosen: str | None = check_url(url).schema
    except MigrateError:
        chosen = None
    # A URL the command would try is only run when it names this run's own schema: a copy
    # must never land in a schema of the shared test database that someone else uses.
    assume(chosen is None or re.fullmatch(f"vigil_fuzz_{_RUN}_[a-z0-9_]{{0,40}}", chosen))
    ours = {chosen} if chosen else set()
    try:
        with fresh_home() as home:
            result = check(home, ["store", "migrate", "--to", url, *(["--json"] if json_flag else [])])
        event("copied" if result.exit_code == 0 else "refused")
        if result.exit_code == 0:
            assert "Traceback" not in result.output
        else:
            assert not any(schema_exists(postgres_server, s) for s in ours), (url, result.output)
    finally:
        for schema in ours:
            drop_schema(postgres_server, schema)
