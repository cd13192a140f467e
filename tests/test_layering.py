"""The layout rules of DESIGN.md, checked on the source: no import runs upward, and a file-name
prefix shared by several files in one folder has become a folder.

Order, bottom to top (a module may import its own layer and the layers below it):

    foundation (config, the platform registry, clock and the few single-file modules beside them)
    → store → prompt, models → schedule → tools → agent → runtime → gateway → doctor → cli

Decisions this test pins (DESIGN.md names only the folders):

* The single-file modules at the top of the package (``clock``, ``masking``, ``profiles`` ...)
  are the foundation, with ``config`` and ``platforms``, and so may import only each other. At
  most :data:`LOOSE_LIMIT` of them: a module with one user lives beside that user.
* ``gateway`` runs scheduled jobs and, later, messaging platforms through the runtime; the CLI
  starts it. It sits between runtime and cli.
* ``doctor`` checks every part (the store, the sandbox, the model endpoint, the gateway) for
  ``vigil doctor``, so it sits above them all, just below cli.
* ``testing`` (the fake model server) is a side layer: it imports only the foundation, so it
  cannot lean on the code it is there to test, and nothing else in vigil imports it.
* Every import counts, wherever it is written: lazy imports inside functions and imports under
  ``TYPE_CHECKING`` too. None is needed today; add one to ``ALLOWED`` with the reason if ever.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import vigil

PACKAGE = Path(vigil.__file__).parent

FOUNDATION = 0
RANKS: dict[str, int] = {
    "config": FOUNDATION,
    "platforms": FOUNDATION,  # the platform registry: declarations beside config
    "store": 1,
    "prompt": 2,
    "models": 2,
    "schedule": 3,
    "tools": 4,
    "agent": 5,
    "runtime": 6,
    "gateway": 7,
    "doctor": 8,
    "cli": 9,
}
SIDE = "testing"

ALLOWED: dict[tuple[str, str], str] = {}
"""(importing module, imported module) → why this upward import is needed. Empty: none is."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The top-level unit a module belongs to: ``vigil.store.sqlite.conn`` → ``store``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "vigil"


def rank_of(module: str) -> int:
    return RANKS.get(layer_of(module), FOUNDATION)


def imported_modules(path: Path, module: str) -> list[str]:
    """Every vigil module `path` imports, resolving relative imports."""
    found: list[str] = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.append(base)
    return [name for name in found if name == "vigil" or name.startswith("vigil.")]


def all_modules() -> list[tuple[Path, str]]:
    return [(path, module_name(path)) for path in sorted(PACKAGE.rglob("*.py"))]


def test_the_layer_table_knows_every_folder() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders - set(RANKS) - {SIDE} == set()


def test_no_import_runs_upward() -> None:
    upward = []
    for path, module in all_modules():
        for target in imported_modules(path, module):
            if (module, target) in ALLOWED:
                continue
            source_layer, target_layer = layer_of(module), layer_of(target)
            if source_layer == target_layer:
                continue
            if source_layer == SIDE:
                bad = rank_of(target) != FOUNDATION or target_layer == SIDE
            elif target_layer == SIDE:
                bad = True
            else:
                bad = rank_of(target) > rank_of(module)
            if bad:
                upward.append(f"{module} imports {target}")
    assert upward == []


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    # the rule above is only as good as the parser: it must see lazy and TYPE_CHECKING imports
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from vigil.agent.turn import Agent\n"
        "def later():\n    import vigil.runtime.slash\n"
    )
    assert imported_modules(source, "vigil.schedule.probe") == ["vigil.agent.turn", "vigil.runtime.slash"]
    assert rank_of("vigil.agent.turn") > rank_of("vigil.schedule.probe")


def name_prefix(stem: str) -> str:
    """The first word of a module's file name, singular: ``settings_edit`` → ``setting``."""
    word = re.match(r"_*[^_]+", stem).group(0)  # type: ignore[union-attr]
    return word[:-1] if word.endswith("s") and "_" in stem else word


def crowded_prefixes(stems: list[str]) -> list[str]:
    prefixes = Counter(name_prefix(stem) for stem in stems if stem not in ("__init__", "__main__"))
    return sorted(prefix for prefix, n in prefixes.items() if n >= 3)


def test_no_file_name_prefix_is_shared_by_three_files_in_a_folder() -> None:
    crowded = []
    for folder in sorted({path.parent for path, _ in all_modules()}):
        stems = [p.stem for p in folder.glob("*.py")]
        crowded += [f"{folder.relative_to(PACKAGE.parent)}/{prefix}_*" for prefix in crowded_prefixes(stems)]
    assert crowded == []


def test_the_prefix_rule_sees_singular_and_plural_as_one_word() -> None:
    # setting_origins, settings_edit and settings_schema once lay side by side uncaught
    assert crowded_prefixes(["setting_origins", "settings_edit", "settings_schema", "clock"]) == ["setting"]
    assert crowded_prefixes(["status", "stats", "settings"]) == []


LOOSE_LIMIT = 6


def test_few_modules_lie_loose_at_the_top_of_the_package() -> None:
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert len(loose) <= LOOSE_LIMIT, f"{len(loose)} loose modules: {loose}"


# -- cycles and module size: ratchets towards the issue "One way through the gateway" --------

KNOWN_CYCLES: set[frozenset[str]] = set()
"""Import cycles (``TYPE_CHECKING`` imports aside) still to be broken. None may be added; a
broken one must leave this set (the test says so), until it is empty."""

LINE_LIMIT = 500
KNOWN_LONG: dict[str, int] = {}
"""Modules over :data:`LINE_LIMIT` lines, with the length they may not exceed, still to be split."""


def runtime_imports(path: Path, module: str) -> set[str]:
    """The vigil modules ``path`` imports when it runs (lazy imports included, imports under
    ``if TYPE_CHECKING:`` not), each resolved to the module that exists."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    known = {name for _, name in all_modules()}
    found: set[str] = set()

    def resolve(name: str) -> None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for statement in child.orelse:
                    visit_one(statement)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("vigil"):
                    resolve(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.startswith("vigil"):
                for alias in node.names:
                    resolve(f"{base}.{alias.name}")
        visit(node)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return found


def import_cycles() -> set[frozenset[str]]:
    """The strongly connected groups of two or more modules in the runtime import graph."""
    graph = {module: runtime_imports(path, module) for path, module in all_modules()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: set[frozenset[str]] = set()

    def connect(node: str) -> None:  # Tarjan's algorithm
        order[node] = low[node] = len(order)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in order:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.add(frozenset(group))

    for node in sorted(graph):
        if node not in order:
            connect(node)
    return cycles


def test_no_new_import_cycle() -> None:
    cycles = import_cycles()
    assert cycles - KNOWN_CYCLES == set(), "new import cycles"
    assert KNOWN_CYCLES - cycles == set(), "broken cycles: take them out of KNOWN_CYCLES"


def test_the_cycle_finder_sees_a_lazy_cycle_and_not_a_type_checking_one(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from vigil.agent.turn import Agent\n"
        "def later():\n    from vigil.runtime import slash\n"
    )
    assert runtime_imports(source, "vigil.schedule.probe") == {"vigil.runtime.slash"}


def test_no_module_grows_past_500_lines() -> None:
    over = {}
    for path, module in all_modules():
        lines = len(path.read_text().splitlines())
        if lines > KNOWN_LONG.get(module, LINE_LIMIT):
            over[module] = lines
    assert over == {}, f"split these modules (at most {LINE_LIMIT} lines each): {over}"
