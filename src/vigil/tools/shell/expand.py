"""Evaluate the words of a parsed command line the way bash would expand them, statically.

Quotes and backslashes are removed, ``$'...'`` is decoded, ``~`` and ``$HOME`` become
:data:`~vigil.tools.shell.words.HOME`, braces are expanded, variables assigned earlier on the same
line (and ``for`` loop values, and a function's arguments at its call) are substituted, and
anything only known at run time (other variables, command output) reads as the empty string and
marks the word ``dynamic``. For strings that another shell will parse again (``sh -c``, ``eval``)
each unknown part is kept as :data:`~vigil.tools.shell.words.UNKNOWN` instead, so the nested
parse still sees that something is there. The commands inside substitutions are walked by the
statement walker of :mod:`vigil.tools.shell.parse`, which :class:`Walk` carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from tree_sitter import Node

from vigil.tools.shell.words import (
    GLOB,
    HOME,
    UNESCAPED_META,
    UNKNOWN,
    Accumulator,
    ParseFailure,
    Redirect,
    SimpleCommand,
    Word,
    add_word,
    decode_ansi_c,
    expand_tilde,
    unescape,
    unescape_double,
)


@dataclass(slots=True)
class Scope:
    """What is known where a statement runs: variables, directory, redirects and input, the
    function and arguments it runs with."""

    variables: dict[str, Word]
    cwd: str | None
    redirects: tuple[Redirect, ...] = ()
    piped: bool = False
    upstream: tuple[SimpleCommand, ...] = ()
    background: bool = False
    function: str | None = None
    nested: bool = False
    positional: tuple[Word, ...] | None = None
    """``$1``, ``$2`` ... when known (a function call, ``set --``, ``sh -c`` operands), else ``None``."""
    expanding: frozenset[str] = frozenset()
    """The functions whose bodies are being walked for a call: a function calling itself is not
    walked again (fork bombs are found from the definition)."""

    def child(self, **changes: object) -> "Scope":
        fresh = replace(self, variables=dict(self.variables))
        for key, value in changes.items():
            setattr(fresh, key, value)
        return fresh


@dataclass(slots=True)
class Walk:
    """The walk of one line: the simple commands found so far, in order."""

    statement: Callable[[Node, "Scope", "Walk"], None]
    """Walks a statement (the commands in a substitution), recording its simple commands."""
    commands: list[SimpleCommand] = field(default_factory=list)
    source: bytes = b""
    """The bytes the tree was parsed from (``Node.text`` copies them on every call)."""
    functions: dict[str, list[Node]] = field(default_factory=dict)
    """The body of each function defined so far on the line."""
    calls: int = 0
    """Function bodies walked for calls so far."""


class LineBreakInCommand(ParseFailure):
    """tree-sitter-bash ran a simple command on past the newline at byte ``offset``."""

    def __init__(self, offset: int) -> None:
        super().__init__("the parser and the shell could disagree about where a command ends")
        self.offset = offset


def unescaped_newline_at(source: bytes, index: int) -> bool:
    """Whether ``source[index]`` is a newline that ends a command (not after a backslash)."""
    return source[index : index + 1] == b"\n" and (index == 0 or source[index - 1 : index] != b"\\")


def heredoc_body(node: Node, quoted: bool, strip_tabs: bool, scope: Scope, walk: Walk) -> Word:
    """A here-document's text: as written if its delimiter is quoted, else expanded like a
    double-quoted string; ``strip_tabs`` for ``<<-``."""
    if quoted:
        text = node_text(node)
        if strip_tabs:
            text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
        return Word.literal(text)
    acc = Accumulator(nested=scope.nested)
    position = node.start_byte
    source = node.text
    base = node.start_byte
    for child in node.children:
        acc.add_literal(source[position - base : child.start_byte - base].decode())
        if child.type == "heredoc_content":
            acc.add_literal(unescape_double(node_text(child)))
        else:
            _piece(child, acc, scope, walk, quoted=True)
        position = child.end_byte
    acc.add_literal(source[position - base :].decode())
    return acc.word(node_text(node))


def fields(group: list[Node], scope: Scope, walk: Walk) -> list[Word]:
    """The words one argument of a command becomes (``"$@"`` and an unquoted ``$x`` may be several)."""
    expansion = lone_expansion(group)
    if scope.positional is not None and expansion in (("@", True), ("@", False), ("*", False)):
        return list(scope.positional)  # one word for each argument
    return _split_fields(group, evaluate(group, scope, walk))


def lone_expansion(group: list[Node]) -> tuple[str, bool] | None:
    """The variable a word is made of alone (``$1``, ``"$@"``, ``${x}``) and whether it is quoted."""
    if len(group) != 1:
        return None
    node, quoted = group[0], False
    if node.type == "string":
        parts = [c for c in node.children if c.type != '"']
        if len(parts) != 1:
            return None
        node, quoted = parts[0], True
    if node.type not in ("simple_expansion", "expansion"):
        return None
    named = [c for c in node.children if c.is_named]
    tokens = {c.type for c in node.children if not c.is_named}
    if len(named) != 1 or named[0].type not in ("variable_name", "special_variable_name"):
        return None
    if not tokens <= {"$", "${", "}"}:  # ${x:-y}, ${#x} ...
        return None
    return node_text(named[0]), quoted


def is_positional(name: str) -> bool:
    """Whether ``$name`` is one of the arguments (``$1`` ..., ``$@``, ``$*``; not ``$0``)."""
    return name in ("@", "*") or (name.isdigit() and name != "0")


def _split_fields(group: list[Node], word: Word) -> list[Word]:
    """An unquoted ``$var`` whose known value has blanks splits into several words."""
    if len(group) != 1 or group[0].type not in ("simple_expansion", "expansion") or len(word.values) != 1:
        return [word]
    parts = word.value.split()
    templates = word.templates[0].split()
    if len(parts) <= 1 or len(parts) != len(templates):
        return [word]
    return [replace(word, values=(f,), templates=(t,)) for f, t in zip(parts, templates)]


def evaluate(nodes: list[Node], scope: Scope, walk: Walk, *, braces: bool = True) -> Word:
    """The word the pieces ``nodes`` make; ``braces=False`` leaves ``{a,b}`` as it is (assignments)."""
    acc = Accumulator(nested=scope.nested)
    pieces = _flatten(nodes)
    for index, piece in enumerate(pieces):
        _piece(piece, acc, scope, walk, quoted=False, first=index == 0)
    acc.unquoted_braces = acc.unquoted_braces and braces
    return acc.word(" ".join(node_text(n) for n in nodes) if len(nodes) > 1 else (node_text(nodes[0]) if nodes else ""))


def _flatten(nodes: list[Node]) -> list[Node]:
    flat: list[Node] = []
    for node in nodes:
        if node.type == "concatenation":
            flat.extend(_flatten(list(node.children)))
        else:
            flat.append(node)
    return flat


def _piece(node: Node, acc: Accumulator, scope: Scope, walk: Walk, *, quoted: bool, first: bool = False) -> None:
    kind = node.type
    text = node_text(node)
    if kind in ("word", "number", "$", "extglob_pattern"):
        if kind == "word" and not quoted and UNESCAPED_META.search(text):
            # tree-sitter-bash glues `true<newline>\rm` into one word; bash runs two commands.
            raw = node.text
            breaks = [i for i in range(len(raw)) if unescaped_newline_at(raw, i)]
            if breaks:
                raise LineBreakInCommand(node.start_byte + breaks[0])
            raise ParseFailure(f"the parser and the shell could disagree about the word {text!r}")
        if not quoted:
            if first and text.startswith("~"):
                text = expand_tilde(text, scope.cwd)
            if GLOB.search(text):
                acc.glob = True
            if "{" in text or "}" in text:
                acc.unquoted_braces = True
            text = unescape(text)
        acc.add_literal(text)
    elif kind == "raw_string":
        acc.add_literal(text[1:-1])
    elif kind == "ansi_c_string":
        acc.add_literal(decode_ansi_c(text[2:-1]))
    elif kind in ("string", "translated_string"):
        for child in node.children:
            if child.type == "string_content":
                acc.add_literal(unescape_double(node_text(child)))
            elif child.type not in ('"', "$"):
                _piece(child, acc, scope, walk, quoted=True)
    elif kind in ("simple_expansion", "expansion"):
        _expansion(node, acc, scope, walk)
    elif kind in ("command_substitution", "process_substitution"):
        start = len(walk.commands)
        walk.statement(node, scope.child(piped=False, upstream=(), background=False), walk)
        acc.inner.extend(walk.commands[start:])
        acc.from_output = True
        acc.process_substitution = acc.process_substitution or kind == "process_substitution"
        acc.add_unknown()
    elif kind == "brace_expression":
        acc.add_literal(text)
    else:
        # Arithmetic and anything unfamiliar: its value is not predicted, its commands are checked.
        start = len(walk.commands)
        for child in node.children:
            walk.statement(child, scope.child(), walk)
        acc.inner.extend(walk.commands[start:])
        acc.add_unknown()


_DEFAULT_OPS = {":-", "-", ":=", "="}
_ALTERNATIVE_OPS = {":+", "+"}
_REQUIRED_OPS = {":?", "?"}


def _expansion(node: Node, acc: Accumulator, scope: Scope, walk: Walk) -> None:
    names = [c for c in node.children if c.type in ("variable_name", "special_variable_name")]
    named = [c for c in node.children if c.is_named]
    tokens = [c.type for c in node.children if not c.is_named]
    operator = next((t for t in tokens if t in _DEFAULT_OPS | _ALTERNATIVE_OPS | _REQUIRED_OPS), None)
    if len(named) == 1 and names and all(t in ("$", "${", "}") for t in tokens):
        known = _variable(node_text(names[0]), scope)
        add_word(acc, known) if known is not None else acc.add_unknown()
        return
    if not names or operator is None:
        # ${#x}, ${x/a/b}, ${x:0:2}: the value is not predicted; commands inside are still checked.
        start = len(walk.commands)
        for child in named[1:]:
            walk.statement(child, scope.child(), walk)
        acc.inner.extend(walk.commands[start:])
        acc.add_unknown()
        return
    known = _variable(node_text(names[0]), scope)
    operand = evaluate(named[1:], scope, walk) if len(named) > 1 else Word.literal("")
    acc.inner.extend(operand.inner)
    if operator in _REQUIRED_OPS:
        if known is not None:
            add_word(acc, known)
        else:  # bash stops with an error rather than expand an unset `${x:?}` to nothing
            acc.dynamic = True
            acc.add([(node_text(node), UNKNOWN)])
    elif operator in _DEFAULT_OPS:
        if known is not None and (known.value or operator in ("-", "=")):
            add_word(acc, known)
        elif known is not None:
            add_word(acc, operand)
        else:  # unknown: its value, or the default
            acc.dynamic = True
            add_word(acc, replace(operand, values=("",) + operand.values, templates=(UNKNOWN,) + operand.templates))
    elif known is not None:  # ${x:+alt}
        add_word(acc, operand if known.value else Word.literal(""))
    else:
        acc.dynamic = True
        add_word(acc, replace(operand, values=("",) + operand.values, templates=("",) + operand.templates))


def _variable(name: str, scope: Scope) -> Word | None:
    if scope.positional is not None and (is_positional(name) or name == "#"):
        return _positional(name, scope.positional, scope.nested)
    if name in scope.variables:
        return scope.variables[name]
    if name == "HOME":
        return Word.literal(HOME)
    if name == "PWD" and scope.cwd is not None:
        return Word.literal(scope.cwd)
    return None


def _positional(name: str, args: tuple[Word, ...], nested: bool) -> Word:
    if name == "#":
        return Word.literal(str(len(args)))
    if name.isdigit():
        index = int(name) - 1
        return args[index] if index < len(args) else Word.literal("")
    acc = Accumulator(nested=nested)
    for index, arg in enumerate(args):
        acc.add_literal(" " if index else "")
        add_word(acc, arg)
    return acc.word(f"${name}")


def node_text(node: Node) -> str:
    """The source text of ``node``."""
    return node.text.decode("utf-8", "replace")