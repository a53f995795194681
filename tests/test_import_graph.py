"""The project's import graph (issue #18, items 6 and 8): every package reads
top-down, and the three packages depend one way only.

The graph is built statically with :mod:`ast` from every ``import`` and
``from … import`` of a ``wire``, ``syncengine`` or ``relay`` module, wherever
it is written: at module level, inside a function, or under
``if TYPE_CHECKING:``. Lazy and type-only imports count because a reader (and
mypy) follows them just the same: a loop through a function body or an
annotation is still two modules that cannot be read one after the other.
``from package import name`` is an edge to the submodule ``package.name``
when there is one, else to the package. Imports by computed name
(``importlib.import_module``, as the CLI's command registry does) are not
edges: they are the late binding that keeps a package's top from importing
its leaves.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("wire", "syncengine", "relay")

#: Edges left out of the cycle check, each with the reason it still exists.
#: Each must still be in the graph (a test below), so a fixed one is removed.
KNOWN_LOOP_EDGES: dict[tuple[str, str], str] = {}

#: The one import between ``syncengine`` and ``relay``: ``syncengine relay …``
#: registers the relay's own command group. ``syncengine.cli.relay`` is a
#: composition root that only the CLI's command registry loads, by name, when
#: the ``relay`` command is invoked (or for the full ``--help``); no client
#: code reaches the relay through it.
CLIENT_TO_RELAY = ("syncengine.cli.relay", "relay.cli")


def _module_files() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _module_files()


def _nearest_module(name: str) -> str | None:
    """``name`` itself if it is a project module, else its nearest parent
    that is (``wire.profiles.seal`` → ``wire.profiles``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path) -> Iterator[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _nearest_module(alias.name)
                if target is not None:
                    yield target
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                target = _nearest_module(f"{source}.{alias.name}")
                if target is not None:
                    yield target


def _graph() -> dict[str, set[str]]:
    return {
        module: {target for target in _imported(module, path) if target != module}
        for module, path in MODULES.items()
    }


GRAPH = _graph()


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of two or more modules (iteratively: the graph
    is deeper than a comfortable recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def _a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One shortest loop through the component's first module, for the message."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no loop through {start} in {component}")  # pragma: no cover


def test_the_graph_sees_every_package_and_its_lazy_and_type_only_imports() -> None:
    # The checks below are only as good as the graph: it must hold all three
    # packages and edges written inside functions and under TYPE_CHECKING.
    assert {module.partition(".")[0] for module in GRAPH} == set(PACKAGES)
    assert "syncengine.cli.driver.sync_verbs" in GRAPH["syncengine.cli.driver.command"]  # in run_op
    assert "wire.profile_contract" in GRAPH["wire.none_profile"]  # only under TYPE_CHECKING


def test_no_two_modules_import_each_other_even_through_a_chain() -> None:
    graph = {
        module: {t for t in targets if (module, t) not in KNOWN_LOOP_EDGES}
        for module, targets in GRAPH.items()
    }
    loops = [" -> ".join(_a_cycle(graph, c)) for c in _strongly_connected(graph)]
    assert loops == [], "import cycles:\n  " + "\n  ".join(loops)


def test_every_known_loop_edge_still_exists_so_a_fixed_one_is_dropped_from_the_list() -> None:
    stale = [edge for edge in KNOWN_LOOP_EDGES if edge[1] not in GRAPH[edge[0]]]
    assert stale == []


def test_wire_imports_nothing_of_the_client_or_the_relay() -> None:
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module.partition(".")[0] == "wire"
        for target in targets
        if target.partition(".")[0] != "wire"
    )
    assert offenders == []


def test_client_and_relay_never_import_each_other_but_for_the_relay_command() -> None:
    crossings = sorted(
        (module, target)
        for module, targets in GRAPH.items()
        for target in targets
        if {module.partition(".")[0], target.partition(".")[0]} == {"syncengine", "relay"}
    )
    assert crossings == [CLIENT_TO_RELAY]
    # …and that edge stays behind the command registry: nothing imports the
    # composition root by a static import, so no client code loads the relay.
    importers = sorted(m for m, targets in GRAPH.items() if CLIENT_TO_RELAY[0] in targets)
    assert importers == []
