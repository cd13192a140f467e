"""The PostgreSQL store runs a gateway or pairing table method again *whole* when its
connection is lost (``postgres.retry.Retried``). That is only safe while each method is one
transaction: a method that committed one transaction and then lost the connection in a second
would commit the first twice. This reads the two classes' source and fails when a public method
(with the private helpers it calls) opens more than one transaction."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from vigil.store.postgres.gateway_tables import PostgresGatewayTables
from vigil.store.postgres.pairing_tables import PostgresPairingTables

_OPENERS = {"write", "read", "query"}


def _methods(cls: type) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    klass = next(node for node in tree.body if isinstance(node, ast.ClassDef))
    return {node.name: node for node in klass.body if isinstance(node, ast.FunctionDef)}


def _transactions(node: ast.AST, methods: dict[str, ast.FunctionDef], seen: frozenset[str]) -> int:
    """The most transactions one run through ``node`` opens: ``self._db.write()/read()/query()``
    calls, plus those of the ``self.method()`` it calls; of an ``if``, the costlier branch."""
    if isinstance(node, ast.If):
        test = _transactions(node.test, methods, seen)
        return test + max(_block(node.body, methods, seen), _block(node.orelse, methods, seen))
    count = 0
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        if (node.func.attr in _OPENERS and isinstance(owner, ast.Attribute) and owner.attr == "_db"
                and isinstance(owner.value, ast.Name) and owner.value.id == "self"):
            count += 1
        elif (isinstance(owner, ast.Name) and owner.id == "self" and node.func.attr in methods
              and node.func.attr not in seen):
            count += _block(methods[node.func.attr].body, methods, seen | {node.func.attr})
    return count + sum(_transactions(child, methods, seen) for child in ast.iter_child_nodes(node))


def _block(statements: list[ast.stmt], methods: dict[str, ast.FunctionDef], seen: frozenset[str]) -> int:
    return sum(_transactions(statement, methods, seen) for statement in statements)


@pytest.mark.parametrize("cls", [PostgresGatewayTables, PostgresPairingTables], ids=lambda c: c.__name__)
def test_every_public_method_is_at_most_one_transaction(cls: type) -> None:
    methods = _methods(cls)
    public = [name for name in methods if not name.startswith("_")]
    assert public, f"{cls.__name__} has no public methods to check"
    over = {name: n for name in public if (n := _block(methods[name].body, methods, frozenset({name}))) > 1}
    assert over == {}, f"{cls.__name__}: methods opening more than one transaction: {over}"
