"""The words and simple commands a parsed command line is made of, and how a word's value is
built from its pieces (quote removal, backslashes, ``$'...'``, braces, ``~``).

A word may have several possible values (``{a,b}``, a loop variable) and parts only known at
run time: those read as the empty string in ``values`` and as :data:`UNKNOWN` in ``templates``.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

HOME = "/home/~"
"""How the home directory reads after evaluation (``~``, ``$HOME``); ``~/..`` is then ``/home``."""

UNKNOWN = "__vigil_unknown__"
"""Stands for a value only known at run time inside a string that is parsed again (``sh -c``)."""

MAX_VALUES = 64
"""More possible values than this for one word (braces, loop values) is not judged."""

GLOB = re.compile(r"(?<!\\)[*?\[]")
UNESCAPED_META = re.compile(r"(?<!\\)[ \t\n;&|<>()]")


class ParseFailure(Exception):
    """The command line cannot be parsed with confidence; the message says why."""


@dataclass(frozen=True, slots=True)
class Word:
    """One evaluated word. ``values`` are its possible values (usually one); ``templates`` are
    the same with :data:`UNKNOWN` where a run-time value goes."""

    text: str
    values: tuple[str, ...]
    templates: tuple[str, ...]
    dynamic: bool = False
    """Part of it is only known when the command runs."""
    glob: bool = False
    """It holds an unquoted ``*``, ``?`` or ``[``."""
    from_output: bool = False
    """Part of it is the output of a command (``$(...)``, backticks) or a process substitution."""
    process_substitution: bool = False
    inner: tuple["SimpleCommand", ...] = ()
    """The commands run inside its substitutions."""

    @property
    def value(self) -> str:
        return self.values[0]

    @classmethod
    def literal(cls, text: str) -> "Word":
        return cls(text, (text,), (text,))


@dataclass(frozen=True, slots=True)
class Redirect:
    """``op`` is the operator (``>``, ``>>``, ``<``, ``&>``, ``<<``, ``<<<`` ...)."""

    op: str
    target: Word | None
    """The file, or the here-document / here-string content (its evaluated text)."""

    @property
    def writes(self) -> bool:
        return self.op in (">", ">>", ">|", "&>", "&>>", "<>", ">&") and self.target is not None

    @property
    def reads_stdin(self) -> bool:
        return self.op in ("<", "<<", "<<-", "<<<", "<>")


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """A command with its words (name first), its redirects (including those of enclosing
    compound commands), where its standard input comes from, and the directory it runs in."""

    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...] = ()
    piped: bool = False
    """Its standard input is the output of the commands in ``upstream``."""
    upstream: tuple["SimpleCommand", ...] = ()
    cwd: str | None = None
    """Where an earlier ``cd`` on the line moved to (absolute, or relative to the starting
    directory), else ``None``: the working directory the command line starts in."""
    background: bool = False
    function: str | None = None
    """The function whose body it is part of."""
    calls_function: bool = False
    """Its name is a function defined earlier on the line (whose body is checked at the call)."""

    @property
    def stdin(self) -> Redirect | None:
        """The redirect its standard input comes from, if any (the last one wins)."""
        found = [r for r in self.redirects if r.reads_stdin]
        return found[-1] if found else None


def combine_words(items: list[Word]) -> Word:
    """One word standing for whichever item a loop is at."""
    if not items:
        return Word.literal("")
    pairs = dict.fromkeys((v, t) for item in items for v, t in zip(item.values, item.templates))
    values = tuple(v for v, _ in pairs)
    templates = tuple(t for _, t in pairs)
    if len(values) > MAX_VALUES:
        raise ParseFailure("a loop takes too many values to check")
    return Word(
        " ".join(i.text for i in items),
        values,
        templates,
        dynamic=any(i.dynamic for i in items),
        glob=any(i.glob for i in items),
        from_output=any(i.from_output for i in items),
        inner=tuple(c for i in items for c in i.inner),
    )


def unknown_word(text: str) -> Word:
    return Word(text, ("",), (UNKNOWN,), dynamic=True)


class Accumulator:
    """Builds the possible values of a word piece by piece."""

    def __init__(self, *, nested: bool) -> None:
        self.nested = nested
        self.pairs: list[tuple[str, str]] = [("", "")]
        self.dynamic = False
        self.glob = False
        self.from_output = False
        self.process_substitution = False
        self.inner: list[SimpleCommand] = []
        self.unquoted_braces = False

    def add(self, options: list[tuple[str, str]]) -> None:
        self.pairs = list(dict.fromkeys((v + ov, t + ot) for v, t in self.pairs for ov, ot in options))
        if len(self.pairs) > MAX_VALUES:
            raise ParseFailure("a word has too many possible values to check")

    def add_literal(self, text: str) -> None:
        if not text:
            return
        if self.nested and UNKNOWN in text:
            self.dynamic = True
            self.add([(text.replace(UNKNOWN, ""), text)])
        else:
            self.add([(text, text)])

    def add_unknown(self) -> None:
        self.dynamic = True
        self.add([("", UNKNOWN)])

    def word(self, text: str) -> Word:
        pairs = self.pairs
        if self.unquoted_braces:
            pairs = [p for v, t in pairs for p in zip(_expand_braces(v), _expand_braces(t))]
            if len(pairs) > MAX_VALUES:
                raise ParseFailure("a word has too many possible values to check")
        return Word(
            text,
            tuple(v for v, _ in pairs),
            tuple(t for _, t in pairs),
            dynamic=self.dynamic,
            glob=self.glob,
            from_output=self.from_output,
            process_substitution=self.process_substitution,
            inner=tuple(self.inner),
        )


def add_word(acc: Accumulator, word: Word) -> None:
    acc.add(list(zip(word.values, word.templates)))
    acc.dynamic = acc.dynamic or word.dynamic
    acc.glob = acc.glob or word.glob
    acc.from_output = acc.from_output or word.from_output
    acc.inner.extend(word.inner)


def expand_tilde(text: str, cwd: str | None) -> str:
    """``~`` → :data:`HOME`, ``~root`` → ``/root``, ``~name`` → ``/home/name``, ``~+`` → ``cwd``."""
    head, slash, rest = text.partition("/")
    user = head[1:]
    if user == "":
        home = HOME
    elif user == "+" and cwd is not None:
        home = cwd
    elif user in ("+", "-"):
        return text
    elif re.fullmatch(r"[A-Za-z_][\w.-]*", user):
        home = "/root" if user == "root" else f"/home/{user}"
    else:
        return text
    return home + slash + rest


def unescape(text: str) -> str:
    """Unquoted backslashes: ``\\x`` is ``x``, a backslash-newline disappears."""
    return re.sub(r"\\(.)", r"\1", text.replace("\\\n", ""), flags=re.S)


def unescape_double(text: str) -> str:
    """Inside double quotes a backslash only escapes ``$ ` " \\`` and newline."""
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def decode_ansi_c(body: str) -> str:
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ParseFailure(f"cannot decode $'{body}'") from exc


def _expand_braces(text: str) -> list[str]:
    """``a{b,c}d`` → ``abd acd`` (nested too); ranges like ``{1..3}`` are left as they are."""
    depth = 0
    start = -1
    for index, char in enumerate(text):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                options = _split_top_commas(text[start + 1 : index])
                if len(options) < 2:
                    continue
                tails = _expand_braces(text[index + 1 :])
                heads = [o for option in options for o in _expand_braces(option)]
                if len(heads) * len(tails) > MAX_VALUES:  # checked before building them
                    raise ParseFailure("a word has too many possible values to check")
                return [text[:start] + h + t for h in heads for t in tails]
    return [text]


def _split_top_commas(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += char == "{"
        depth -= char == "}"
        current += char
    parts.append(current)
    return parts
