"""Fuzzing ``vigil config`` through the real CLI: ``config set`` with generated keys and values,
and every command on damaged ``config.yaml`` files. Each case gets its own VIGIL_HOME."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterator

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.helpers import assert_result, invoke, snapshot
from vigil.config.settings import Settings
from vigil.config.tool_names import BUILTIN_TOOL_NAMES

FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

SEED = "# my settings\nmodel:\n  name: keep-me  # the one I use\n"

REALISTIC = """\
# vigil settings
model:
  provider: openai
  name: gpt-4o-mini   # the cheap one
  timeout: 60
  temperature: 0.2
agent:
  max_iterations: 20
tools:
  enabled: [terminal, memory]
  terminal:
    timeout: 30
    sandbox: unattended
prompt:
  max_file_chars: 5000
timezone: Europe/Berlin
"""


def _dotted_keys(model: Any = Settings, prefix: str = "") -> Iterator[str]:
    for name, spec in model.specs().items():
        key = f"{prefix}{name}"
        yield key
        if spec.section is not None:
            yield from _dotted_keys(spec.section, key + ".")


VALID_KEYS = sorted(_dotted_keys())

keys = st.one_of(
    st.sampled_from(VALID_KEYS),
    st.sampled_from(VALID_KEYS).map(lambda k: k + ".x"),
    st.sampled_from(VALID_KEYS).map(lambda k: k.upper()),
    st.sampled_from(["", ".", "..", "model.", ".model", "model..name", "tools.terminal_timeout", "a" * 300]),
    st.text(st.sampled_from("abcmodel._-1 éß\u00a0\u2028\x00"), max_size=30),
    st.binary(max_size=12).map(lambda b: "model." + b.decode("utf-8", "surrogateescape")),
)

YAML_SPECIALS = [
    ".inf", "-.inf", ".nan", ".NaN", "true", "false", "yes", "no", "on", "off", "null", "~", "",
    " ", "[]", "{}", "[a, b]", "{a: 1}", "&a x", "*a", "!!python/object/apply:os.system [ls]",
    "!!binary aGVsbG8=", "!!set {a}", "2026-01-01", "1_000", "0x1F", "0o17", "0b101", "1:30:00",
    "1e400", "1.0e+400", "-0", "+5", "0.0", "- a", "? x", "'unterminated", '"\\x00"', "|\n  block",
    "a: b: c", "---", "...", "%YAML 1.2", "\t", "\ufeff5", "5\x00",
]
digits_non_ascii = st.text(st.sampled_from("٠١٢٣٤٥٦٧٨٩０１２３４５６７８９߀०१"), min_size=1, max_size=6)

values = st.one_of(
    st.sampled_from(YAML_SPECIALS),
    st.integers().map(str),
    st.integers(min_value=1, max_value=6000).map(lambda n: "9" * n),
    st.integers(min_value=1, max_value=400).map(lambda n: "1e" + "9" * n),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(min_value=0, max_value=2).map(lambda f: f"{f:.4e}"),  # YAML 1.1 exponent floats
    st.sampled_from(YAML_SPECIALS).map(lambda v: "'" + v.replace("'", "''") + "'"),  # quoted text
    digits_non_ascii,
    st.text(max_size=40),
    st.integers(min_value=1, max_value=200_000).map(lambda n: "x" * n),
    st.binary(max_size=24).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.lists(st.sampled_from([*BUILTIN_TOOL_NAMES, "teleport", "", "1"]), max_size=5).map(
        lambda names: yaml.safe_dump(names, default_flow_style=True).strip()
    ),
    st.sampled_from(["openai", "anthropic", "5m", "1h", "always", "never", "UTC", "Mars/Base"]),
    st.sampled_from(["mysql://x/y", "rel.db", "/abs/x.db", "~/x.db", "sqlite:///abs.db", "postgresql://u:p@h/db"]),
    st.sampled_from(["http://u:hunter2@h/v1", "ftp://h", "http://", "https://h:99999/v1", "localhost:8080"]),
)


@FUZZ
@given(key=keys, value=values)
def test_config_set_answers_cleanly_and_changes_nothing_when_it_refuses(key: str, value: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "config.yaml").write_text(SEED)
        before = snapshot(home, ["config.yaml"])
        result = invoke(home, "config", "set", "--", key, value)
        assert_result(result)
        if result.exit_code != 0:
            assert snapshot(home, ["config.yaml"]) == before
            return
        text = (home / "config.yaml").read_text()
        assert "# my settings" in text  # the file's own layout is kept
        shown = invoke(home, "config", "show", "--json")
        assert shown.exit_code == 0, shown.output  # what set accepted, load accepts
        got = invoke(home, "config", "get", key)
        assert_result(got)
        assert got.exit_code == 0
        if "hunter2" in value:
            assert "hunter2" not in result.output + shown.output + got.output


def _flip(text: bytes, flips: list[tuple[int, int]]) -> bytes:
    data = bytearray(text)
    for position, byte in flips:
        if data:
            data[position % len(data)] = byte
    return bytes(data)


def _deep(depth: int, style: str) -> bytes:
    if style == "flow-seq":
        return ("a: " + "[" * depth + "]" * depth + "\n").encode()
    if style == "flow-map":
        return ("a: " + "{b: " * depth + "1" + "}" * depth + "\n").encode()
    if style == "block-seq":
        return ("- " * depth + "x\n").encode()
    return "".join(" " * i + "k:\n" for i in range(min(depth, 400))).encode() + b" " * 401 + b"v\n"


def _bomb(levels: int, width: int) -> bytes:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return ("\n".join(lines) + "\n").encode()


plain_data = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=15,
)

damaged_configs = st.one_of(
    st.integers(min_value=0, max_value=len(REALISTIC)).map(lambda n: REALISTIC.encode()[:n]),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=8).map(
        lambda flips: _flip(REALISTIC.encode(), flips)
    ),
    st.sampled_from(["model:\n  name: twice\n", "agent:\n  max_iterations: 3\n", "timezone: UTC\n"]).map(
        lambda extra: (REALISTIC + extra).encode()
    ),
    st.just(REALISTIC.replace("  name: gpt-4o-mini", "  name: a\n  name: b").encode()),
    st.tuples(st.integers(60, 30_000), st.sampled_from(["flow-seq", "flow-map", "block-seq", "block-map"])).map(
        lambda t: _deep(*t)
    ),
    st.integers(0, len(REALISTIC)).map(lambda n: (REALISTIC[:n] + "\t" + REALISTIC[n:]).encode()),
    st.tuples(st.integers(2, 9), st.integers(2, 12)).map(lambda t: _bomb(*t)),
    st.binary(max_size=3000),
    st.sampled_from([b"\xef\xbb\xbf" + REALISTIC.encode(), REALISTIC.encode() + b"\x00", b"\xff\xfe"]),
    plain_data.map(lambda data: yaml.safe_dump(data).encode()),
    st.dictionaries(st.sampled_from(["model", "agent", "tools", "prompt", "store", "x"]), plain_data, max_size=4).map(
        lambda data: yaml.safe_dump(data).encode()
    ),
    st.sampled_from([b"a: &x [*x]\n", b"a: !!python/name:os.system\n", b"? [a]\n: b\n", b"1: 2\n", b"[1, 2]\n"]),
)


@FUZZ
@given(content=damaged_configs)
def test_every_command_answers_cleanly_on_a_damaged_config(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "config.yaml").write_bytes(content)
        before = snapshot(home, ["config.yaml"])
        shown = invoke(home, "config", "show")
        assert_result(shown)
        got = invoke(home, "config", "get", "model.name")
        assert_result(got)
        assert (got.exit_code == 0) == (shown.exit_code == 0)
        changed = invoke(home, "config", "set", "model.name", "fuzzed")
        assert_result(changed)
        if shown.exit_code != 0:
            # A config that does not load is never rewritten, not even partly.
            assert changed.exit_code != 0
        if changed.exit_code != 0:
            assert snapshot(home, ["config.yaml"]) == before
        else:
            assert invoke(home, "config", "get", "model.name").output.strip() == "fuzzed"
