"""``vigil doctor`` through the real CLI, against real stores, the fake model server and real
files: what it reports, its exit code, its ``--json``, and that it never writes anything."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.helpers import run_cli
from tests.store import conftest as store_fixtures
from vigil.doctor import STATUSES
from vigil.store.sqlite.migrations import LATEST_VERSION, migrate
from vigil.testing.fake_model import FakeModelServer

# The PostgreSQL fixtures of the store tests: the test server, a fresh schema per test.
postgres_server = store_fixtures.postgres_server
pg_schema = store_fixtures.pg_schema
pg_url = store_fixtures.pg_url


def doctor(*args: str) -> tuple[int, dict[str, Any]]:
    """``vigil [ARGS] doctor --json``: the exit code and the report."""
    result = run_cli(*args, "doctor", "--json")
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.output)


def check(report: dict[str, Any], area: str, name: str) -> dict[str, Any]:
    found = [c for c in report["checks"] if c["area"] == area and c["name"] == name]
    assert len(found) == 1, (area, name, report["checks"])
    return found[0]


def problems(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in report["checks"] if c["status"] == "problem"]


def snapshot(home: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``home`` with its bytes, mtime (ns) and mode: equal before and after
    means nothing was written, created or removed."""
    files = {}
    for path in sorted(home.rglob("*")) if home.exists() else []:
        if path.is_file():
            info = path.stat()
            files[str(path.relative_to(home))] = (path.read_bytes(), info.st_mtime_ns, info.st_mode)
    return files


def closed_port() -> int:
    """A loopback port nobody listens on (the OS picked it free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def healthy(vigil_home: Path, fake_model_env: FakeModelServer) -> Path:
    """A profile whose SQLite store the CLI created, talking to the fake model."""
    assert run_cli("sessions", "list").exit_code == 0
    assert (vigil_home / "state.db").exists()
    return vigil_home


def test_a_healthy_sqlite_profile_passes_and_nothing_is_written(healthy: Path) -> None:
    before = snapshot(healthy)
    code, report = doctor()
    assert code == 0 and report["ok"] is True
    assert problems(report) == []
    for name in ("session database", "WAL mode", "schema", "permissions", "damaged prompts"):
        assert check(report, "store", name)["status"] == "ok", name
    assert f"schema {LATEST_VERSION}" in check(report, "store", "schema")["detail"]
    assert check(report, "model", "configured")["status"] == "ok"
    reachable = check(report, "model", "reachable")
    assert reachable["status"] == "ok" and "1 model(s)" in reachable["detail"]
    assert check(report, "gateway", "gateway")["detail"].startswith("not running")
    assert snapshot(healthy) == before

    plain = run_cli("doctor")
    assert plain.exit_code == 0
    lines = [line for line in plain.output.splitlines() if line and not line.startswith(" ")]
    assert all(line.split()[0] in ("ok", "warning") for line in lines[:-1]), plain.output
    assert "store: schema:" in plain.output and lines[-1].endswith("0 problems")


def test_a_store_another_process_has_open_is_read_without_disturbing_it(healthy: Path) -> None:
    from vigil.store.sqlite import SQLiteStore

    store = SQLiteStore(healthy / "state.db")
    try:
        store.set_meta("probe", {"n": 1})
        before = snapshot(healthy)
        code, report = doctor()
        assert code == 0 and check(report, "store", "schema")["status"] == "ok"
        assert {k: v for k, v in snapshot(healthy).items() if not k.startswith("state.db-")} == {
            k: v for k, v in before.items() if not k.startswith("state.db-")
        }
        assert store.get_meta("probe").value == {"n": 1}  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_running_gateway_is_named_and_a_hung_one_is_a_warning(healthy: Path) -> None:
    from vigil.clock import SystemClock
    from vigil.gateway.lock import acquire
    from vigil.gateway.status import StatusKeeper
    from vigil.profiles import get_profile
    from vigil.store.sqlite import SQLiteStore

    profile = get_profile(None)
    with acquire(profile):
        code, report = doctor()
        hung = check(report, "gateway", "gateway")
        assert code == 0 and hung["status"] == "warning" and hung["detail"].startswith("unresponsive")
        store = SQLiteStore(healthy / "state.db")
        try:
            StatusKeeper(store, SystemClock(), lambda: {}).write()
            _, report = doctor()
        finally:
            store.close()
        running = check(report, "gateway", "gateway")
        assert running["status"] == "ok" and running["detail"] == f"running (pid {os.getpid()})"
    _, report = doctor()
    assert check(report, "gateway", "gateway")["detail"].startswith("not running (last seen ")


def test_a_broken_config_is_the_problem_named_and_it_stays_as_it_was(vigil_home: Path) -> None:
    config = write_config(vigil_home, "model:\n  provider: [openai\n")
    before = snapshot(vigil_home)
    code, report = doctor()
    assert code == 1 and report["ok"] is False
    found = check(report, "config", "config.yaml")
    assert found["status"] == "problem" and "config.yaml:3: invalid YAML" in found["detail"] and found["fix"]
    for area, name in (
        ("store", "session store"),
        ("model", "model"),
        ("platforms", "platforms"),
        ("sandbox", "bubblewrap"),
    ):
        assert check(report, area, name)["status"] == "skipped"
    assert snapshot(vigil_home) == before and sorted(p.name for p in vigil_home.iterdir()) == [config.name]

    plain = run_cli("doctor")
    assert plain.exit_code == 1
    assert plain.output.startswith("ok       config: profile")
    assert "problem  config: config.yaml:" in plain.output and "\n         fix: " in plain.output


def test_an_unreachable_model_endpoint_is_a_problem_with_a_fix(
    vigil_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    code, report = doctor()
    assert code == 1
    found = check(report, "model", "reachable")
    assert found["status"] == "problem" and "cannot reach http://127.0.0.1:" in found["detail"]
    assert "model.base_url" in found["fix"] and "OPENAI_BASE_URL" in found["fix"]


def test_no_model_at_all_is_a_problem_naming_the_ways_to_get_one(vigil_home: Path) -> None:
    code, report = doctor()
    assert code == 1
    found = check(report, "model", "configured")
    assert found["status"] == "problem" and "OPENAI_API_KEY" in found["fix"] and "vigil models add" in found["fix"]


def test_a_wrong_model_name_is_a_warning_listing_the_endpoints_models(
    vigil_home: Path, fake_model_env: FakeModelServer
) -> None:
    write_config(vigil_home, "model:\n  name: no-such-model\n")
    code, report = doctor()
    found = check(report, "model", "reachable")
    assert code == 0 and found["status"] == "warning" and "fake-model" in found["fix"]


def test_a_refused_key_is_a_problem_naming_the_variable(
    vigil_home: Path, fake_model_env: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "wrong-key-5d1e")
    code, report = doctor()
    found = check(report, "model", "reachable")
    assert code == 1 and found["status"] == "problem" and "OPENAI_API_KEY" in found["fix"]
    assert "wrong-key-5d1e" not in json.dumps(report)


def test_slack_without_its_token_names_the_variable_and_never_prints_a_value(
    vigil_home: Path, fake_model_env: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli("profile", "create", "work").exit_code == 0
    write_config(vigil_home / "profiles" / "work", "slack:\n  enabled: true\n")
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    monkeypatch.delenv("SLACK_SIGNING_SECRET", raising=False)
    code, report = doctor("-p", "work")
    found = check(report, "platforms", "slack secrets")
    assert code == 1 and found["status"] == "problem"
    assert "SLACK_BOT_TOKEN" in found["detail"] and "export SLACK_BOT_TOKEN=" in found["fix"]
    assert check(report, "platforms", "slack SDK")["status"] == "ok"

    token, secret = "xoxb-do-not-print-4242", "signing-do-not-print-9191"
    monkeypatch.setenv("SLACK_BOT_TOKEN", token)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", secret)
    code, report = doctor("-p", "work")
    assert check(report, "platforms", "slack secrets")["status"] == "ok"
    plain = run_cli("-p", "work", "doctor")
    for output in (json.dumps(report), plain.output):
        assert token not in output and secret not in output
    assert "SLACK_BOT_TOKEN" in plain.output


def test_telegram_webhook_needs_its_secret_and_url(vigil_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(vigil_home, "telegram:\n  enabled: true\n  mode: webhook\n")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    monkeypatch.delenv("TELEGRAM_WEBHOOK_SECRET", raising=False)
    _, report = doctor()
    assert "TELEGRAM_WEBHOOK_SECRET" in check(report, "platforms", "telegram secrets")["detail"]
    assert "telegram.webhook_url" in check(report, "platforms", "telegram webhook")["fix"]


def _store_at(path: Path, version: int) -> None:
    """An SQLite store as an older vigil (at ``version``) left it: migrated that far, closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    migrate(conn, version)
    conn.close()


def test_an_older_store_reports_its_pending_migrations_and_is_not_migrated(
    vigil_home: Path, fake_model_env: FakeModelServer
) -> None:
    db = vigil_home / "state.db"
    _store_at(db, 3)
    before = snapshot(vigil_home)
    code, report = doctor()
    found = check(report, "store", "schema")
    assert code == 0 and found["status"] == "warning"
    assert f"schema 3, this vigil expects {LATEST_VERSION}" in found["detail"]
    assert f"{LATEST_VERSION - 3} migration(s) pending" in found["detail"] and "next time" in found["fix"]
    assert check(report, "store", "damaged prompts")["status"] == "skipped"
    assert snapshot(vigil_home) == before
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone() == (3,)


def test_a_store_from_a_newer_vigil_is_a_problem_and_left_alone(
    vigil_home: Path, fake_model_env: FakeModelServer
) -> None:
    db = vigil_home / "state.db"
    _store_at(db, LATEST_VERSION)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)", (LATEST_VERSION + 1,))
    conn.close()
    before = snapshot(vigil_home)
    code, report = doctor()
    found = check(report, "store", "schema")
    assert code == 1 and found["status"] == "problem"
    assert "this vigil is older than the store" in found["detail"] and "upgrade" in found["fix"]
    assert snapshot(vigil_home) == before


def test_a_file_that_is_not_a_database_is_a_problem(vigil_home: Path, fake_model_env: FakeModelServer) -> None:
    vigil_home.mkdir(parents=True)
    (vigil_home / "state.db").write_bytes(b"not a database at all" * 100)
    before = snapshot(vigil_home)
    code, report = doctor()
    found = check(report, "store", "session database")
    assert code == 1 and "not an SQLite file" in found["detail"] and "mv " in found["fix"]
    assert snapshot(vigil_home) == before


def test_loose_permissions_are_named_with_the_chmod_to_run(healthy: Path) -> None:
    (healthy / "state.db").chmod(0o644)
    (healthy / "gateway.token").write_text("token\n")
    (healthy / "gateway.token").chmod(0o644)
    code, report = doctor()
    store = check(report, "store", "permissions")
    assert store["status"] == "warning" and store["fix"] == f"chmod 600 {healthy / 'state.db'}"
    token = check(report, "gateway", "web token")
    assert (
        code == 1
        and token["status"] == "problem"
        and token["fix"].startswith(f"chmod 600 {healthy / 'gateway.token'}")
    )
    assert "token\n" not in token["detail"]


def test_damaged_stored_prompts_are_counted_with_the_repair_command(healthy: Path) -> None:
    from vigil.store.sqlite import SQLiteStore

    store = SQLiteStore(healthy / "state.db")
    try:
        for n in range(3):
            store.create_session(source="cli", system_prompt=f"You are helper {n}.")
        tampered = store.create_session(source="cli", system_prompt="You are the tampered one.")
    finally:
        store.close()
    conn = sqlite3.connect(healthy / "state.db", isolation_level=None)
    conn.execute(
        "UPDATE system_prompts SET text = 'changed by hand' WHERE hash = ?", (tampered.system_prompt_hash,)
    )
    conn.close()
    code, report = doctor()
    found = check(report, "store", "damaged prompts")
    assert code == 0 and found["status"] == "warning" and found["detail"].startswith("1 session(s)")
    assert found["fix"].startswith("vigil sessions repair-prompts --dry-run")


def test_a_local_model_is_checked_without_loading_it(vigil_home: Path, tmp_path: Path) -> None:
    import importlib.util

    gguf = tmp_path / "tiny.gguf"
    write_config(vigil_home, f"model:\n  provider: local\n  path: {gguf}\n")
    _, report = doctor()
    missing = check(report, "model", "model file")
    assert (
        missing["status"] == "problem"
        and "does not exist" in missing["detail"]
        and "vigil models list" in missing["fix"]
    )
    gguf.write_bytes(b"GGUF" + bytes(60))
    _, report = doctor()
    assert check(report, "model", "model file")["status"] == "ok"
    engine = check(report, "model", "xllamacpp")
    assert engine["status"] == ("ok" if importlib.util.find_spec("xllamacpp") else "problem")


def test_the_json_report_has_one_shape(healthy: Path) -> None:
    code, report = doctor()
    assert set(report) == {"ok", "counts", "checks"}
    assert set(report["counts"]) == set(STATUSES) and sum(report["counts"].values()) == len(report["checks"])
    areas = []
    for item in report["checks"]:
        assert set(item) == {"area", "name", "status", "detail", "fix"}
        assert item["status"] in STATUSES and isinstance(item["detail"], str) and item["detail"]
        assert item["fix"] is None or (item["status"] in ("warning", "problem") and item["fix"])
        areas.append(item["area"])
    assert list(dict.fromkeys(areas)) == ["config", "store", "platforms", "sandbox", "model", "gateway"]
    assert report["ok"] is (code == 0)


def test_a_missing_named_profile_is_a_one_line_error(vigil_home: Path) -> None:
    result = run_cli("-p", "nosuch", "doctor")
    assert result.exit_code == 1 and "profile 'nosuch' does not exist" in result.output
    assert "Traceback" not in result.output and not vigil_home.exists()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=300) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_config_bytes_give_a_report_never_a_traceback_or_a_write(vigil_home: Path, content: bytes) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    (vigil_home / "config.yaml").write_bytes(content)
    before = snapshot(vigil_home)
    result = run_cli("doctor", "--json")
    assert result.exit_code in (0, 1) and "Traceback" not in result.output
    report = json.loads(result.output)
    assert check(report, "config", "config.yaml")["status"] in ("ok", "problem", "warning")
    assert snapshot(vigil_home) == before


# -- PostgreSQL -----------------------------------------------------------------------------


def _pg_config(home: Path, url: str) -> None:
    write_config(home, f"store:\n  url: '{url}'\n")


def _pg_version(server: str, schema: str) -> int | None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        found = conn.execute("SELECT pg_catalog.to_regclass(%s)", (f'"{schema}".schema_migrations',)).fetchone()
        if found is None or found[0] is None:
            return None
        row = conn.execute(f'SELECT MAX(version) FROM "{schema}".schema_migrations').fetchone()
        return None if row is None else row[0]


@pytest.mark.postgres
def test_a_healthy_postgres_store_passes(vigil_home: Path, fake_model_env: FakeModelServer, pg_url: str) -> None:
    from vigil.store.postgres import PostgresStore
    from vigil.store.postgres.migrations import LATEST_VERSION as PG_LATEST

    PostgresStore(pg_url).close()
    _pg_config(vigil_home, pg_url)
    code, report = doctor()
    assert code == 0 and problems(report) == []
    assert "answers (PostgreSQL " in check(report, "store", "PostgreSQL server")["detail"]
    assert f"schema {PG_LATEST}" in check(report, "store", "schema")["detail"]
    pool = check(report, "store", "connection pool")
    assert pool["status"] in ("ok", "warning") and " ms (median of " in pool["detail"]
    assert check(report, "store", "damaged prompts")["status"] == "ok"


@pytest.mark.postgres
def test_postgres_schemas_are_reported_never_created_or_migrated(
    vigil_home: Path, fake_model_env: FakeModelServer, postgres_server: str, pg_schema: str, pg_url: str
) -> None:
    import psycopg

    from vigil.store.postgres.migrations import migrate as pg_migrate

    _pg_config(vigil_home, pg_url)
    code, report = doctor()
    assert code == 0 and "first use creates the schema" in check(report, "store", "schema")["detail"]
    assert _pg_version(postgres_server, pg_schema) is None

    with psycopg.connect(postgres_server) as conn:
        pg_migrate(conn, pg_schema, 1)
    code, report = doctor()
    found = check(report, "store", "schema")
    assert code == 0 and found["status"] == "warning" and "schema 1, this vigil expects" in found["detail"]
    assert _pg_version(postgres_server, pg_schema) == 1


@pytest.mark.postgres
def test_an_unreachable_postgres_is_a_problem(vigil_home: Path, fake_model_env: FakeModelServer) -> None:
    _pg_config(vigil_home, f"postgresql://vigil:hunter2secret@127.0.0.1:{closed_port()}/test")
    code, report = doctor()
    found = check(report, "store", "PostgreSQL server")
    assert code == 1 and found["status"] == "problem" and "cannot connect to PostgreSQL" in found["detail"]
    assert "pg_isready -d postgresql://vigil@127.0.0.1:" in found["fix"]
    assert "hunter2secret" not in json.dumps(report)


@pytest.mark.postgres
def test_several_gateway_workers_on_postgres_are_counted_and_a_gone_one_is_a_warning(
    vigil_home: Path, fake_model_env: FakeModelServer, pg_url: str
) -> None:
    from vigil.clock import SystemClock
    from vigil.gateway.status import StatusKeeper, WorkerIdentity
    from vigil.store.postgres import PostgresStore

    _pg_config(vigil_home, pg_url)
    store = PostgresStore(pg_url)
    try:
        here = socket.gethostname()
        for worker_id in ("a" * 16, "b" * 16):
            StatusKeeper(store, SystemClock(), lambda: {},
                         worker=WorkerIdentity(worker_id, f"{here}:{os.getpid()}:{worker_id}", 30.0)).write()
        code, report = doctor()
        both = check(report, "gateway", "gateway")
        assert code == 0 and both["status"] == "ok" and both["detail"].startswith("2 worker(s) running on the shared store")
        # A worker that wrote its record and died without a word (as SIGKILL leaves it).
        subprocess.run([sys.executable, "-c", (
            "import os, socket; from vigil.clock import SystemClock; from vigil.store.postgres import PostgresStore\n"
            "from vigil.gateway.status import StatusKeeper, WorkerIdentity\n"
            f"store = PostgresStore({pg_url!r})\n"
            "StatusKeeper(store, SystemClock(), lambda: {}, worker=WorkerIdentity("
            "'c' * 16, f'{socket.gethostname()}:{os.getpid()}:c', 30.0)).write()\n"
            "os._exit(0)"
        )], check=True)
        code, report = doctor()
    finally:
        store.close()
    gone = check(report, "gateway", "gateway")
    assert code == 0 and gone["status"] == "warning" and "1 gone without stopping" in gone["detail"], gone
    assert "vigil gateway status" in gone["fix"]


def test_the_sandbox_is_reported_per_channel_with_what_it_hides(
    vigil_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.tools.sandbox_helpers import require_sandbox

    require_sandbox()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user" / ".ssh").mkdir(parents=True)
    _, report = doctor()
    assert check(report, "sandbox", "bubblewrap")["status"] == "ok"
    attended, unattended = check(report, "sandbox", "attended"), check(report, "sandbox", "unattended")
    assert attended["status"] == "ok" and "): every command sandboxed" in attended["detail"]
    assert all(name in attended["detail"] for name in ("the REPL", "the web chat", "Slack", "Telegram"))
    assert unattended["status"] == "ok" and "nothing leaves the sandbox" in unattended["detail"]
    hidden = check(report, "sandbox", "hidden")["detail"]
    assert str(vigil_home) in hidden and "~/.ssh" in hidden
    assert check(report, "sandbox", "network")["status"] in ("ok", "warning")

    assert run_cli("config", "set", "tools.terminal.sandbox", "unattended").exit_code == 0
    _, report = doctor()
    found = check(report, "sandbox", "attended")
    assert found["status"] == "warning" and "commands run unsandboxed" in found["detail"]


def test_a_missing_bubblewrap_is_loud_and_says_what_each_channel_does_instead(
    vigil_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    code, report = doctor()
    assert code == 1
    found = check(report, "sandbox", "bubblewrap")
    assert found["status"] == "problem" and "bubblewrap (bwrap) is not installed" in found["detail"]
    assert found["fix"] == "sudo apt-get install bubblewrap"
    assert check(report, "sandbox", "attended")["detail"].endswith("every command asks for approval first")
    unattended = check(report, "sandbox", "unattended")
    assert unattended["status"] == "problem" and "cannot run terminal commands" in unattended["detail"]
