"""Habits of the test suite, checked on its source: a test waits on state, never on the clock.

A sleep followed at once by an assertion checks that something did *not* happen in a time the
test guessed — on a loaded machine it passes while the thing is merely late, and it makes the
suite slow. Wait on stored state instead (``tests/gateway/settling.py``: once the inbox is
finished and the outbox sent, no answer can still arrive; ``vigil.testing.waiting``)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _is_sleep(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.Expr):
        return False
    call = statement.value.value if isinstance(statement.value, ast.Await) else statement.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "sleep"):
        return False
    yields_only = bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value == 0
    return not yields_only


def sleeps_then_asserts(source: str) -> list[int]:
    """Lines of sleeps followed at once by an ``assert`` (polling loops aside: there the assert
    is the loop's deadline)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                found += [a.lineno for a, b in zip(body, body[1:]) if _is_sleep(a) and isinstance(b, ast.Assert)]
    return sorted(found)


def test_no_test_sleeps_and_then_asserts() -> None:
    offenders = [
        f"{path.relative_to(TESTS)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in sleeps_then_asserts(path.read_text())
    ]
    assert offenders == []


def test_the_check_sees_a_sleep_then_assert_and_lets_a_polling_loop_be() -> None:
    guessed = "async def t():\n    await asyncio.sleep(0.5)\n    assert len(sent) == 1\n"
    polled = "def t():\n    while busy():\n        time.sleep(0.01)\n        assert time.time() < deadline\n"
    yielded = "async def t():\n    await asyncio.sleep(0)\n    assert done\n"
    assert sleeps_then_asserts(guessed) == [2]
    assert sleeps_then_asserts(polled) == sleeps_then_asserts(yielded) == []
