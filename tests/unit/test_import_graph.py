"""Imports between kafka_ferry modules go one way: no cycle, and only the Airflow edge imports the Airflow edge.

The graph is read from the source with ``ast``: module-level AND function-level imports count, so a lazy import
cannot hide a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "plugins" / "kafka_ferry"
ROOT = "kafka_ferry"

# The Airflow edge: only these may import operators / sensors / triggers / dag_*.
EDGE = ("hooks", "operators", "sensors", "triggers", "dag_factory", "dag_promotion", "plugin", "views")
EDGE_ONLY = ("operators", "sensors", "triggers", "dag_factory", "dag_promotion")

# Cycles not broken yet, each as its sorted member modules. The test checks this list EXACTLY:
# a new cycle fails, and a cycle that is fixed must be removed from here.
KNOWN_CYCLES: set[frozenset[str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The kafka_ferry module an import refers to (a name inside a module resolves to that module)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for target in targets:
                if target.split(".")[0] != ROOT:
                    continue
                resolved = _resolve(target, modules)
                if resolved and resolved != module and not module.startswith(resolved + "."):
                    graph[module].add(resolved)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_cycles_beyond_the_known_list():
    cycles = find_cycles(import_graph())
    new = [sorted(c) for c in cycles - KNOWN_CYCLES]
    fixed = [sorted(c) for c in KNOWN_CYCLES - cycles]
    assert not new, f"import cycle(s) among kafka_ferry modules: {new}"
    assert not fixed, f"cycle(s) no longer present, remove them from KNOWN_CYCLES: {fixed}"


def test_only_the_airflow_edge_imports_operators_sensors_triggers_or_dags():
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if _top(module) not in EDGE
        for target in targets
        if _top(target) in EDGE_ONLY
    )
    assert not wrong, "imports going the wrong way (only the Airflow edge may import it):\n" + "\n".join(wrong)


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    assert "kafka_ferry.copy.planner" in graph["kafka_ferry.promotion.runner"]  # imported inside a function
