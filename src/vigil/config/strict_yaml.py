"""A YAML loader for files people edit by hand: bounded, and strict where PyYAML is lenient.

PyYAML's ``safe_load`` keeps the last of two equal keys without a word, composes nested
documents recursively (50,000 levels end in ``RecursionError``), expands nothing but lets an
alias graph describe a billion nodes, and turns a 5,000-digit number into ``ValueError``.
This loader refuses each of these with a ``yaml.MarkedYAMLError`` that carries the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from vigil.masking import printable

MAX_DEPTH = 64
"""Nesting levels a document may have (config files need three or four)."""
MAX_NODES = 10_000
"""Nodes a document may describe, counting each use of an alias as a full copy."""
MAX_NUMBER_CHARS = 100
"""Characters a number may be written with."""

_MERGE_TAG = "tag:yaml.org,2002:merge"


class NumberTooLong(ConstructorError):
    """A number written with more than ``MAX_NUMBER_CHARS`` characters."""


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys, deep nesting, alias bombs and
    over-long numbers."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1

    def compose_document(self) -> Node:
        node = super().compose_document()
        _check_size(node)
        return node  # type: ignore[no-any-return]

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Checked before merge keys (<<) are flattened in: a key that overrides a merged one
        # is intended, two equal keys written in the same mapping are a mistake.
        if isinstance(node, MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node)
                try:
                    seen = first_line.get(key)
                except TypeError:
                    continue  # an unhashable key: the constructor reports it
                if seen is not None:
                    raise ConstructorError(
                        None,
                        None,
                        f"duplicate key {str(key)!r} (first on line {seen}); keep only one",
                        key_node.start_mark,
                    )
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _bounded_number(kind: str, base: Any) -> Any:
    def construct(loader: StrictLoader, node: ScalarNode) -> Any:
        text = str(node.value)
        if len(text) > MAX_NUMBER_CHARS:
            raise NumberTooLong(
                None,
                None,
                f"{kind} written with {len(text):,} characters (at most {MAX_NUMBER_CHARS})",
                node.start_mark,
            )
        return base(loader, node)

    return construct


StrictLoader.add_constructor(
    "tag:yaml.org,2002:int", _bounded_number("a number", yaml.SafeLoader.construct_yaml_int)
)
StrictLoader.add_constructor(
    "tag:yaml.org,2002:float", _bounded_number("a number", yaml.SafeLoader.construct_yaml_float)
)


def _check_size(root: Node | None) -> None:
    """Refuse a node graph that expands to more than ``MAX_NODES`` or refers to itself."""
    if root is None:
        return
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if children_done:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in children)
            if size > MAX_NODES:
                raise ComposerError(
                    None,
                    None,
                    f"the document expands to more than {MAX_NODES:,} values "
                    "(aliases repeat what they refer to)",
                    node.start_mark,
                )
            sizes[key] = size
            continue
        if key in open_nodes:
            raise ComposerError(None, None, "an alias refers to a value that contains it", node.start_mark)
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise ComposerError(
                    None, None, "an alias refers to a value that contains it", child.start_mark
                )
            if id(child) not in sizes:
                stack.append((child, False))


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load(text: str) -> Any:
    """Parse one YAML document with :class:`StrictLoader`."""
    loader = StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def compose(text: str) -> Node | None:
    """The node tree of one YAML document (for finding lines), with the same bounds."""
    loader = StrictLoader(text)
    try:
        return loader.get_single_node()  # type: ignore[no-any-return]
    finally:
        loader.dispose()


def error_location(exc: yaml.YAMLError, text: str, path: Path) -> str:
    """``file:line`` of a YAML error in ``text`` read from ``path`` (``file`` if unknown)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return f"{path}:{mark.line + 1}"
    position = getattr(exc, "position", None)  # a ReaderError: a character YAML does not allow
    if isinstance(position, int):
        return f"{path}:{text.count(chr(10), 0, position) + 1}"
    return str(path)


def error_problem(exc: yaml.YAMLError) -> str:
    """What is wrong, in one printable line."""
    if isinstance(exc, yaml.reader.ReaderError):
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        return f"the character U+{code:04X} is not allowed in YAML (a control character or binary data)"
    problem = getattr(exc, "problem", None) or str(exc)
    return printable(" ".join(str(problem).split()), 300)


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the node at ``loc`` (keys and list indexes) in the YAML ``text``,
    or of its nearest existing ancestor; ``None`` if ``text`` does not parse."""
    try:
        node = compose(text)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, MappingNode):
            match = next(
                ((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == str(part)),
                None,
            )
            if match is None:
                return line
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line
