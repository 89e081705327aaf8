"""Imports between kafka_ferry modules go one way: down the floors of ``kafka_ferry.layers``, with no cycle between
modules nor between folders, and only the Airflow edge imports the Airflow edge.

The graph is read from the source with ``ast``: module-level AND function-level imports count, so a lazy import
cannot hide a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kafka_ferry.layers import FLOOR, FLOOR_NAME, FLOORS, MODULES, picture

PACKAGE = Path(__file__).resolve().parents[2] / "plugins" / "kafka_ferry"
ROOT = "kafka_ferry"

# The floors and their folders: one table, ``kafka_ferry.layers``, which docs/architecture.md shows too.
EDGE = FLOORS[0].packages  # the Airflow edge: only it may import operators / sensors / triggers / dag_*
EDGE_ONLY = ("operators", "sensors", "triggers", "dag_factory", "dag_promotion")
ARCHITECTURE = PACKAGE.parents[1] / "docs" / "architecture.md"  # the manual's architecture page

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
    assert "kafka_ferry.copy.connect_engine" in graph["kafka_ferry.copy.catch_up"]  # imported inside a function


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor than the importer's, named with both floors."""
    return sorted(
        f"{module} ({FLOOR_NAME[FLOOR[_top(module)]]}) imports {target} ({FLOOR_NAME[FLOOR[_top(target)]]})"
        for module, targets in graph.items() if _top(module) in FLOOR
        for target in targets if _top(target) in FLOOR and FLOOR[_top(target)] > FLOOR[_top(module)]
    )


def test_every_package_has_a_floor():
    unplaced = sorted({_top(m) for m in import_graph()} - set(FLOOR) - {""})
    assert not unplaced, f"packages on no floor of kafka_ferry.layers (place them): {unplaced}"


def test_imports_only_go_down_the_floors():
    wrong = upward_imports(import_graph())
    assert not wrong, "imports going up a floor:\n" + "\n".join(wrong)


def test_an_upward_import_is_caught():
    graph = import_graph()
    graph["kafka_ferry.kafka.cluster"] = graph["kafka_ferry.kafka.cluster"] | {"kafka_ferry.hooks.kafka_cluster"}
    graph["kafka_ferry.core.specs.spec"] = graph["kafka_ferry.core.specs.spec"] | {"kafka_ferry.state.store"}
    assert upward_imports(graph) == [
        "kafka_ferry.core.specs.spec (core) imports kafka_ferry.state.store (state)",
        "kafka_ferry.kafka.cluster (clients) imports kafka_ferry.hooks.kafka_cluster (airflow edge)",
    ]


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which folder (or top-level module) imports which other one."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(_top(module), set()).update(_top(t) for t in targets if _top(t) != _top(module))
    return out


def folder_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    return sorted(sorted(c) for c in find_cycles(folder_graph(graph)))


def test_no_import_cycles_between_folders():
    cycles = folder_cycles(import_graph())
    assert not cycles, f"folders importing each other (directly or round a loop): {cycles}"


def test_a_folder_cycle_is_caught_where_no_module_cycle_is():
    """Two folders on one floor, each importing a different module of the other: no module cycle, a folder one."""
    graph = {"kafka_ferry.provision.acls": {"kafka_ferry.schemas.decode_check"},
             "kafka_ferry.schemas.decode_check": set(),
             "kafka_ferry.schemas.serialized_fields": {"kafka_ferry.provision.topic_ownership"},
             "kafka_ferry.provision.topic_ownership": set(),
             "kafka_ferry.core.specs.spec": set()}
    assert not find_cycles(graph)
    assert not upward_imports(graph)
    assert folder_cycles(graph) == [["provision", "schemas"]]


def test_an_upward_import_is_caught_on_a_synthetic_graph():
    graph = {"kafka_ferry.state.progress": {"kafka_ferry.promotion.guard", "kafka_ferry.core.batches.progress"},
             "kafka_ferry.promotion.guard": set(), "kafka_ferry.core.batches.progress": set()}
    assert upward_imports(graph) == [
        "kafka_ferry.state.progress (state) imports kafka_ferry.promotion.guard (promotion)"]


def test_the_table_lists_only_what_exists():
    missing = [part for floor in FLOORS for part, _ in floor.parts
               if not (PACKAGE / part.removesuffix("/")).exists()]
    assert not missing, f"kafka_ferry.layers lists folders or modules that do not exist: {missing}"
    packages = [p for floor in FLOORS for p in floor.packages]
    assert len(packages) == len(set(packages)), "a folder is on two floors of kafka_ferry.layers"


def test_the_readme_picture_is_the_table():
    text = ARCHITECTURE.read_text()
    begin, end = "<!-- layers: begin -->\n```text\n", "```\n<!-- layers: end -->"
    assert begin in text and end in text, "docs/architecture.md lacks the layers markers around its picture"
    shown = text[text.index(begin) + len(begin): text.index(end)]
    assert shown == picture(), "docs/architecture.md's picture differs from kafka_ferry.layers: paste the output " \
                               "of `python -m kafka_ferry.layers` between its layers markers"


def module_paths() -> set[str]:
    """Every module of the package by its path under kafka_ferry/ (``__init__.py`` aside), read from the disk."""
    return {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}


def naming_problems(on_disk: set[str], named: tuple[str, ...]) -> list[str]:
    """What ``kafka_ferry.layers.MODULES`` gets wrong against the disk: a module it does not name, a name of a
    module that is gone, a name twice, a module outside every floor's folders."""
    parts = {part for floor in FLOORS for part, _ in floor.parts}
    problems = [f"{m}: not named in kafka_ferry.layers.MODULES (add it on its folder's line)"
                for m in sorted(on_disk - set(named))]
    problems += [f"{m}: named in kafka_ferry.layers.MODULES but no such module" for m in sorted(set(named) - on_disk)]
    problems += [f"{m}: named twice" for m in sorted({m for m in named if named.count(m) > 1})]
    problems += [f"{m}: in no folder or module of a floor" for m in sorted(set(named))
                 if (m.split("/")[0] + "/" if "/" in m else m) not in parts]
    return problems


def test_the_table_names_every_module():
    problems = naming_problems(module_paths(), MODULES)
    assert not problems, "kafka_ferry.layers.MODULES and the package differ:\n" + "\n".join(problems)


def test_a_module_left_out_of_the_table_is_caught():
    on_disk = module_paths() | {"copy/new_stage.py"}
    named = tuple(m for m in MODULES if m != "core/specs/spec.py") + ("state/gone.py", "copy/plan.py", "extra.py")
    assert naming_problems(on_disk, named) == [
        "copy/new_stage.py: not named in kafka_ferry.layers.MODULES (add it on its folder's line)",
        "core/specs/spec.py: not named in kafka_ferry.layers.MODULES (add it on its folder's line)",
        "extra.py: named in kafka_ferry.layers.MODULES but no such module",
        "state/gone.py: named in kafka_ferry.layers.MODULES but no such module",
        "copy/plan.py: named twice",
        "extra.py: in no folder or module of a floor",
    ]
