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

Words are evaluated statically (:mod:`vigil.tools.shell.expand`). A call of a function defined
earlier on the line walks the function's body again with the call's arguments as ``$1``, ``$@``
...; where it is defined, the body is walked with unknown arguments.
"""

from __future__ import annotations

import re
from typing import Iterator

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from vigil.tools.shell.expand import (
    LineBreakInCommand,
    Scope,
    Walk,
    evaluate,
    fields,
    heredoc_body,
    is_positional,
    lone_expansion,
    node_text,
    unescaped_newline_at,
)
from vigil.tools.shell.words import HOME, ParseFailure, Redirect, SimpleCommand, Word, combine_words, unknown_word

_LANGUAGE = Language(tree_sitter_bash.language())
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


_MAX_CALLS = 256
"""Function calls walked per line: more (functions calling each other many times) is not judged."""


_MAX_REPAIRS = 16


def parse(source: str, *, nested: bool = False, positional: tuple[Word, ...] | None = None) -> list[SimpleCommand]:
    """Every simple command in ``source``, in order; raises :class:`ParseFailure`.

    ``nested`` marks a string another shell parses again: :data:`UNKNOWN` in it is a run-time value.
    ``positional`` are ``$1``, ``$2`` ... when they are known (``sh -c 'script' $0 $1 ...``).
    """
    bad = _CONTROL.search(source)
    if bad:
        raise ParseFailure(f"it contains the control character {bad.group()!r}")
    data = source.encode("utf-8")
    for _ in range(_MAX_REPAIRS):
        try:
            return _parse_bytes(data, nested, positional)
        except LineBreakInCommand as exc:
            # Bash ends a simple command at an unescaped newline between its words, so a `;` in
            # front of that newline changes nothing for bash and shows the parser where it ends.
            data = data[: exc.offset] + b";" + data[exc.offset :]
    raise ParseFailure("the parser and the shell could disagree about where commands end")


def _parse_bytes(data: bytes, nested: bool, positional: tuple[Word, ...] | None) -> list[SimpleCommand]:
    tree = Parser(_LANGUAGE).parse(data)
    if tree.root_node.has_error:
        raise ParseFailure(f"the shell syntax is incomplete or invalid near {_error_snippet(tree.root_node)!r}")
    _check_statements_end_at_newlines(tree.root_node, data)
    walk = Walk(statement=_statement, source=data)
    _statement(tree.root_node, Scope(variables={}, cwd=None, nested=nested, positional=positional), walk)
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


def _statement(node: Node, scope: Scope, walk: Walk) -> None:
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
                scope.variables.pop(node_text(child), None)
            else:
                _statement(child, scope, walk)
    elif kind == "unset_command":
        for child in node.children[1:]:
            scope.variables.pop(node_text(child), None)
    elif kind == "for_statement":
        _for(node, scope, walk)
    elif kind == "function_definition":
        name = next((node_text(c) for c in node.children if c.type == "word"), "")
        body = [c for c in node.children if c.type not in ("word", "function", "(", ")")]
        # Walked here with unknown arguments (a body that is dangerous whatever it is given, and
        # fork bombs), and again at each call with that call's arguments.
        inner = scope.child(function=name, positional=None)
        for child in body:
            _statement(child, inner, walk)
        walk.functions[name] = body
    elif kind in ("list", "program", "compound_statement", "do_group") and _has_background(node):
        _sequence_with_background(node, scope, walk)
    elif node.child_count == 0:
        return
    else:
        for child in node.children:
            if child.type in ("word", "string", "raw_string", "concatenation", "simple_expansion", "expansion"):
                evaluate([child], scope, walk)  # e.g. the subject of `case`, `[[ ]]` operands
            else:
                _statement(child, scope, walk)


def _has_background(node: Node) -> bool:
    return any(child.type == "&" for child in node.children)


def _sequence_with_background(node: Node, scope: Scope, walk: Walk) -> None:
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


def _pipeline(stages: list[Node], scope: Scope, walk: Walk, upstream: tuple[SimpleCommand, ...] = ()) -> None:
    # Every stage runs in a subshell of its own; each one's input is the stages before it.
    piped = bool(upstream)
    for stage in stages:
        start = len(walk.commands)
        _statement(stage, scope.child(piped=piped, upstream=upstream), walk)
        upstream = upstream + tuple(walk.commands[start:])
        piped = True


_REDIRECTS = ("file_redirect", "herestring_redirect", "heredoc_redirect")


def _redirected(node: Node, scope: Scope, walk: Walk) -> None:
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
    elif body.type == "list" and not _has_background(body):
        # tree-sitter hangs `a && b < in` on the whole list; bash gives it to the last part only
        *before, last = [child for child in body.children if child.type not in ("&&", "||")]
        for child in before:
            _statement(child, scope, walk)
        _statement(last, inner, walk)
    else:
        _statement(body, inner, walk)
    if continuation:
        _pipeline(continuation, scope, walk, upstream=scope.upstream + tuple(walk.commands[start:]))
    for statement in following:
        _statement(statement, scope, walk)


def _redirect(
    node: Node,
    scope: Scope,
    walk: Walk,
    redirects: list[Redirect],
    extra_args: list[list[Node]],
    continuation: list[Node],
    following: list[Node],
) -> None:
    kind = node.type
    if kind == "file_redirect":
        op = next((node_text(c) for c in node.children if c.type not in ("file_descriptor",) and not c.is_named), "")
        targets = [c for c in node.children if c.is_named and c.type != "file_descriptor"]
        target = evaluate([targets[0]], scope, walk) if targets else None
        redirects.append(Redirect(op, target))
        extra_args.extend([t] for t in targets[1:])
    elif kind == "herestring_redirect":
        content = [c for c in node.children if c.is_named]
        redirects.append(Redirect("<<<", evaluate(content, scope, walk) if content else None))
    elif kind == "heredoc_redirect":
        op = "<<"
        quoted = False
        for child in node.children:
            ctype = child.type
            if ctype in ("<<", "<<-"):
                op = ctype
            elif ctype == "heredoc_start":
                quoted = any(ch in node_text(child) for ch in "'\"\\")
            elif ctype == "heredoc_body":
                redirects.append(Redirect(op, heredoc_body(child, quoted, op == "<<-", scope, walk)))
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


def _assign(node: Node, scope: Scope, walk: Walk) -> None:
    name_node = node.children[0]
    values = [c for c in node.children[2:]] if len(node.children) > 2 else []
    word = evaluate(values, scope, walk, braces=False) if values else Word.literal("")  # x={a,b} is literal
    if name_node.type == "variable_name":
        scope.variables[node_text(name_node)] = word


def _for(node: Node, scope: Scope, walk: Walk) -> None:
    name = ""
    items: list[Word] = []
    seen_in = False
    for child in node.children:
        if child.type == "variable_name" and not name:
            name = node_text(child)
        elif child.type == "in":
            seen_in = True
        elif child.type == "do_group":
            if name:
                scope.variables[name] = combine_words(items) if seen_in else unknown_word(f"${name}")
            _statement(child, scope, walk)
        elif seen_in and child.is_named:
            items.append(evaluate([child], scope, walk))


_ARGUMENT_TYPES = {
    "word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation",
    "simple_expansion", "expansion", "command_substitution", "process_substitution",
    "arithmetic_expansion", "number", "brace_expression", "$",
}  # fmt: skip


def _command(node: Node, scope: Scope, walk: Walk, extra_args: list[list[Node]] | None = None) -> None:
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
    words = tuple(w for group in groups for w in fields(group, scope, walk))
    if not words:
        return
    defining = scope.function is not None and scope.positional is None  # a body, walked without a call
    if defining and groups:
        expansion = lone_expansion(groups[0])
        if expansion is not None and is_positional(expansion[0]):
            return  # a body's `"$@"`: its arguments decide what runs, judged at each call
    head = words[0]
    calls = None if head.dynamic or len(head.values) != 1 else walk.functions.get(head.value)
    command = SimpleCommand(
        words=words,
        redirects=scope.redirects + tuple(redirects),
        piped=scope.piped,
        upstream=scope.upstream,
        cwd=scope.cwd,
        background=scope.background,
        function=scope.function,
        calls_function=calls is not None,
    )
    walk.commands.append(command)
    _track_cd(command, scope)
    _track_set(command, scope)
    _track_shift(command, scope)
    if calls is not None and head.value not in scope.expanding and not defining:
        _call(head.value, calls, command, scope, walk)  # in a body, at the body's own calls


def _call(name: str, body: list[Node], command: SimpleCommand, scope: Scope, walk: Walk) -> None:
    """Walk a function's body for one call: its arguments are ``$1`` ..., its redirects and
    standard input are the call's. What the body changes (variables, cd) stays inside."""
    walk.calls += 1
    if walk.calls > _MAX_CALLS:
        raise ParseFailure(f"it calls functions more than {_MAX_CALLS} times")
    inner = scope.child(
        redirects=command.redirects, positional=command.words[1:], expanding=scope.expanding | {name}
    )
    for child in body:
        _statement(child, inner, walk)


def _check_no_line_break(node: Node, source: bytes) -> None:
    """A simple command never continues past an unescaped newline between its words.

    tree-sitter-bash sometimes reads ``... | head<newline>rm -rf /`` as ``head rm -rf /`` without
    reporting an error; bash runs ``rm`` as a command of its own.
    """
    children = node.children
    for before, after in zip(children, children[1:]):
        for offset in range(before.end_byte, after.start_byte):
            if unescaped_newline_at(source, offset):
                raise LineBreakInCommand(offset)


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
                if unescaped_newline_at(source, offset):
                    raise LineBreakInCommand(offset)


def _track_set(command: SimpleCommand, scope: Scope) -> None:
    """``set -- a b`` (or ``set a b``) makes ``$1``, ``$2`` known."""
    words = command.words
    if words[0].value != "set" or len(words) < 2:
        return
    args = list(words[1:])
    if args[0].value == "--":
        args = args[1:]
    elif args[0].value.startswith(("-", "+")):
        return
    scope.positional = tuple(args)


def _track_shift(command: SimpleCommand, scope: Scope) -> None:
    words = command.words
    if words[0].value != "shift" or scope.positional is None:
        return
    count = words[1] if len(words) > 1 else Word.literal("1")
    if count.dynamic or not count.value.isdigit():
        scope.positional = None
    else:
        scope.positional = scope.positional[int(count.value) :]


def _track_cd(command: SimpleCommand, scope: Scope) -> None:
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


