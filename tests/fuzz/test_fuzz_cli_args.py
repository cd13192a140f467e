"""Fuzz: text arguments of the CLI, through the real ``vigil`` command.

Session references and prefixes, titles, cron job names and prompts, search words and the
options that take text get arbitrary text: undecodable bytes (surrogate escapes), control
characters, rich markup, non-ASCII digits, dashes, quotes. Every case ends with exit code 0
or one clear error line, and a refused case leaves the profile byte for byte as it was.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Iterator

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.cli_helpers import JOB, SESSIONS, check, fresh_home, invoke, nasty_text
from vigil.testing.fake_model import FakeModelServer

REFERENCE = st.one_of(
    nasty_text(20),
    st.sampled_from([*SESSIONS, "abc1", "abc", "a", "ABC100000001", " abc100000001", "def2", "f" * 70]),
    st.sampled_from(SESSIONS).map(lambda s: s[: len(s) // 2]),
)

COMMANDS_WITH_A_REFERENCE = [
    lambda ref: ["sessions", "show", ref],
    lambda ref: ["sessions", "show", ref, "--json"],
    lambda ref: ["sessions", "export", ref, "--format", "markdown"],
    lambda ref: ["sessions", "search", "message", "--session", ref],
    lambda ref: ["sessions", "rename", ref, "renamed"],
    lambda ref: ["sessions", "delete", ref, "--yes"],
    lambda ref: ["usage", "--session", ref],
    lambda ref: ["heartbeat", "status", "-s", ref],
    lambda ref: ["heartbeat", "pause", "--session", ref],
    lambda ref: ["heartbeat", "set", "-s", ref, "10m", "watch"],
    lambda ref: ["sessions", "refresh-prompts", "--session", ref],
]


@settings(max_examples=200, deadline=None)
@given(build=st.sampled_from(COMMANDS_WITH_A_REFERENCE), ref=REFERENCE)
def test_session_references(build, ref: str) -> None:  # type: ignore[no-untyped-def]
    with fresh_home() as home:
        result = check(home, build(ref))
    if result.exit_code == 0:
        # Only a reference that names exactly one session can succeed.
        assert sum(s.startswith(ref) for s in SESSIONS) == 1 or ref in SESSIONS, (ref, result.output)


@settings(max_examples=150, deadline=None)
@given(title=nasty_text(40))
def test_rename_stores_and_echoes_the_title_verbatim(title: str) -> None:
    with fresh_home() as home:
        result = check(home, ["sessions", "rename", SESSIONS[0], title])
        if result.exit_code != 0:
            return
        stored = json.loads(invoke(home, ["sessions", "show", SESSIONS[0], "--json"]).output)["title"]
    assert stored == " ".join(title.split())
    assert not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in stored)
    assert result.output == f"Renamed {SESSIONS[0]} to '{stored}'\n"


@settings(max_examples=150, deadline=None)
@given(
    name=st.one_of(nasty_text(20), st.sampled_from(["ok-name", JOB, "a" * 64, "a" * 65, "-x", ".x", "x.y_z"])),
    prompt=nasty_text(40),
    extra=st.sampled_from([[], ["--deliver", "local"], ["--skill", "nope"], ["--tz", "UTC"], ["--json"]]),
)
def test_cron_add_names_and_prompts(name: str, prompt: str, extra: list[str]) -> None:
    with fresh_home() as home:
        result = check(home, ["cron", "add", name, "--schedule", "every 2h", "--prompt", prompt, *extra])
        if result.exit_code == 0:
            shown = json.loads(invoke(home, ["cron", "show", name, "--json"]).output)
            assert shown["prompt"] == prompt.strip()


@settings(max_examples=120, deadline=None)
@given(
    command=st.sampled_from([
        ["cron", "show"], ["cron", "pause"], ["cron", "resume"], ["cron", "remove"], ["cron", "runs"],
        ["cron", "edit", "--prompt", "new"], ["sessions", "list", "--source"], ["sessions", "search"],
        ["profile", "show"], ["profile", "create"], ["profile", "delete", "--yes"], ["-p"],
    ]),
    text=nasty_text(30),
)
def test_other_text_arguments(command: list[str], text: str) -> None:
    args = [*command, text] if command != ["cron", "edit", "--prompt", "new"] else ["cron", "edit", text, "--prompt", "new"]
    if command == ["-p"]:
        args = ["-p", text, "sessions", "list"]
    with fresh_home() as home:
        check(home, args)


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@settings(max_examples=40, deadline=None)
@given(query=nasty_text(30), resume=st.one_of(st.none(), REFERENCE))
def test_chat_one_shot_questions_and_resume_references(model: FakeModelServer, query: str, resume: str | None) -> None:
    model.reset()
    model.set_default_reply("fine")
    env = {"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": model.api_key}
    args = ["chat", "-q", query] + ([] if resume is None else ["--resume", resume])
    with fresh_home() as home:
        result = check(home, args, env)
    if result.exit_code != 0:
        assert model.requests == [], "a refused question reached the model"
    else:
        assert result.output.startswith("fine")
