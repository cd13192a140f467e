"""Fuzz: the pairing code and the platform user ids of ``vigil pairing``, through the real
command, against a profile with a pending code and a paired user.

Every case ends with exit code 0 or one clear error line and no traceback. Refused input
writes nothing — except a well-formed code that matches no request, which is a wrong code and
is counted (one ``pairing_events`` row, nothing else).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli.helpers import is_clear_error, state_digest
from tests.fuzz.cli_helpers import check, invoke, nasty_text
from vigil.gateway import pairing
from vigil.store import SQLiteStore

CODE = "K7QM3XPA"
PAIRED = "7"


@functools.lru_cache(maxsize=1)
def _template() -> Path:
    root = Path(tempfile.mkdtemp(prefix="vigil-fuzz-pairing-"))
    atexit.register(shutil.rmtree, root, True)
    home = root / "home"
    home.mkdir()
    store = SQLiteStore(home / "state.db")
    try:
        far = time.time() + 10 * 365 * 86400  # pending for the whole run
        store.pairing.request_code(
            "telegram", "42", display_name="Ann", chat="42", thread="", user_key="",
            code_hash=pairing.code_hash(CODE), nonce="n", now=far - 3000,
        )
        store.pairing.request_code(
            "telegram", PAIRED, display_name="", chat="7", thread="", user_key="",
            code_hash=pairing.code_hash("ABCDEFGH"), nonce="m", now=time.time(),
        )
        store.pairing.approve(pairing.code_hash("ABCDEFGH"), by="fuzz", now=time.time())
    finally:
        store.close()
    return home


@contextlib.contextmanager
def _home() -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="vigil-fuzz-"))
    home = where / "home"
    shutil.copytree(_template(), home)
    try:
        yield home
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _well_formed(text: str) -> bool:
    try:
        pairing.normalize(text)
    except pairing.NotACode:
        return False
    return True


CODE_TEXT = st.one_of(
    nasty_text(24),
    st.text(alphabet=pairing.ALPHABET + "abc-01OIL ", min_size=6, max_size=11),
    st.sampled_from([CODE, CODE.lower(), "K7QM-3XPA", " k7qm 3xpa ", "K7QM3XP", "K7QM3XPAA", "K7QM3XP0"]),
)


@settings(max_examples=150, deadline=None)
@given(text=CODE_TEXT, action=st.sampled_from(["approve", "deny"]), as_json=st.booleans())
def test_codes(text: str, action: str, as_json: bool) -> None:
    with _home() as home:
        before, untouched = state_digest(home, skip_rows=("pairing_events",)), state_digest(home)
        args = ["pairing", action, *(["--json"] if as_json else []), "--", text]
        result = invoke(home, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.output)
        assert result.exit_code == 0 or is_clear_error(result), (args, result.output)
        right = _well_formed(text) and pairing.normalize(text) == CODE
        assert (result.exit_code == 0) == right, (text, result.output)
        if result.exit_code != 0:
            # only a wrong code that could be one is counted; nothing else changes
            assert state_digest(home, skip_rows=("pairing_events",)) == before
            assert _well_formed(text) or state_digest(home) == untouched


USER_TEXT = st.one_of(nasty_text(70), st.sampled_from([PAIRED, "42", "7 ", "x" * 65, "a:b@c.d+e-f_g", "-7", "--json"]))
PLATFORM_TEXT = st.one_of(st.sampled_from(["telegram", "slack", "web", "matrix", "Telegram", ""]), nasty_text(34))


@settings(max_examples=150, deadline=None)
@given(platform=PLATFORM_TEXT, user=USER_TEXT, as_json=st.booleans())
def test_revoke_arguments(platform: str, user: str, as_json: bool) -> None:
    with _home() as home:
        result = check(home, ["pairing", "revoke", *(["--json"] if as_json else []), "--", platform, user])
        assert (result.exit_code == 0) == (platform == "telegram" and user == PAIRED), (platform, user, result.output)
