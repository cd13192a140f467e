"""Fuzz: ``vigil mcp add`` with generated names, commands, URLs, ``--env`` and ``--header`` items,
and generated ``mcp.servers`` sections of config.yaml read by ``vigil mcp`` and ``vigil config``,
all through the real CLI.

Every case ends with exit code 0 or one clear error line, and a refusal changes nothing. What
``mcp add`` accepts, config.yaml loads again, and a credential never lands in it as a literal
value. No generated command is ever run: ``mcp add`` starts nothing, and the generated sections
``mcp list`` starts only name programs that do not exist or exit at once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.cli.helpers import is_clear_error
from tests.fuzz.cli_helpers import check, fresh_home, invoke, nasty_text
from vigil.config.mcp import looks_secret

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

EXISTING = "mcp:\n  servers:\n    existing:  # keep me\n      command: /nonexistent/existing-server\n"
SECRET = "hunter2hunter2"

def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any], odds: int = 9) -> st.SearchStrategy[Any]:
    """``good`` ``odds`` times as often as ``bad`` (so that accepted input is explored too)."""
    # one_of(good, ..., bad) alone leans on its later branches far more often than 1 in n.
    return st.integers(0, odds).flatmap(lambda pick: bad if pick == odds // 2 else good)


now_and_then = st.integers(0, 9).map(lambda pick: pick == 5)
"""True about once in ten draws (a plain ``integers`` leans towards its bounds)."""
valid_names = st.from_regex(r"[A-Za-z0-9]{1,8}(?:[-_][A-Za-z0-9]{1,8}){0,2}", fullmatch=True)
names = mostly(
    valid_names,
    st.one_of(st.sampled_from(["existing", "a__b", "_a", "a-", "x" * 33, "", "-x", "a.b"]), nasty_text(20)),
)
words = mostly(
    st.sampled_from(["/nonexistent/mcp-server", "uvx", "npx", "-y", "--flag", "${HOME}", "a b", "--json", "x=1"]),
    st.one_of(st.sampled_from(["", "--", "a\nb"]), nasty_text(20)),
)
variables = mostly(
    st.sampled_from(["TZ", "GITHUB_TOKEN", "API_KEY", "PATH", "MY_SECRET", "NOTES", "DB_PASSWORD"]),
    st.sampled_from(["1BAD", "", "A-B", "a b", "É"]),
)
values = mostly(
    st.sampled_from([SECRET, "${GITHUB_TOKEN}", f"Bearer {SECRET}", "Bearer ${TOKEN}", "$HOME", "UTC", "a b c", ""]),
    st.one_of(st.sampled_from(["${", "${}", "${1A}", "a\nb", "\x00"]), nasty_text(20)),
)
env_items = mostly(
    st.one_of(st.tuples(variables, values).map(lambda kv: f"{kv[0]}={kv[1]}"), variables),
    nasty_text(20),
)
header_names = mostly(
    st.sampled_from(["Authorization", "X-Api-Key", "X-Team", "Cookie", "Accept"]),
    st.sampled_from(["Bad Name", "", "X_Y", "Ünïcode", "a:b"]),
)
header_items = mostly(
    st.tuples(header_names, values, st.sampled_from([": ", ":", " : "])).map(lambda t: f"{t[0]}{t[2]}{t[1]}"),
    nasty_text(30),
)
urls = mostly(
    st.sampled_from([
        "https://api.example.com/mcp/", "http://127.0.0.1:9/mcp", "https://u:${PW}@h.example/mcp",
        "https://h/${TOKEN}", f"https://h.example/mcp?token={SECRET}",
    ]),
    st.one_of(
        st.sampled_from([f"https://u:{SECRET}@h.example/mcp", "ftp://h.example", "https://", "localhost:8080"]),
        nasty_text(40),
    ),
)


@st.composite
def add_arguments(draw: st.DrawFn) -> list[str]:
    args = ["mcp", "add", draw(names)]
    http = draw(st.booleans())
    if http:
        args += ["--url", draw(urls)]
        for item in draw(st.lists(header_items, max_size=2)):
            args += ["--header", item]
    else:
        for item in draw(st.lists(env_items, max_size=2)):
            args += ["--env", item]
    for flag in ("--unattended", "--trusted", "--no-sandbox", "--json"):
        if draw(st.booleans()) and (flag != "--no-sandbox" or not http or draw(now_and_then)):
            args.append(flag)
    if not http or draw(now_and_then):  # an HTTP server given a command too, now and then
        program = draw(mostly(st.sampled_from(["/nonexistent/mcp-server", "uvx", "npx", "mcp-server-time"]), words))
        command = [program, *draw(st.lists(words, max_size=3))]
        if not draw(now_and_then):  # usually written properly, with --
            args.append("--")
        args += [] if draw(now_and_then) else command
    return args


def _servers(home: Path) -> dict[str, Any]:
    text = (home / "config.yaml").read_text()
    return (yaml.safe_load(text) or {}).get("mcp", {}).get("servers", {})


@FUZZ
@given(args=add_arguments())
def test_mcp_add_answers_cleanly_and_never_writes_a_secret(args: list[str]) -> None:
    with fresh_home() as home:
        (home / "config.yaml").write_text(EXISTING)
        result = check(home, args)
        event("added" if result.exit_code == 0 else "refused")
        if result.exit_code != 0:
            return
        name = args[2]
        servers = _servers(home)
        assert "# keep me" in (home / "config.yaml").read_text()
        assert set(servers) == {"existing", name}
        entry = servers[name]
        for kind, table in (("env", entry.get("env", {})), ("header", entry.get("headers", {}))):
            for key, value in table.items():
                if looks_secret(kind, key):
                    assert re.search(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", value), (key, value)
        assert f":{SECRET}@" not in str(entry.get("url"))
        shown = invoke(home, ["config", "show", "--json"])
        assert shown.exit_code == 0, shown.output  # what add wrote, the config loads
        removed = invoke(home, ["mcp", "remove", name])
        assert removed.exit_code == 0, removed.output
        assert set(_servers(home)) == {"existing"}


safe_commands = st.sampled_from(["/nonexistent/mcp-server", "true", "/bin/false"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=12))
flags = mostly(st.booleans(), scalars)
stdio_server = st.fixed_dictionaries(
    {"command": mostly(safe_commands, scalars)},
    optional={
        "args": mostly(st.lists(st.sampled_from(["-x", "--local-timezone", "UTC", "a b"]), max_size=3),
                       st.one_of(scalars, st.lists(st.one_of(st.just("a\nb"), scalars), max_size=2))),
        "env": mostly(st.dictionaries(variables, values, max_size=3),
                      st.one_of(scalars, st.dictionaries(scalars.map(str), scalars, max_size=2))),
        "unattended": flags, "trusted": flags, "sandbox": flags,
    },
)
http_server = st.fixed_dictionaries(
    {"url": mostly(urls, scalars)},
    optional={
        "headers": mostly(st.dictionaries(header_names, values, max_size=3), scalars),
        "unattended": flags, "trusted": flags,
    },
)
server_values = mostly(
    st.one_of(stdio_server, http_server),
    st.one_of(
        scalars,
        st.tuples(stdio_server, http_server).map(lambda both: {**both[0], **both[1]}),
        stdio_server.map(lambda entry: {**entry, "timeout": 5}),
        st.just({}),
    ),
)
sections = st.fixed_dictionaries(
    {"servers": mostly(
        st.dictionaries(names, server_values, max_size=3),
        st.one_of(scalars, st.lists(scalars, max_size=2), st.dictionaries(st.integers(0, 9), server_values, max_size=1)),
    )},
    optional={
        "start_timeout": mostly(st.just(5), scalars),
        "call_timeout": mostly(st.floats(0.5, 600), scalars),
        "servrs": scalars,
    },
)


def _only_safe_commands(data: dict[str, Any]) -> bool:
    servers = data.get("servers")
    if not isinstance(servers, dict):
        return True
    return all(
        not isinstance(entry, dict) or entry.get("command") in (None, "/nonexistent/mcp-server", "true", "/bin/false")
        for entry in servers.values()
    )


@FUZZ
@given(section=mostly(sections, scalars))
def test_the_mcp_section_of_config_yaml_is_read_cleanly_by_every_mcp_command(section: Any) -> None:
    with fresh_home() as home:
        (home / "config.yaml").write_text(yaml.safe_dump({"mcp": section}, allow_unicode=True))
        shown = check(home, ["config", "show", "--json"])
        missing = check(home, ["mcp", "test", "no-such-server", "--json"])
        assert is_clear_error(missing)
        valid = shown.exit_code == 0
        event("valid" if valid else "invalid")
        assert ('"kind": "not_found"' in missing.output) == valid
        removed = check(home, ["mcp", "remove", "no-such-server"])
        assert removed.exit_code != 0
        if valid and isinstance(section, dict) and _only_safe_commands(section) and section.get("start_timeout") == 5:
            event("listed")
            listed = check(home, ["mcp", "list", "--json"])
            assert listed.exit_code == 0, listed.output
