"""`vigil sessions archive` and what `list` and `delete` do with archived conversations and
heartbeats, consistent with the web chat's Archive and Delete."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import run_cli
from tests.cli.test_sessions_cli import seeded  # noqa: F401  (the fixture)
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.store import SQLiteStore


def _ids(*args: str) -> list[str]:
    return [row["id"] for row in json.loads(run_cli("sessions", "list", "--json", *args).output)]


def test_an_archived_conversation_leaves_the_list_and_comes_back(seeded: dict[str, str]) -> None:  # noqa: F811
    done = run_cli("sessions", "archive", seeded["first"])  # any session of it: the whole conversation
    assert done.exit_code == 0 and f"Archived {seeded['cont']}" in done.output
    assert _ids() == [seeded["other"]]
    assert _ids("--archived") == [seeded["cont"]]
    assert "archived already" in run_cli("sessions", "archive", seeded["cont"]).output
    assert seeded["cont"] not in run_cli("sessions", "list").output
    back = run_cli("sessions", "archive", "--undo", seeded["cont"])
    assert back.exit_code == 0 and "Brought back" in back.output
    assert _ids() == [seeded["other"], seeded["cont"]] and _ids("--archived") == []


def test_delete_clears_the_heartbeat_and_the_archive_entry(seeded: dict[str, str], vigil_home: Path) -> None:  # noqa: F811
    store = SQLiteStore(vigil_home / "state.db")
    try:
        HeartbeatRepo(store).set(seeded["other"], "say tick", 3600)
    finally:
        store.close()
    run_cli("sessions", "archive", seeded["other"])
    assert run_cli("sessions", "delete", seeded["other"], "--yes").exit_code == 0
    store = SQLiteStore(vigil_home / "state.db")
    try:
        assert HeartbeatRepo(store).list() == []
        assert store.list_meta("conversation-archived:") == []
    finally:
        store.close()


def test_rename_follows_the_web_chats_title_rule(seeded: dict[str, str]) -> None:  # noqa: F811
    refused = run_cli("sessions", "rename", seeded["other"], "report\u202etxt.exe")
    assert refused.exit_code == 1 and "U+202E" in refused.output
    assert "longer than 200" in run_cli("sessions", "rename", seeded["other"], "x" * 201).output
    assert run_cli("sessions", "rename", seeded["other"], "family 👨\u200d👩\u200d👧").exit_code == 0
