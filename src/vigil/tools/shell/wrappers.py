"""Look through commands that only run another command: ``sudo -u root rm ...`` is ``rm ...``.

Each wrapper is described by the options it knows and which of them take a value, so the
command it runs is found exactly. An option a wrapper does not know could take a value or not;
guessing could hide the real command, so it makes the line unparseable instead.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field, replace

from vigil.tools.shell.words import Word


class Unsure(Exception):
    """What a wrapper runs cannot be told with confidence; the message says why."""


@dataclass(frozen=True, slots=True)
class WrapperSpec:
    """``takes_value``: options followed by a value (short letters or long names without ``--``);
    ``flags``: options without one; ``positionals``: words before the command (``timeout 10``);
    ``no_command``: options with which nothing is run (``command -v``)."""

    takes_value: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()
    positionals: int = 0
    no_command: frozenset[str] = frozenset()
    assignments: bool = False
    """``NAME=value`` words may come before the command."""
    numeric_flags: bool = False
    """``-5`` style options (``nice -10``)."""
    default: tuple[str, ...] = ()
    """What runs when no command is given (xargs runs echo)."""


def _spec(takes: str = "", flags: str = "", **kw: object) -> WrapperSpec:
    return WrapperSpec(frozenset(takes.split()), frozenset(flags.split()), **kw)  # type: ignore[arg-type]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SETARCH = _spec(
    "",
    "B F I L R S T X Z 3 v 32bit fdpic-funcptrs short-inode addr-compat-layout addr-no-randomize "
    "whole-seconds sticky-timeouts read-implies-exec mmap-page-zero 3gb 4gb uname-2.6 verbose",
    no_command=_words("list h help V version"),
    default=("sh",),
)


WRAPPERS: dict[str, WrapperSpec] = {
    "env": _spec(
        "u C S unset chdir split-string",
        "i 0 v - ignore-environment null debug",
        assignments=True,
    ),
    "sudo": _spec(
        "u g h p C D r t T U R user group host prompt close-from chdir role type command-timeout other-user chroot",
        "A b E H i K k n P S s B N askpass background preserve-env set-home login non-interactive "
        "preserve-groups stdin shell bell no-update",
        no_command=frozenset("l v V e K list validate version edit remove-timestamp".split()),
        assignments=True,
    ),
    "doas": _spec("u C", "n s L"),
    "nice": _spec("n adjustment", "", numeric_flags=True),
    "nohup": _spec(),
    "timeout": _spec("k s kill-after signal", "v preserve-status foreground verbose", positionals=1),
    "time": _spec("f o format output", "p a v q portability append verbose quiet"),
    "stdbuf": _spec("i o e input output error"),
    "ionice": _spec("c n class classdata", "t ignore", no_command=frozenset("p P u pid pgid uid".split())),
    "command": _spec("", "p", no_command=frozenset("v V".split())),
    "exec": _spec("a", "c l"),
    "builtin": _spec(),
    "coproc": _spec(),
    "setsid": _spec("", "c f w ctty fork wait"),
    "chroot": _spec("", "", positionals=1, default=("sh",)),
    "xargs": _spec(
        "a d E I L n P s arg-file delimiter max-args max-procs max-chars process-slot-var",
        "0 o p r t x null open-tty interactive no-run-if-empty verbose exit show-limits replace eof max-lines",
        default=("echo",),
    ),
    "busybox": _spec(),
    "unbuffer": _spec(),
    "caffeinate": _spec("t w", "d i m s u"),
    "taskset": _spec("", "a c all-tasks cpu-list", positionals=1, no_command=_words("p pid h help V version")),
    "chrt": _spec(
        "T P D sched-runtime sched-period sched-deadline",
        "a b d f i o r R v all-tasks batch deadline fifo idle other rr reset-on-fork verbose",
        positionals=1,
        no_command=_words("p pid m max h help V version"),
    ),
    "strace": _spec(
        "a b e E I o O p P s S u U X attach output trace signal status abbrev verbose raw read write fault "
        "inject kvm env user string-limit columns summary-sort sort summary-columns trace-path detach-on "
        "argv0 const-print-style trace-fds",
        "A c C d D f F i k n q r t T v w x y Y z Z follow-forks output-separately summary-only summary "
        "summary-wall-clock debug instruction-pointer stack-trace syscall-number timestamps no-abbrev "
        "successful-only failed-only seccomp-bpf decode-pids",
        no_command=_words("h V help version"),
    ),
    "setarch": replace(_SETARCH, positionals=1),  # the architecture, which linux32/linux64 name
    **dict.fromkeys(("linux32", "linux64"), _SETARCH),
    "prlimit": _spec(
        "o p output pid",
        "noheadings raw verbose core data fsize memlock rss nofile stack cpu nproc as locks sigpending "
        "msgqueue nice rtprio rttime",
        no_command=_words("h V help version"),
    ),
    "unshare": _spec(
        "R w S G l root wd setuid setgid load-interp propagation setgroups map-user map-group map-users "
        "map-groups monotonic boottime",
        "m u i n p U C T f r c mount uts ipc net pid user cgroup time fork map-root-user map-current-user "
        "kill-child mount-proc map-auto keep-caps mount-binfmt",
        no_command=_words("h V help version"),
        default=("sh",),
    ),
}

# Options whose value, when there is one, is in the same word: xargs' -i, -l and -e, prlimit's
# limits (`-n1024`; in `-n 1024` the 1024 is the command).
_ATTACHED_ONLY = {"xargs": frozenset("i l e".split()), "prlimit": frozenset("c d e f i l m n q r s t u v x y".split())}

DOES_NOT_RUN_ITS_ARGUMENTS = frozenset(
    "echo printf logger grep egrep fgrep zgrep rg ag ack man apropos whatis info help tldr which whereis "
    "type hash locate cat tac less more head tail wc ls stat file du touch mkdir cd pushd test "
    "export declare typeset local readonly unset read unalias complete compgen history basename "
    "dirname realpath readlink sort uniq cut tr diff cmp comm apt apt-get apt-cache aptitude dpkg "
    "dpkg-query rpm dnf yum zypper pacman apk brew snap flatpak pip pip3 pipx npm yarn pnpm gem cargo "
    "conda mamba go make pytest py.test tox nox".split()
)
"""Commands known not to run their arguments as a command, so a dangerous program's name among
them is only text (``echo shred /dev/sda``, ``man mkfs``, ``apt-get install wipefs``, ``make
reboot`` names a target, ``pytest -k shutdown`` a test). In front of
any other unknown program such a name is taken as a command it may run (see ``policy``)."""


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """The command a wrapper runs (``None`` when it runs none) and the options it was given."""

    words: tuple[Word, ...] | None
    options: dict[str, str] = field(default_factory=dict)
    """Each option given (a short letter or a long name) with its value, ``""`` when it has none."""


def program_name(word: Word) -> str:
    """The program a command word names: its last path part (``/sbin/mkfs`` → ``mkfs``)."""
    return posixpath.basename(word.value.rstrip("/")) or word.value


def unwrap(name: str, words: tuple[Word, ...]) -> Unwrapped:
    """Strip the wrapper ``name`` (``words[0]``) and its options; raises :class:`Unsure`."""
    spec = WRAPPERS[name]
    attached_only = _ATTACHED_ONLY.get(name, frozenset())
    args = list(words[1:])
    options: dict[str, str] = {}
    index = 0
    positionals_left = spec.positionals
    while index < len(args):
        value = args[index].value
        if args[index].dynamic and value.startswith("-"):
            raise Unsure(f"an option of {name} is only known when it runs ({args[index].text})")
        if value == "--":
            index += 1
            break
        if value == "-" and name == "env":
            index += 1
            continue
        if value.startswith("--") and len(value) > 2:
            option, has_value, attached = value[2:].partition("=")
            if option in spec.no_command:
                return Unwrapped(None)
            if option == "split-string" and name == "env":
                split = attached if has_value else _value_at(args, index + 1, name, value)
                return _env_split(split, args[index + (1 if has_value else 2) :])
            if has_value or option in spec.flags:
                options[option] = attached
                index += 1
            elif option in spec.takes_value:
                options[option] = _option_value(args, index + 1, name, option)
                index += 2
            else:
                raise Unsure(f"{name} is given the unfamiliar option {value}")
            continue
        if value.startswith("-") and len(value) > 1:
            if spec.numeric_flags and value[1:].lstrip("-").isdigit():
                index += 1
                continue
            step = 1
            for position, letter in enumerate(value[1:], start=1):
                rest = value[position + 1 :]
                if letter in spec.no_command:
                    return Unwrapped(None)
                if letter in attached_only:
                    options[letter] = rest
                    break
                if letter in spec.takes_value:
                    options[letter] = rest or _option_value(args, index + 1, name, letter)
                    if name == "env" and letter == "S":
                        return _env_split(options[letter], args[index + (1 if rest else 2) :])
                    if not rest:
                        step = 2
                    break
                if letter not in spec.flags:
                    raise Unsure(f"{name} is given the unfamiliar option -{letter}")
                options[letter] = ""
            index += step
            continue
        if spec.assignments and re.fullmatch(r"[A-Za-z_]\w*=.*", value, flags=re.S):
            index += 1
            continue
        if positionals_left:
            positionals_left -= 1
            index += 1
            continue
        break
    rest = tuple(args[index:])
    if not rest:
        if not spec.default:
            return Unwrapped(None)
        rest = tuple(Word.literal(w) for w in spec.default)
    return Unwrapped(rest, options)


# Options whose value decides what runs, so it must be known (xargs' replace string, separator).
_VALUE_MATTERS = {"xargs": frozenset("I d delimiter".split()), "env": frozenset("S split-string".split())}


def _option_value(args: list[Word], index: int, name: str, option: str) -> str:
    if option in _VALUE_MATTERS.get(name, ()):
        return _value_at(args, index, name, ("-" if len(option) == 1 else "--") + option)
    return args[index].value if index < len(args) else ""


def _value_at(args: list[Word], index: int, name: str, option: str) -> str:
    if index >= len(args):
        raise Unsure(f"{name} {option} is missing its value")
    if args[index].dynamic:
        raise Unsure(f"the value of {name} {option} is only known when it runs")
    return args[index].value


def _env_split(text: str, rest: list[Word]) -> Unwrapped:
    """``env -S 'rm -rf' /``: the string is split into words in front of the rest."""
    try:
        split = shlex.split(text)
    except ValueError as exc:
        raise Unsure(f"env -S {text!r}: {exc}") from None
    return unwrap("env", (Word.literal("env"), *(Word.literal(w) for w in split), *rest))
