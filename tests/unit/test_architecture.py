"""The package's shape: every module imports, no import cycle among the project's own modules
(top-level and function-level imports alike), `core/` kept in folders that name its parts, and
`core/` Spark-free and self-contained (spark_contracts_dev/reorganize_core.py lays it out)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "dbt.adapters.spark_contracts"
CORE = f"{PACKAGE}.core"
TREES = (ROOT / "dbt" / "adapters" / "spark_contracts", ROOT / "spark_contracts_dev")
CORE_DIR = ROOT / "dbt" / "adapters" / "spark_contracts" / "core"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for tree in TREES for p in sorted(tree.rglob("*.py"))}


MODULES = project_modules()


def imported_names(name: str, path: Path) -> list[tuple[str, int]]:
    """Every module `path` imports (at any depth: in functions, under `if`, in `try`), absolute,
    with its line. `from a import b` names `a.b` where that is a module, else `a`."""
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                keep = len(base) - node.level + (1 if is_package else 0)
                stem = ".".join(base[:keep] + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            for alias in node.names:
                child = f"{stem}.{alias.name}"
                found.append((child if child in MODULES else stem, node.lineno))
    return found


def import_graph() -> dict[str, dict[str, int]]:
    graph: dict[str, dict[str, int]] = {}
    for name, path in MODULES.items():
        edges: dict[str, int] = {}
        for target, line in imported_names(name, path):
            if target in MODULES and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [one_cycle(graph, set(component)) for component in components]


def one_cycle(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, by breadth-first search."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in component:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle in {component}")


def describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    steps = [f"{a} (line {graph[a][b]}) -> {b}" for a, b in zip(cycle, cycle[1:], strict=False)]
    return "\n  ".join(steps)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.endswith(".__main__")))
def test_every_module_imports(name: str) -> None:
    """(A `__main__` module runs its command when imported: it is only read, for the graph.)"""
    importlib.import_module(name)


def test_no_import_cycle_among_the_projects_modules() -> None:
    graph = import_graph()
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n  " + "\n\n  ".join(describe(graph, c) for c in cycles)


def test_the_cycle_finder_finds_a_function_level_cycle() -> None:
    graph = {"a": {"b": 3}, "b": {"c": 1}, "c": {"a": 9}, "d": {"a": 1}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b": 1}, "b": {}}) == []


def test_core_keeps_every_module_in_a_folder() -> None:
    loose = sorted(p.name for p in CORE_DIR.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules directly in core/ (put each in a folder of core/): {loose}"
    folders = [p for p in CORE_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert folders
    for folder in folders:
        assert (folder / "__init__.py").is_file(), f"{folder} has no __init__.py"


def test_core_is_spark_free_and_self_contained() -> None:
    """A core module imports the standard library, third-party libraries other than Spark's,
    and core itself: not pyspark, not dbt, not the adapter's other modules."""
    bad = []
    for name, path in MODULES.items():
        if name != CORE and not name.startswith(CORE + "."):
            continue
        for target, line in imported_names(name, path):
            top = target.split(".")[0]
            inside = target == CORE or target.startswith(CORE + ".")
            if top in ("pyspark", "py4j", "delta", "spark_contracts_dev") or (
                top == "dbt" and not inside
            ):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not bad, "core imports outside core:\n  " + "\n  ".join(bad)


RUNTIME_LINES = 400  # issue 40: no runtime file over 400 lines


def test_no_runtime_file_is_over_400_lines() -> None:
    """The adapter's own modules (dbt/adapters/spark_contracts), each at most `RUNTIME_LINES`
    lines: a file that grows past it is split by what its parts do."""
    runtime = TREES[0]
    long = {
        str(p.relative_to(runtime)): n
        for p in sorted(runtime.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > RUNTIME_LINES
    }
    assert not long, f"runtime files over {RUNTIME_LINES} lines: {long}"
