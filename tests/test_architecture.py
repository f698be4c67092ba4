"""The library's structure: no import loops, and every stage imports only the stages before it.

Read from the code's own imports (``ast``, including imports inside
functions), so a loop cannot hide behind a lazy import. The stages, in
pipeline order, are those of ARCHITECTURE.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib"
PACKAGE = LIB / "dlcluster"

#: Each stage and the stages it may import
#: (besides the shared top-level helpers ``paths``, ``atomic``, ``codeversion``, ``ordering``, ``parallel``).
ALLOWED = {
    "report": set(),
    "trace": set(),
    "sources": set(),
    "analysis": {"trace", "sources", "report"},
    "sim": {"trace", "sources"},
    "validation": {"trace", "sources", "sim", "analysis", "report"},
    "experiments": {"trace", "sources", "analysis", "sim", "validation", "report"},
}
SHARED = {"paths", "atomic", "codeversion", "ordering", "parallel", "__init__"}
ENTRY_POINTS = {"cli", "__main__"}   # may import every stage


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = importer.split(".")
        parts = parts if is_package else parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    if node.module is None:     # "from . import x": x may be a module
        return [f"{base}.{alias.name}" for alias in node.names]
    return [base]


def import_graph() -> dict[str, set[str]]:
    """Module -> the dlcluster modules it imports (a package counts as its __init__)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = resolve(name, path.name == "__init__.py", node)
            for target in targets:
                while target and target not in files:      # "pkg.mod.name" -> "pkg.mod"
                    target = target.rpartition(".")[0]
                if target.startswith("dlcluster") and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def stage_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    # dlcluster.sim.public_inputs imports the trace loader inside the function
    assert "dlcluster.trace" in graph["dlcluster.sim"]
    assert "dlcluster.report.reference" in graph["dlcluster.report.notebook"]


def test_cycle_finder_finds_a_planted_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_loop_between_modules():
    assert cycles(import_graph()) == []


def test_no_import_loop_between_stages():
    graph = import_graph()
    stages = {}
    for module, deps in graph.items():
        stages.setdefault(stage_of(module), set()).update(stage_of(d) for d in deps if stage_of(d) != stage_of(module))
    assert cycles(stages) == []


@pytest.mark.parametrize("stage", sorted(ALLOWED))
def test_each_stage_imports_only_earlier_stages(stage):
    graph = import_graph()
    wrong = sorted((module, dep) for module, deps in graph.items() if stage_of(module) == stage
                   for dep in deps
                   if stage_of(dep) not in ALLOWED[stage] | SHARED | {stage})
    assert wrong == []


def test_every_top_level_room_is_a_known_stage():
    rooms = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert rooms <= set(ALLOWED) | SHARED | ENTRY_POINTS, rooms - (set(ALLOWED) | SHARED | ENTRY_POINTS)
