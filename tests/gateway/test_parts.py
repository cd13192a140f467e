"""The gateway's parts depend on narrow protocols (``vigil.gateway.parts``), not on the
``Gateway`` that assembles them: no module of the gateway but the assembly imports it, and the
``Gateway`` has every member each protocol names (so a part asking for more fails here first)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any, Protocol

import pytest

import vigil.gateway
from vigil.gateway import parts
from vigil.gateway.core import Gateway

GATEWAY = Path(vigil.gateway.__file__).parent
ASSEMBLY = {"core.py", "run.py"}  # the class itself, and the process that builds it


def _imports_the_core(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "vigil.gateway.core":
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "vigil.gateway" and any(a.name == "core" for a in node.names):
            return True
        if isinstance(node, ast.Import) and any(a.name == "vigil.gateway.core" for a in node.names):
            return True
    return False


def test_no_gateway_module_but_the_assembly_imports_the_gateway_class() -> None:
    importing = sorted(
        str(path.relative_to(GATEWAY)) for path in GATEWAY.rglob("*.py") if path.name not in ASSEMBLY and _imports_the_core(path)
    )
    assert importing == []


def _protocols() -> list[type[Any]]:
    return [
        obj
        for _, obj in inspect.getmembers(parts, inspect.isclass)
        if obj.__module__ == parts.__name__ and Protocol in getattr(obj, "__mro__", ()) and obj is not Protocol
    ]


def _members(protocol: type[Any]) -> set[str]:
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls.__module__ in ("typing", "builtins"):
            continue
        names |= set(getattr(cls, "__annotations__", {}))
        names |= {name for name in vars(cls) if not name.startswith("_")}
    return names


def _instance_attributes() -> set[str]:
    """What ``Gateway.__init__`` assigns to ``self``."""
    source = inspect.getsource(Gateway.__init__)
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.replace("\n    ", "\n").strip())):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) and leaf.value.id == "self":
                    found.add(leaf.attr)
    return found


def _missing(protocol: type[Any]) -> set[str]:
    attributes = _instance_attributes()
    return {name for name in _members(protocol) if not hasattr(Gateway, name) and name not in attributes}


@pytest.mark.parametrize("protocol", _protocols(), ids=lambda p: p.__name__)
def test_the_gateway_has_every_member_a_part_asks_for(protocol: type[Any]) -> None:
    assert _missing(protocol) == set()


def test_the_checks_see_a_missing_member() -> None:
    class Wider(parts.Services, Protocol):
        teleport: int

    assert _missing(Wider) == {"teleport"}
    assert len(_protocols()) >= 10
