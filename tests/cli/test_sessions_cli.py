"""`vigil sessions ...` over a real state.db, as a user would run it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.cli.helpers import is_clear_error, run_cli, run_vigil, state_digest
from vigil.store import NewMessage, SQLiteStore, ToolCall
from vigil.usage import Usage


@pytest.fixture
def seeded(vigil_home: Path) -> dict[str, str]:
    """A profile with a two-segment (compressed) conversation and an unrelated one."""
    vigil_home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(vigil_home / "state.db")
    try:
        first = store.create_session(source="cli", title="Postgres tuning", session_id="aaa111000001")
        store.append_message(first.id, NewMessage("user", "how do I tune postgres shared_buffers?"))
        store.append_message(
            first.id,
            NewMessage(
                "assistant",
                None,
                tool_calls=(ToolCall("c1", "terminal", '{"command": "free -m"}'),),
                usage=Usage(100, 0, 50, 10),
            ),
        )
        store.append_message(first.id, NewMessage("tool", "Mem: 24000", tool_call_id="c1", tool_name="terminal"))
        store.append_message(first.id, NewMessage("assistant", "Use a quarter of RAM.", usage=Usage(20, 150, 0, 8)))
        store.end_session(first.id, "compression")
        cont = store.create_session(source="cli", title="Postgres tuning", parent_id=first.id, session_id="aaa111000002")
        store.append_message(cont.id, NewMessage("summary", "Summary: tuning shared_buffers."))
        store.append_message(cont.id, NewMessage("user", "and work_mem?"))
        other = store.create_session(source="cron", title="Daily report", session_id="bbb222000001")
        store.append_message(other.id, NewMessage("user", "write the daily report"))
    finally:
        store.close()
    return {"first": first.id, "cont": cont.id, "other": other.id}


def test_list_shows_each_conversation_once_with_its_newest_session(seeded: dict[str, str]) -> None:
    listed = json.loads(run_cli("sessions", "list", "--json").output)
    ids = [row["id"] for row in listed]
    assert ids == [seeded["other"], seeded["cont"]]
    compressed = listed[1]
    assert compressed["conversation_root"] == seeded["first"] and compressed["segments"] == 2
    human = run_cli("sessions", "list").output
    assert seeded["cont"] in human and seeded["first"] not in human
    assert "(+1 earlier)" in human


def test_show_by_prefix_and_json(seeded: dict[str, str]) -> None:
    result = run_cli("sessions", "show", "aaa111000001")
    assert result.exit_code == 0
    assert "Postgres tuning" in result.output and "compression" in result.output
    assert "terminal" in result.output
    data = json.loads(run_cli("sessions", "show", "bbb", "--json").output)
    assert data["id"] == seeded["other"]
    assert [m["content"] for m in data["messages"]] == ["write the daily report"]


def test_unknown_and_ambiguous_prefixes_are_distinct_clear_errors(seeded: dict[str, str], vigil_home: Path) -> None:
    db = vigil_home / "state.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    unknown = run_cli("sessions", "show", "ccc")
    assert unknown.exit_code == 1 and "no session matches 'ccc'" in unknown.output
    ambiguous = run_cli("sessions", "rename", "aaa", "x")
    assert ambiguous.exit_code == 1 and "ambiguous" in ambiguous.output and "2 sessions" in ambiguous.output
    deleted = run_cli("sessions", "delete", "aaa", "--yes")
    assert deleted.exit_code == 1
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_search_finds_words_and_survives_query_syntax(seeded: dict[str, str]) -> None:
    hits = json.loads(run_cli("sessions", "search", "shared_buffers", "--json").output)
    assert {h["session_id"] for h in hits} >= {seeded["first"]}
    assert json.loads(run_cli("sessions", "search", "daily", "--json", "--session", "bbb").output)[0][
        "session_id"
    ] == seeded["other"]
    hostile = run_cli("sessions", "search", 'postgres" OR NEAR(', "--json")
    assert hostile.exit_code == 0
    assert run_cli("sessions", "search", "zebra").output.strip() == "No matches."


def test_export_jsonl_and_markdown(seeded: dict[str, str], tmp_path: Path) -> None:
    lines = run_cli("sessions", "export", "aaa111000002", "--conversation").output.splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["type"] for r in records].count("session") == 2
    assert records[0]["id"] == seeded["first"]
    tool_call = next(r for r in records if r.get("tool_calls"))
    assert tool_call["tool_calls"][0]["name"] == "terminal"
    out = tmp_path / "talk.md"
    assert run_cli("sessions", "export", "aaa111000001", "--format", "markdown", "-o", str(out)).exit_code == 0
    text = out.read_text()
    assert text.startswith("# Postgres tuning") and "## Tool result (terminal)" in text
    assert "Use a quarter of RAM." in text


def test_rename_and_delete(seeded: dict[str, str]) -> None:
    assert run_cli("sessions", "rename", "bbb", "Weekly report").exit_code == 0
    assert json.loads(run_cli("sessions", "show", "bbb", "--json").output)["title"] == "Weekly report"
    assert run_cli("sessions", "rename", "bbb", "   ").exit_code != 0
    refused = run_cli("sessions", "delete", "bbb", input="y\n")  # no terminal: nobody to ask
    assert refused.exit_code == 1 and "--yes" in refused.output
    assert run_cli("sessions", "show", "bbb").exit_code == 0
    assert run_cli("sessions", "delete", "bbb", "--yes").exit_code == 0
    assert run_cli("sessions", "show", "bbb").exit_code == 1


def test_damaged_database_file_is_a_clear_error_and_untouched(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True)
    db = vigil_home / "state.db"
    db.write_bytes(b"this is not a database, just some notes\n" * 50)
    before = db.read_bytes()
    result = run_vigil("sessions", "list", home=vigil_home)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and str(db) in result.stderr
    assert db.read_bytes() == before


def test_usage_reports_tokens_and_hit_ratio(seeded: dict[str, str]) -> None:
    data = json.loads(run_cli("usage", "--json").output)
    assert data["total"]["input_tokens"] == 120
    assert data["total"]["cache_read_tokens"] == 150
    assert data["total"]["cache_write_tokens"] == 50
    assert data["total"]["output_tokens"] == 18
    assert data["total"]["cache_hit_ratio"] == pytest.approx(150 / 320, abs=1e-4)
    one = json.loads(run_cli("usage", "--session", "aaa111000001", "--json").output)
    assert [s["id"] for s in one["sessions"]] == [seeded["first"]]
    assert "total" in run_cli("usage").output


def test_export_to_a_missing_folder_is_one_clear_line(seeded: dict[str, str], tmp_path: Path) -> None:
    result = run_cli("sessions", "export", "bbb", "-o", str(tmp_path / "nope" / "x.jsonl"))
    assert result.exit_code == 1 and "cannot write" in result.output and "Traceback" not in result.output
    out = tmp_path / "private.jsonl"
    assert run_cli("sessions", "export", "bbb", "-o", str(out)).exit_code == 0
    assert out.stat().st_mode & 0o777 == 0o600


def test_source_filter_applies_before_the_limit(seeded: dict[str, str], vigil_home: Path) -> None:
    store = SQLiteStore(vigil_home / "state.db")
    newest = store.create_session(source="cli", title="[bold]not markup[/bold] [/]")
    store.append_message(newest.id, NewMessage("user", "hi"))
    store.close()
    listed = json.loads(run_cli("sessions", "list", "-n", "1", "--source", "cron", "--json").output)
    assert [row["id"] for row in listed] == [seeded["other"]]
    assert run_cli("sessions", "list", "-n", "-1").exit_code == 2
    usage = run_cli("usage")
    assert usage.exit_code == 0 and "[/]" in usage.output


def test_deleting_part_of_a_compressed_conversation_is_refused_naming_it(
    seeded: dict[str, str], vigil_home: Path
) -> None:
    before = state_digest(vigil_home)
    for part in (seeded["first"], seeded["cont"]):
        refused = run_cli("sessions", "delete", part, "--yes")
        assert is_clear_error(refused), refused.output
        assert seeded["first"] in refused.output and seeded["cont"] in refused.output
        assert "--conversation" in refused.output and "6 messages" in refused.output
    assert state_digest(vigil_home) == before


def test_deleting_a_whole_conversation_says_what_went_and_usage_says_it_is_left_out(
    seeded: dict[str, str],
) -> None:
    assert run_cli("usage", "--json").exit_code == 0
    assert json.loads(run_cli("usage", "--json").output)["excluded_deleted"]["sessions"] == 0
    assert "deleted" not in run_cli("usage").output
    deleted = run_cli("sessions", "delete", seeded["cont"], "--conversation", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert "2 sessions, 6 messages" in deleted.output
    assert [row["id"] for row in json.loads(run_cli("sessions", "list", "--json").output)] == [seeded["other"]]
    assert run_cli("sessions", "show", seeded["first"]).exit_code == 1
    data = json.loads(run_cli("usage", "--json").output)
    assert data["total"]["input_tokens"] == 0 and data["total"]["sessions"] == 1
    left_out = data["excluded_deleted"]
    assert (left_out["sessions"], left_out["messages"], left_out["input_tokens"], left_out["output_tokens"]) == (
        2, 6, 120, 18
    )
    assert "leaves out 2 deleted session(s)" in run_cli("usage").output
    # a session of its own goes alone, and is counted too
    assert "Deleted session" in run_cli("sessions", "delete", seeded["other"], "--conversation", "--yes").output
    assert json.loads(run_cli("usage", "--json").output)["excluded_deleted"]["sessions"] == 3


def test_times_in_lists_show_and_search_carry_the_profiles_zone(seeded: dict[str, str], vigil_home: Path) -> None:
    assert run_cli("config", "set", "timezone", "Asia/Tokyo").exit_code == 0
    listed = run_cli("sessions", "list")
    assert listed.exit_code == 0 and " JST" in listed.output
    shown = run_cli("sessions", "show", seeded["first"])
    assert shown.exit_code == 0 and "JST" in shown.output.split("started", 1)[1].split("\n", 1)[0]
    found = run_cli("sessions", "search", "postgres")
    assert found.exit_code == 0 and " JST " in found.output
