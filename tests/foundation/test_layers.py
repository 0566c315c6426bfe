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


def imports(path: Path) -> set[str]:
    """Every module `path` imports, wherever the import statement stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # `from sgvla.x import module`
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
