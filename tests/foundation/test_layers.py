"""The architecture as import rules: every import in sgvla/ (at module level or inside a function) goes down the
layers, never up, never in a cycle, and sgvla/ never imports ROS.

    core (sgvla.core, sgvla.scene_graph)                    knows no robot, no simulator, no LeRobot
    services (policies, vlm, sim)                           policies, VLM clients, MuJoCo state extraction
    evaluation (eval)                                       plans, runner, results, reports
    embodiments (libero, so101)                             LIBERO's Panda; the SO101 arm and its twin
    node logic (nodegraph, launch)                          what the ROS nodes and launches run, ROS-free
    cli                                                     the `sgvla` command
"""

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from sgvla.paths import REPO_ROOT

SGVLA = REPO_ROOT / "sgvla"
LAYERS = [
    ("core", ("sgvla", "sgvla.core", "sgvla.scene_graph")),  # sgvla: the package root (paths, version)
    ("services", ("sgvla.policies", "sgvla.vlm", "sgvla.sim")),
    ("evaluation", ("sgvla.eval",)),
    ("embodiments", ("sgvla.libero", "sgvla.so101")),
    ("node logic", ("sgvla.nodegraph", "sgvla.launch", "sgvla.plugins")),
    ("cli", ("sgvla.cli",)),
]
# Within a layer, packages that must not know each other (embodiments are independent; the twin stands on the arm).
FORBIDDEN = [("sgvla.libero", "sgvla.so101"), ("sgvla.so101", "sgvla.libero"),
             ("sgvla.so101.hardware", "sgvla.so101.twin"), ("sgvla.scene_graph", "sgvla.core"),
             # Perception stands on the arm (calibration, kinematics) and knows no simulator; the twin wears its markers.
             ("sgvla.so101.perception", "sgvla.so101.twin"), ("sgvla.so101.hardware", "sgvla.so101.perception")]
ROS = ("rclpy", "sensor_msgs", "std_msgs", "geometry_msgs", "sgvla_interfaces", "sgvla_ros", "launch", "launch_ros")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[ast.AST]:
    """Import statements under ``if TYPE_CHECKING:``: read by type checkers, never executed."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            skipped.update(n for stmt in node.body for n in ast.walk(stmt))
    return skipped


def imports(path: Path) -> set[str]:
    """Every module `path` imports, wherever the import statement stands, relative imports resolved (those under
    ``if TYPE_CHECKING:`` never run and are left out)."""
    found = set()
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_only(tree)
    here = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # `from . import x`, `from ..y import z`: relative to this module's package
                base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                module = f"{base}.{module}" if module else base
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)  # `from sgvla.x import module`
    return found


def modules() -> dict[str, set[str]]:
    known = {module_name(p) for p in SGVLA.rglob("*.py")}
    graph = {}
    for path in SGVLA.rglob("*.py"):
        graph[module_name(path)] = {m for m in imports(path) if m in known} | {
            m for m in imports(path) if m.split(".")[0] in ROS}
    return graph


def layer_of(module: str) -> int:
    best, index = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), i
    assert index >= 0, f"{module} is in no layer; add its package to LAYERS"
    return index


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


GRAPH = modules()


def test_every_module_has_a_layer():
    for module in GRAPH:
        layer_of(module)


def test_imports_go_down_the_layers():
    upward = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})"
              for m, deps in GRAPH.items() for d in deps if d.startswith("sgvla") and layer_of(d) > layer_of(m)]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN)
def test_independent_packages_do_not_import_each_other(importer, imported):
    bad = [f"{m} imports {d}" for m, deps in GRAPH.items() if within(m, importer) for d in deps if within(d, imported)]
    assert not bad, "\n".join(bad)


def test_the_library_never_imports_ros():
    bad = [f"{m} imports {d}" for m, deps in GRAPH.items() for d in deps if d.split(".")[0] in ROS]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    """Between packages (the unit a reader holds in mind), lazy imports included."""
    def package(m: str) -> str:
        return m if (SGVLA.parent / m.replace(".", "/") / "__init__.py").exists() else m.rpartition(".")[0]

    edges = defaultdict(set)
    for m, deps in GRAPH.items():
        for d in deps:
            if d.startswith("sgvla") and package(d) != package(m) and not within(package(m), package(d)):
                edges[package(m)].add(package(d))
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not cycles, "\n".join(cycles)


def test_no_module_cycles():
    """Between modules too, lazy imports included: a function-level import that closes a cycle hides it from the
    reader and from import order, it does not remove it."""
    edges = {m: {d for d in deps if d in GRAPH and d != m} for m, deps in GRAPH.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            if component:
                cycles.append(sorted([node, *component]))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    assert not cycles, "modules that import each other, directly or around a loop:\n" + "\n".join(map(str, cycles))
