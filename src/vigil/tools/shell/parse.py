"""Split a shell command line into every simple command it would run, words already evaluated.

The parser is tree-sitter's bash grammar (PyPI ``tree-sitter`` + ``tree-sitter-bash``, both
maintained by the tree-sitter project). Two alternatives were tried on real developer commands:

- ``bashlex`` (last release 2023) rejects ordinary bash that models write all the time:
  ``[[ -f x ]]``, ``$((1+2))``, ``cat > f <<'EOF'``, ``case``, arrays, ``time make``,
  ``for ((i=0; ...))``. Since whatever cannot be parsed counts as dangerous, each of those would
  be a false alarm.
- ``shlex`` with ``punctuation_chars`` is a tokenizer, not a parser: it knows nothing of ``$(...)``,
  backticks, here-documents, ``${x:-y}`` or ``$'...'``, so every such construct would have to be
  re-implemented on top of it by hand, which is exactly the pattern list that failed.

tree-sitter-bash parses all of the above into a syntax tree and marks what it cannot parse
(``has_error``), which is the confidence signal needed. It has two quirks handled here: a
here-document's redirect node swallows the rest of its line (``cat <<EOF | sh`` puts the ``| sh``
pipeline inside the redirect), and words after a redirect target (``rm >/dev/null -rf /``) are
attached to the redirect instead of the command.

Word evaluation is static and conservative: quotes and backslashes are removed, ``$'...'`` is
decoded, ``~`` and ``$HOME`` become :data:`~vigil.tools.shell.words.HOME`, braces are expanded, variables assigned earlier
on the same line (and ``for`` loop values) are substituted, and anything only known at run time
(other variables, command output) reads as the empty string and marks the word ``dynamic``. For
strings that another shell will parse again (``sh -c``, ``eval``) each unknown part is kept as
:data:`~vigil.tools.shell.words.UNKNOWN` instead, so the nested parse still sees that something is there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterator

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

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
    combine_words,
    decode_ansi_c,
    expand_tilde,
    unescape,
    unescape_double,
    unknown_word,
)

_LANGUAGE = Language(tree_sitter_bash.language())
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(slots=True)
class _Scope:
    variables: dict[str, Word]
    cwd: str | None
    redirects: tuple[Redirect, ...] = ()
    piped: bool = False
    upstream: tuple[SimpleCommand, ...] = ()
    background: bool = False
    function: str | None = None
    nested: bool = False

    def child(self, **changes: object) -> "_Scope":
        fresh = replace(self, variables=dict(self.variables))
        for key, value in changes.items():
            setattr(fresh, key, value)
        return fresh


@dataclass(slots=True)
class _Walk:
    commands: list[SimpleCommand] = field(default_factory=list)
    source: bytes = b""
    """The bytes the tree was parsed from (``Node.text`` copies them on every call)."""


_MAX_REPAIRS = 16


class _LineBreakInCommand(ParseFailure):
    """tree-sitter-bash ran a simple command on past the newline at byte ``offset``."""

    def __init__(self, offset: int) -> None:
        super().__init__("the parser and the shell could disagree about where a command ends")
        self.offset = offset


def parse(source: str, *, nested: bool = False) -> list[SimpleCommand]:
    """Every simple command in ``source``, in order; raises :class:`ParseFailure`.

    ``nested`` marks a string another shell parses again: :data:`UNKNOWN` in it is a run-time value.
    """
    bad = _CONTROL.search(source)
    if bad:
        raise ParseFailure(f"it contains the control character {bad.group()!r}")
    data = source.encode("utf-8")
    for _ in range(_MAX_REPAIRS):
        try:
            return _parse_bytes(data, nested)
        except _LineBreakInCommand as exc:
            # Bash ends a simple command at an unescaped newline between its words, so a `;` in
            # front of that newline changes nothing for bash and shows the parser where it ends.
            data = data[: exc.offset] + b";" + data[exc.offset :]
    raise ParseFailure("the parser and the shell could disagree about where commands end")


def _parse_bytes(data: bytes, nested: bool) -> list[SimpleCommand]:
    tree = Parser(_LANGUAGE).parse(data)
    if tree.root_node.has_error:
        raise ParseFailure(f"the shell syntax is incomplete or invalid near {_error_snippet(tree.root_node)!r}")
    _check_statements_end_at_newlines(tree.root_node, data)
    walk = _Walk(source=data)
    _statement(tree.root_node, _Scope(variables={}, cwd=None, nested=nested), walk)
    return walk.commands


def _error_snippet(root: Node) -> str:
    for node in _descendants(root):
        if node.is_error or node.is_missing:
            start = max(node.start_byte - 10, 0)
            return root.text[start : node.end_byte + 10].decode("utf-8", "replace").strip() or "the end"
    return root.text[:40].decode("utf-8", "replace")


def _descendants(node: Node) -> Iterator[Node]:
    yield node
    for child in node.children:
        yield from _descendants(child)


def _statement(node: Node, scope: _Scope, walk: _Walk) -> None:
    """Walk a statement of any kind, recording the simple commands it runs."""
    kind = node.type
    if kind == "command":
        _command(node, scope, walk)
    elif kind == "redirected_statement":
        _redirected(node, scope, walk)
    elif kind == "pipeline":
        _pipeline(_pipeline_stages(node), scope, walk)
    elif kind in ("subshell", "command_substitution", "process_substitution"):
        inner = scope.child()  # what a subshell changes (cd, variables) stays inside it
        for child in node.children:
            _statement(child, inner, walk)
    elif kind == "variable_assignment":
        _assign(node, scope, walk)
    elif kind == "declaration_command":
        for child in node.children:
            if child.type == "variable_assignment":
                _assign(child, scope, walk)
            elif child.type == "variable_name":
                scope.variables.pop(_text(child), None)
            else:
                _statement(child, scope, walk)
    elif kind == "unset_command":
        for child in node.children[1:]:
            scope.variables.pop(_text(child), None)
    elif kind == "for_statement":
        _for(node, scope, walk)
    elif kind == "function_definition":
        name = next((_text(c) for c in node.children if c.type == "word"), "")
        body = scope.child(function=name)
        for child in node.children:
            if child.type not in ("word", "function", "(", ")"):
                _statement(child, body, walk)
    elif kind in ("list", "program", "compound_statement", "do_group") and _has_background(node):
        _sequence_with_background(node, scope, walk)
    elif node.child_count == 0:
        return
    else:
        for child in node.children:
            if child.type in ("word", "string", "raw_string", "concatenation", "simple_expansion", "expansion"):
                _word([child], scope, walk)  # e.g. the subject of `case`, `[[ ]]` operands
            else:
                _statement(child, scope, walk)


def _has_background(node: Node) -> bool:
    return any(child.type == "&" for child in node.children)


def _sequence_with_background(node: Node, scope: _Scope, walk: _Walk) -> None:
    children = node.children
    for index, child in enumerate(children):
        if child.type == "&":
            continue
        background = index + 1 < len(children) and children[index + 1].type == "&"
        _statement(child, scope.child(background=True) if background else scope, walk)


def _pipeline_stages(node: Node) -> list[Node]:
    stages: list[Node] = []
    for child in node.children:
        if child.type == "pipeline":
            stages.extend(_pipeline_stages(child))
        elif child.type not in ("|", "|&"):
            stages.append(child)
    return stages


def _pipeline(stages: list[Node], scope: _Scope, walk: _Walk, upstream: tuple[SimpleCommand, ...] = ()) -> None:
    # Every stage runs in a subshell of its own; each one's input is the stages before it.
    piped = bool(upstream)
    for stage in stages:
        start = len(walk.commands)
        _statement(stage, scope.child(piped=piped, upstream=upstream), walk)
        upstream = upstream + tuple(walk.commands[start:])
        piped = True
_REDIRECTS = ("file_redirect", "herestring_redirect", "heredoc_redirect")


def _redirected(node: Node, scope: _Scope, walk: _Walk) -> None:
    body: Node | None
    body, *redirect_nodes = node.children
    if body.type in _REDIRECTS:  # `> file` alone: a redirect without a command
        body, redirect_nodes = None, list(node.children)
    redirects: list[Redirect] = []
    extra_args: list[list[Node]] = []
    continuation: list[Node] = []
    following: list[Node] = []
    for redirect in redirect_nodes:
        _redirect(redirect, scope, walk, redirects, extra_args, continuation, following)
    if extra_args and (body is None or body.type != "command"):
        raise ParseFailure("words follow a redirect of a compound command")
    inner = scope.child(redirects=scope.redirects + tuple(redirects))
    start = len(walk.commands)
    if body is None:
        walk.commands.append(SimpleCommand(words=(Word.literal(":"),), redirects=inner.redirects, cwd=scope.cwd))
    elif body.type == "command":
        _command(body, inner, walk, extra_args)
    else:
        _statement(body, inner, walk)
    if continuation:
        _pipeline(continuation, scope, walk, upstream=scope.upstream + tuple(walk.commands[start:]))
    for statement in following:
        _statement(statement, scope, walk)


def _redirect(
    node: Node,
    scope: _Scope,
    walk: _Walk,
    redirects: list[Redirect],
    extra_args: list[list[Node]],
    continuation: list[Node],
    following: list[Node],
) -> None:
    kind = node.type
    if kind == "file_redirect":
        op = next((_text(c) for c in node.children if c.type not in ("file_descriptor",) and not c.is_named), "")
        targets = [c for c in node.children if c.is_named and c.type != "file_descriptor"]
        target = _word([targets[0]], scope, walk) if targets else None
        redirects.append(Redirect(op, target))
        extra_args.extend([t] for t in targets[1:])
    elif kind == "herestring_redirect":
        content = [c for c in node.children if c.is_named]
        redirects.append(Redirect("<<<", _word(content, scope, walk) if content else None))
    elif kind == "heredoc_redirect":
        op = "<<"
        quoted = False
        for child in node.children:
            ctype = child.type
            if ctype in ("<<", "<<-"):
                op = ctype
            elif ctype == "heredoc_start":
                quoted = any(ch in _text(child) for ch in "'\"\\")
            elif ctype == "heredoc_body":
                redirects.append(Redirect(op, _heredoc_body(child, quoted, op == "<<-", scope, walk)))
            elif ctype in ("heredoc_end", "file_descriptor"):
                continue
            elif ctype in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                _redirect(child, scope, walk, redirects, extra_args, continuation, following)
            elif ctype == "pipeline" and child.children and child.children[0].type in ("|", "|&"):
                continuation.extend(_pipeline_stages(child))
            elif child.is_named:
                following.append(child)
        if not any(r.op in ("<<", "<<-") for r in redirects):
            redirects.append(Redirect(op, Word.literal("")))
    else:
        raise ParseFailure(f"unfamiliar redirect {kind}")


def _heredoc_body(node: Node, quoted: bool, strip_tabs: bool, scope: _Scope, walk: _Walk) -> Word:
    if quoted:
        text = _text(node)
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
            acc.add_literal(unescape_double(_text(child)))
        else:
            _piece(child, acc, scope, walk, quoted=True)
        position = child.end_byte
    acc.add_literal(source[position - base :].decode())
    return acc.word(_text(node))


def _assign(node: Node, scope: _Scope, walk: _Walk) -> None:
    name_node = node.children[0]
    values = [c for c in node.children[2:]] if len(node.children) > 2 else []
    word = _word(values, scope, walk, braces=False) if values else Word.literal("")  # x={a,b} is literal
    if name_node.type == "variable_name":
        scope.variables[_text(name_node)] = word


def _for(node: Node, scope: _Scope, walk: _Walk) -> None:
    name = ""
    items: list[Word] = []
    seen_in = False
    for child in node.children:
        if child.type == "variable_name" and not name:
            name = _text(child)
        elif child.type == "in":
            seen_in = True
        elif child.type == "do_group":
            if name:
                scope.variables[name] = combine_words(items) if seen_in else unknown_word(f"${name}")
            _statement(child, scope, walk)
        elif seen_in and child.is_named:
            items.append(_word([child], scope, walk))
_ARGUMENT_TYPES = {
    "word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation",
    "simple_expansion", "expansion", "command_substitution", "process_substitution",
    "arithmetic_expansion", "number", "brace_expression", "$",
}  # fmt: skip


def _command(node: Node, scope: _Scope, walk: _Walk, extra_args: list[list[Node]] | None = None) -> None:
    _check_no_line_break(node, walk.source)
    groups: list[list[Node]] = []
    redirects: list[Redirect] = []
    previous_end = -1
    for child in node.children:
        kind = child.type
        if kind == "variable_assignment":
            _assign(child, scope.child(), walk)  # a prefix assignment only holds for this command
        elif kind == "command_name":
            groups.append([child.children[0]] if child.children else [child])
            previous_end = child.end_byte
        elif kind in _REDIRECTS:
            nested_args: list[list[Node]] = []
            continuation: list[Node] = []
            following: list[Node] = []
            _redirect(child, scope, walk, redirects, nested_args, continuation, following)
            if continuation or following:
                raise ParseFailure("a here-document is followed by more commands in an unfamiliar way")
            groups.extend(nested_args)
        elif kind in _ARGUMENT_TYPES or child.is_named:
            # Pieces that touch (`$"x"`, a quirk of the grammar) belong to one word.
            if groups and child.start_byte == previous_end:
                groups[-1].append(child)
            else:
                groups.append([child])
            previous_end = child.end_byte
    groups.extend(extra_args or [])
    words = tuple(w for group in groups for w in _split_fields(group, _word(group, scope, walk)))
    if not words:
        return
    command = SimpleCommand(
        words=words,
        redirects=scope.redirects + tuple(redirects),
        piped=scope.piped,
        upstream=scope.upstream,
        cwd=scope.cwd,
        background=scope.background,
        function=scope.function,
    )
    walk.commands.append(command)
    _track_cd(command, scope)
    _track_set(command, scope)


def _check_no_line_break(node: Node, source: bytes) -> None:
    """A simple command never continues past an unescaped newline between its words.

    tree-sitter-bash sometimes reads ``... | head<newline>rm -rf /`` as ``head rm -rf /`` without
    reporting an error; bash runs ``rm`` as a command of its own.
    """
    children = node.children
    for before, after in zip(children, children[1:]):
        for offset in range(before.end_byte, after.start_byte):
            if _unescaped_newline_at(source, offset):
                raise _LineBreakInCommand(offset)


# Nodes that bash ends at an unescaped newline between their parts (a pipeline may go on after
# its `|`); tree-sitter-bash sometimes runs them on, e.g. ``a | head<newline>ls 2>/dev/null
# <newline>awk ...`` became one pipeline with a redirect to four files.
_ENDS_AT_NEWLINE = frozenset({"pipeline", "redirected_statement", "file_redirect"})
_NEWLINE_MAY_FOLLOW = frozenset({"|", "|&"})


def _check_statements_end_at_newlines(root: Node, source: bytes) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type not in _ENDS_AT_NEWLINE:
            continue
        children = node.children
        for before, after in zip(children, children[1:]):
            if before.type in _NEWLINE_MAY_FOLLOW or "heredoc" in before.type or "heredoc" in after.type:
                continue
            for offset in range(before.end_byte, after.start_byte):
                if _unescaped_newline_at(source, offset):
                    raise _LineBreakInCommand(offset)


def _unescaped_newline_at(source: bytes, index: int) -> bool:
    return source[index : index + 1] == b"\n" and (index == 0 or source[index - 1 : index] != b"\\")


def _split_fields(group: list[Node], word: Word) -> list[Word]:
    """An unquoted ``$var`` whose known value has blanks splits into several words."""
    if len(group) != 1 or group[0].type not in ("simple_expansion", "expansion") or len(word.values) != 1:
        return [word]
    fields = word.value.split()
    templates = word.templates[0].split()
    if len(fields) <= 1 or len(fields) != len(templates):
        return [word]
    return [replace(word, values=(f,), templates=(t,)) for f, t in zip(fields, templates)]


def _track_set(command: SimpleCommand, scope: _Scope) -> None:
    """``set -- a b`` (or ``set a b``) makes ``$1``, ``$2`` known."""
    words = command.words
    if words[0].value != "set" or len(words) < 2:
        return
    args = list(words[1:])
    if args[0].value == "--":
        args = args[1:]
    elif args[0].value.startswith(("-", "+")):
        return
    for number, word in enumerate(args, start=1):
        scope.variables[str(number)] = word


def _track_cd(command: SimpleCommand, scope: _Scope) -> None:
    if command.words[0].value not in ("cd", "pushd"):
        return
    args = [w for w in command.words[1:] if not w.value.startswith("-") or w.value == "-"]
    if not args:
        scope.cwd = HOME
        return
    target = args[0]
    if target.dynamic or len(target.values) != 1 or target.value == "-":
        scope.cwd = None
        return
    path = target.value
    if path.startswith("/") or scope.cwd is None:
        scope.cwd = path  # relative: relative to the working directory the command starts in
    else:
        scope.cwd = scope.cwd.rstrip("/") + "/" + path


def _word(nodes: list[Node], scope: _Scope, walk: _Walk, *, braces: bool = True) -> Word:
    acc = Accumulator(nested=scope.nested)
    pieces = _flatten(nodes)
    for index, piece in enumerate(pieces):
        _piece(piece, acc, scope, walk, quoted=False, first=index == 0)
    acc.unquoted_braces = acc.unquoted_braces and braces
    return acc.word(" ".join(_text(n) for n in nodes) if len(nodes) > 1 else (_text(nodes[0]) if nodes else ""))


def _flatten(nodes: list[Node]) -> list[Node]:
    flat: list[Node] = []
    for node in nodes:
        if node.type == "concatenation":
            flat.extend(_flatten(list(node.children)))
        else:
            flat.append(node)
    return flat


def _piece(node: Node, acc: Accumulator, scope: _Scope, walk: _Walk, *, quoted: bool, first: bool = False) -> None:
    kind = node.type
    text = _text(node)
    if kind in ("word", "number", "$", "extglob_pattern"):
        if kind == "word" and not quoted and UNESCAPED_META.search(text):
            # tree-sitter-bash glues `true<newline>\rm` into one word; bash runs two commands.
            raw = node.text
            breaks = [i for i in range(len(raw)) if _unescaped_newline_at(raw, i)]
            if breaks:
                raise _LineBreakInCommand(node.start_byte + breaks[0])
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
                acc.add_literal(unescape_double(_text(child)))
            elif child.type not in ('"', "$"):
                _piece(child, acc, scope, walk, quoted=True)
    elif kind in ("simple_expansion", "expansion"):
        _expansion(node, acc, scope, walk)
    elif kind in ("command_substitution", "process_substitution"):
        start = len(walk.commands)
        _statement(node, scope.child(piped=False, upstream=(), background=False), walk)
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
            _statement(child, scope.child(), walk)
        acc.inner.extend(walk.commands[start:])
        acc.add_unknown()
_DEFAULT_OPS = {":-", "-", ":=", "="}
_ALTERNATIVE_OPS = {":+", "+"}
_REQUIRED_OPS = {":?", "?"}


def _expansion(node: Node, acc: Accumulator, scope: _Scope, walk: _Walk) -> None:
    names = [c for c in node.children if c.type in ("variable_name", "special_variable_name")]
    named = [c for c in node.children if c.is_named]
    tokens = [c.type for c in node.children if not c.is_named]
    operator = next((t for t in tokens if t in _DEFAULT_OPS | _ALTERNATIVE_OPS | _REQUIRED_OPS), None)
    if len(named) == 1 and names and all(t in ("$", "${", "}") for t in tokens):
        known = _variable(_text(names[0]), scope)
        add_word(acc, known) if known is not None else acc.add_unknown()
        return
    if not names or operator is None:
        # ${#x}, ${x/a/b}, ${x:0:2}: the value is not predicted; commands inside are still checked.
        start = len(walk.commands)
        for child in named[1:]:
            _statement(child, scope.child(), walk)
        acc.inner.extend(walk.commands[start:])
        acc.add_unknown()
        return
    known = _variable(_text(names[0]), scope)
    operand = _word(named[1:], scope, walk) if len(named) > 1 else Word.literal("")
    acc.inner.extend(operand.inner)
    if operator in _REQUIRED_OPS:
        if known is not None:
            add_word(acc, known)
        else:  # bash stops with an error rather than expand an unset `${x:?}` to nothing
            acc.dynamic = True
            acc.add([(_text(node), UNKNOWN)])
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


def _variable(name: str, scope: _Scope) -> Word | None:
    if name in scope.variables:
        return scope.variables[name]
    if name == "HOME":
        return Word.literal(HOME)
    if name == "PWD" and scope.cwd is not None:
        return Word.literal(scope.cwd)
    return None


def _text(node: Node) -> str:
    return node.text.decode("utf-8", "replace")