"""``vigil pairing``: listing, approving, denying and revoking through the real command, and
the pairing codes themselves (how they are read, made and kept)."""

from __future__ import annotations

import json
import re
import stat
import time
from pathlib import Path

import pytest

from tests.cli.helpers import is_clear_error, run_cli, state_digest
from tests.cli.test_startup_imports import HEAVY, run_fresh
from vigil.gateway import pairing
from vigil.store import SQLiteStore


def seed(home: Path) -> None:
    """Ann (telegram 42) waits with code K7QM3XPA; Bob (slack U1) is paired; Cy (telegram 9) revoked."""
    home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(home / "state.db")
    now = time.time()
    try:
        for platform, user, name, code in (
            ("slack", "U1", "Bob", "BBBBBBBB"), ("telegram", "9", "Cy", "CCCCCCCC"), ("telegram", "42", "Ann", "K7QM3XPA"),
        ):
            store.pairing.request_code(
                platform, user, display_name=name, chat=f"chat-{user}", thread="", user_key="",
                code_hash=pairing.code_hash(code), nonce="n", now=now - 600,
            )
        store.pairing.approve(pairing.code_hash("BBBBBBBB"), by="owner@box", now=now - 300)
        store.pairing.approve(pairing.code_hash("CCCCCCCC"), by="owner@box", now=now - 300)
        store.pairing.revoke("telegram", "9", by="owner@box", now=now - 60)
    finally:
        store.close()


def test_list_shows_requests_and_users_but_never_a_code(vigil_home: Path) -> None:
    seed(vigil_home)
    (vigil_home / "config.yaml").write_text("telegram:\n  allow: ['1001', '1002']\n")
    result = run_cli("pairing", "list")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Waiting for approval" in out and "Ann" in out and "chat-42" in out and "10m ago" in out
    assert re.search(r"in (49m5\ds|50m)\b", out)
    assert "Paired users" in out and "Bob" in out and "paired" in out and "revoked" in out
    assert "Allowed in config.yaml (telegram.allow): 1001, 1002" in out
    assert "K7QM3XPA" not in out
    data = json.loads(run_cli("pairing", "list", "--json").output)
    assert [(p["platform"], p["user"]) for p in data["pending"]] == [("telegram", "42")]
    assert {(u["user"], u["status"]) for u in data["users"]} == {("U1", "paired"), ("9", "revoked")}
    assert data["allowed_in_config"] == [{"platform": "telegram", "user": "1001"}, {"platform": "telegram", "user": "1002"}]
    assert data["approvals_locked_until"] is None and "K7QM3XPA" not in json.dumps(data)


def test_an_empty_profile_says_nothing_is_waiting(vigil_home: Path) -> None:
    result = run_cli("pairing", "list")
    assert result.exit_code == 0 and "No pairing requests are waiting." in result.output


def test_deny_drops_the_request_and_approve_then_finds_nothing(vigil_home: Path) -> None:
    seed(vigil_home)
    denied = run_cli("pairing", "deny", "k7qm-3xpa", "--json")
    assert denied.exit_code == 0 and json.loads(denied.output)["denied"]["user"] == "42"
    again = run_cli("pairing", "approve", "K7QM3XPA")
    assert is_clear_error(again) and "no pending pairing request has that code" in again.output
    assert json.loads(run_cli("pairing", "list", "--json").output)["pending"] == []


def test_approve_json_names_the_user(vigil_home: Path) -> None:
    seed(vigil_home)
    result = run_cli("pairing", "approve", "K7QM3XPA", "--json")
    assert result.exit_code == 0
    approved = json.loads(result.output)["approved"]
    assert (approved["platform"], approved["user"], approved["name"], approved["status"]) == ("telegram", "42", "Ann", "paired")
    assert approved["approved_by"].endswith("@" + __import__("socket").gethostname())


@pytest.mark.parametrize(
    ("args", "kind", "says"),
    [
        (("approve", "hello"), "usage", "is not a pairing code"),
        (("approve", "K7QM3XP0"), "usage", "no 0, O, 1, I or L"),
        (("revoke", "web", "me"), "refused", "the web chat has no platform users"),
        (("revoke", "telegram", "nobody"), "not_found", "is not paired"),
        (("revoke", "Tele gram", "1"), "usage", "is not a platform name"),
        (("revoke", "telegram", "a b"), "usage", "is not a platform user id"),
    ],
)
def test_refusals_are_one_clear_line_and_change_nothing(vigil_home: Path, args: tuple[str, ...], kind: str, says: str) -> None:
    seed(vigil_home)
    before = state_digest(vigil_home)
    text = run_cli("pairing", *args)
    assert is_clear_error(text) and says in text.output
    as_json = run_cli("pairing", *args, "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.output)["error"]["kind"] == kind
    assert state_digest(vigil_home) == before


def test_revoke_says_what_it_did(vigil_home: Path) -> None:
    seed(vigil_home)
    result = run_cli("pairing", "revoke", "slack", "U1")
    assert result.exit_code == 0 and result.output == "Revoked slack user U1 (Bob): their messages get a pairing code again.\n"
    already = run_cli("pairing", "revoke", "telegram", "9")
    assert already.exit_code == 0 and already.output == "telegram user 9 was revoked already, 1m ago.\n"


def test_listing_pairings_loads_none_of_the_gateway(vigil_home: Path, tmp_path: Path) -> None:
    seed(vigil_home)
    ran = run_fresh("pairing", "list", home=vigil_home, tmp_path=tmp_path)
    assert ran.code == 0 and "Ann" in ran.stdout
    assert ran.loaded(*HEAVY) == []
    assert ran.loaded("vigil.agent", "vigil.models", "vigil.tools", "vigil.gateway.core", "vigil.gateway.adapters") == []


# -- the codes ------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["K7QM3XPA", "k7qm3xpa", "K7QM-3XPA", " k7qm 3xpa\n"])
def test_a_code_is_read_whatever_its_case_spaces_and_dashes(text: str) -> None:
    assert pairing.normalize(text) == "K7QM3XPA"


@pytest.mark.parametrize("text", ["", "K7QM3XP", "K7QM3XPAB", "K7QM3XP0", "K7QM3XPI", "K7QM3XPÄ", "K7QM3XP١"])
def test_anything_else_is_not_a_code(text: str) -> None:
    with pytest.raises(pairing.NotACode):
        pairing.normalize(text)


def test_codes_are_derived_from_the_nonce_per_user_within_the_alphabet() -> None:
    key = b"k" * 64
    code = pairing.derive(key, "nonce", "telegram", "42")
    assert len(code) == pairing.CODE_LENGTH and set(code) <= set(pairing.ALPHABET)
    assert pairing.derive(key, "nonce", "telegram", "42") == code
    others = {pairing.derive(key, "nonce", "telegram", "43"), pairing.derive(key, "other", "telegram", "42"),
              pairing.derive(b"j" * 64, "nonce", "telegram", "42"), pairing.derive(key, "nonce", "slack", "42")}
    assert code not in others
    seen = "".join(pairing.derive(key, str(i), "t", "u") for i in range(400))
    assert set(seen) == set(pairing.ALPHABET)  # every character is used


def test_the_pairing_key_is_private_and_kept(tmp_path: Path) -> None:
    key = pairing.load_or_create_key(tmp_path / "home")
    path = tmp_path / "home" / pairing.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert pairing.load_or_create_key(tmp_path / "home") == key and len(key) >= 32


def test_an_expired_code_is_refused_and_not_counted_as_wrong(vigil_home: Path) -> None:
    vigil_home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(vigil_home / "state.db")
    try:
        store.pairing.request_code(
            "telegram", "42", display_name="Ann", chat="42", thread="", user_key="",
            code_hash=pairing.code_hash("K7QM3XPA"), nonce="n", now=time.time() - 3700,
        )
    finally:
        store.close()
    result = run_cli("pairing", "approve", "K7QM3XPA")
    assert is_clear_error(result) and "that code expired 1m" in result.output and "new one when they write again" in result.output
    store = SQLiteStore(vigil_home / "state.db")
    try:
        assert store.pairing.lock_state(now=time.time()).wrong == 0
        assert store.pairing.user("telegram", "42") is None
    finally:
        store.close()
