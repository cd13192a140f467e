"""shell.parse.parse: which simple commands a line runs, with their words as bash would see them."""

from __future__ import annotations

import pytest

from vigil.tools.shell.parse import parse
from vigil.tools.shell.words import HOME, ParseFailure, Word


def _names(line: str) -> list[str]:
    return [c.words[0].value for c in parse(line)]


def test_every_simple_command_is_found_in_order() -> None:
    line = (
        "a | b && c || d; e &\nf; (g); { h; }; if i; then j; elif k; then l; else m; fi; "
        "for x in 1; do n; done; while o; do p; done; case q in r) s;; esac; t() { u; }; "
        "v $(w) `x` <(y) \"$(z)\""
    )
    # a substitution runs before the command whose word it is part of
    assert _names(line) == [*"abcdefghijklmnopsu", "w", "x", "y", "z", "v"]


def test_here_document_pipelines_and_their_bodies() -> None:
    first, second = parse("cat <<EOF | sh\nrm -rf /\nEOF")
    assert first.words[0].value == "cat" and first.stdin is not None
    assert first.stdin.target is not None and first.stdin.target.value == "rm -rf /\n"
    assert second.words[0].value == "sh" and second.piped and second.upstream == (first,)


def test_words_are_unquoted_and_paths_spelled_as_bash_expands_them() -> None:
    (command,) = parse("\\r'm' \"-rf\" $'\\x2f' ~/x {a,b}c")
    assert [w.values for w in command.words] == [("rm",), ("-rf",), ("/",), (f"{HOME}/x",), ("ac", "bc")]


def test_words_after_a_redirect_target_belong_to_the_command() -> None:
    (command,) = parse("rm >/dev/null -rf /")
    assert [w.value for w in command.words] == ["rm", "-rf", "/"]
    assert command.redirects[0].target is not None and command.redirects[0].target.value == "/dev/null"


def test_variables_and_cd_earlier_on_the_line_are_followed() -> None:
    *_, command = parse("d=/usr; cd /tmp; for f in a b; do rm -rf $d/$f; done")
    assert command.words[-1].values == ("/usr/a", "/usr/b")
    assert command.cwd == "/tmp"


def test_a_function_call_walks_its_body_with_the_call_arguments() -> None:
    *_, call, body = parse('f(){ shred -n 1 "$1" "$@"; }; f /dev/sda -v')
    assert call.calls_function and [w.value for w in call.words] == ["f", "/dev/sda", "-v"]
    assert [w.value for w in body.words] == ["shred", "-n", "1", "/dev/sda", "/dev/sda", "-v"]


def test_shift_and_set_move_the_arguments() -> None:
    *_, body = parse('f(){ shift 2; wipefs "$1"; }; f a b /dev/sdb')
    assert body.words[-1].value == "/dev/sdb"
    *_, last = parse('set -- x /dev/sdc; shift; echo "$1"')
    assert last.words[-1].value == "/dev/sdc"


def test_a_body_is_walked_without_arguments_where_it_is_defined() -> None:
    # `"$@"` as the command is left to each call; a function calling itself is walked once per call
    assert _names('run(){ "$@"; echo done; }') == ["echo"]
    assert _names("f(){ f; }; f") == ["f", "f", "f"]


def test_known_arguments_of_a_string_another_shell_runs_are_its_positional_parameters() -> None:
    (command,) = parse('shred "$1"', nested=True, positional=(Word.literal("/dev/sda"),))
    assert command.words[-1].value == "/dev/sda"


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("git status; awk '{print $1}' f | sort | uniq -c | sort -rn | head\nrm x && y", ["git", "awk", "sort", "uniq", "sort", "head", "rm", "y"]),
        ("true\n\\rm x", ["true", "rm"]),
        ("\n\n  a | b\nc", ["a", "b", "c"]),
    ],
)
def test_a_newline_ends_a_command_where_tree_sitter_would_run_it_on(line: str, names: list[str]) -> None:
    # tree-sitter-bash alone reads `head<newline>rm x` as `head rm x` and `true<newline>\rm` as `true '\rm'`
    assert _names(line) == names


@pytest.mark.parametrize("line", ["echo 'unterminated", "if then fi", "echo \x07", "(" * 3 + "ls"])
def test_what_cannot_be_parsed_with_confidence_is_refused(line: str) -> None:
    with pytest.raises(ParseFailure):
        parse(line)
