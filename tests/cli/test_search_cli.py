"""`vigil sessions search` with its small query language, over conversations a real agent
wrote and compressed (the fake model over HTTP answers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import is_clear_error, run_cli
from vigil.agent.compression import SUMMARY_REQUEST_MARKER
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer

FILL = "lorem ipsum dolor sit amet " * 30


@pytest.fixture
def compressed(fake_model: FakeModelServer, vigil_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """One conversation of eight turns, compressed at least once on the way; turns 6 and 7
    are about walruses, the others about penguins. Returns the newest session's id."""
    assert run_cli("config", "set", "model.context_window", "2000").exit_code == 0
    assert run_cli("config", "set", "agent.compression_threshold", "0.5").exit_code == 0
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply="## Goal\nTalk about animals.")
    fake_model.set_default_reply("Noted.")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_model.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", fake_model.api_key)
    for i in range(8):
        animal = "walrus" if i >= 6 else "penguin"
        again = [] if i == 0 else ["--continue"]
        result = run_cli("chat", *again, "-q", f"turn {i} about the {animal}: {FILL}")
        assert result.exit_code == 0, result.output
    listed = json.loads(run_cli("sessions", "list", "--json").output)
    assert len(listed) == 1 and listed[0]["segments"] >= 2, listed
    return str(listed[0]["id"])


def _turns(vigil_home: Path, *query: str) -> list[tuple[str, int]]:
    """(session id, turn number) of each user message the search lists."""
    hits = json.loads(run_cli("sessions", "search", *query, "--json", "-n", "100").output)
    store = SQLiteStore(vigil_home / "state.db")
    try:
        text = {m.id: m.content or "" for s in store.list_sessions() for m in store.get_messages(s.id)}
    finally:
        store.close()
    return sorted(
        (h["session_id"], int(text[h["message_id"]].split()[1])) for h in hits if h["role"] == "user"
    )


def test_search_over_a_compressed_conversation(compressed: str, vigil_home: Path) -> None:
    # the walrus turns were carried into the newest session: listed once, there
    assert _turns(vigil_home, "walrus") == [(compressed, 6), (compressed, 7)]
    # every turn is listed exactly once, whichever session holds it last
    assert sorted(turn for _, turn in _turns(vigil_home, "lorem")) == list(range(8))

    def numbers(*query: str) -> list[int]:
        return sorted(turn for _, turn in _turns(vigil_home, *query))

    assert numbers("walr*") == [6, 7]
    assert numbers("walrus OR penguin") == list(range(8))
    assert numbers("lorem", "NOT", "penguin") == [6, 7]
    assert numbers('"about the walrus"') == [6, 7]
    assert numbers('"the walrus about"') == []
    assert "«walrus»" in run_cli("sessions", "search", "walr*").output


@pytest.mark.parametrize("query", [["NOT", "walrus"], ["?!"], ["*"]])
def test_a_search_with_nothing_to_look_for_is_a_clear_error(query: list[str]) -> None:
    result = run_cli("sessions", "search", *query)
    assert is_clear_error(result) and "nothing to search for" in result.output


def test_help_documents_the_query_language() -> None:
    text = run_cli("sessions", "search", "--help").output
    for example in ("pine*", "pine OR cedar", "pine NOT cone", '"pine cone"'):
        assert example in text
