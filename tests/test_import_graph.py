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

Above the modules, the graph is read by *layer* (issue #36): a layer is a
subpackage (``syncengine.store``, ``relay.http``, ``wire.http_v1``) or a
module directly inside a package (``syncengine.ids``, ``relay.limits``); the
codec's own modules (``wire.jcs``, ``wire.envelope`` …) are one layer,
``wire``. :data:`LAYERS` is the one place the allowed order is written; every
import points down it, so no two layers (and in particular no two packages
such as ``store`` and ``ops``) can depend on each other.
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

#: The allowed order of layers, bottom first (ARCHITECTURE.md, "The layers,
#: enforced"). A module may import its own layer and any layer of an earlier
#: tier; two layers of one tier never import each other. A new layer must be
#: given its place here (a test below), which is the moment to decide it.
#: The relay's tiers sit below the client's only because the client's CLI
#: mounts the relay's command group (:data:`CLIENT_TO_RELAY`); no other
#: crossing between the two is allowed (the test further down).
LAYERS: tuple[tuple[str, ...], ...] = (
    # the codec: what both sides agree on byte for byte
    ("wire",),
    ("wire.http_v1",),
    # the relay
    (
        "relay",
        "relay.crash",
        "relay.errors",
        "relay.extras",
        "relay.limits",
        "relay.logformat",
        "relay.secrets",
    ),
    ("relay.config", "relay.openapi", "relay.storage"),
    ("relay.http", "relay.provisioning"),
    ("relay.server",),
    ("relay.workers",),
    ("relay.cli",),
    # the client
    (
        "syncengine._lazy",
        "syncengine._startup",
        "syncengine.crash",
        "syncengine.ids",
        "syncengine.private_files",
    ),
    ("syncengine",),  # the package itself: __version__ and the start-up hook
    ("syncengine.store",),  # the tables and the transactions over them
    ("syncengine.http", "syncengine.ops"),  # the relay client; the sync operations
    ("syncengine.local_store",),  # the Store facade: the door to store and ops
    ("syncengine.engine",),
    ("syncengine.cli",),
    ("syncengine.__main__", "syncengine.demo"),
)


def layer_of(module: str) -> str:
    """The layer holding ``module`` (see the module docstring)."""
    parts = module.split(".")
    if len(parts) == 1:
        return module
    if parts[0] == "wire" and parts[1] != "http_v1":
        return "wire"  # the codec's own modules read as one layer
    return ".".join(parts[:2])


def layer_violations(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import between two layers that does not point down ``layers``,
    as ``importer -> imported (layer A must not import layer B: …)``, plus
    every layer the order does not place."""
    tier = {name: rank for rank, names in enumerate(layers) for name in names}
    found: list[str] = []
    unplaced = sorted({layer_of(m) for m in graph} - set(tier))
    found.extend(f"{name} has no place in LAYERS" for name in unplaced)
    for module, targets in sorted(graph.items()):
        source = layer_of(module)
        for target in sorted(targets):
            imported = layer_of(target)
            if source == imported or source not in tier or imported not in tier:
                continue
            if tier[imported] > tier[source]:
                found.append(
                    f"{module} -> {target} ({source} must not import {imported}: above it)"
                )
            elif tier[imported] == tier[source]:
                found.append(
                    f"{module} -> {target} ({source} must not import {imported}: same tier)"
                )
    return found


def layer_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to layers (edges inside a layer dropped)."""
    layers: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = layer_of(module)
        layers.setdefault(source, set())
        for target in targets:
            layers.setdefault(layer_of(target), set())
            if layer_of(target) != source:
                layers[source].add(layer_of(target))
    return layers


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


def test_no_two_layers_import_each_other_even_through_a_chain() -> None:
    # Independent of LAYERS: a loop between packages (store -> ops -> store,
    # the one issue #36 removed) fails here even if the order were edited
    # to allow it.
    layers = layer_graph(GRAPH)
    loops = [" -> ".join(_a_cycle(layers, c)) for c in _strongly_connected(layers)]
    assert loops == [], "layer cycles:\n  " + "\n  ".join(loops)


def test_every_import_points_down_the_layer_order() -> None:
    violations = layer_violations(GRAPH, LAYERS)
    assert violations == [], "imports against LAYERS:\n  " + "\n  ".join(violations)


def test_every_layer_in_the_order_exists_so_a_removed_one_is_dropped() -> None:
    present = {layer_of(module) for module in GRAPH}
    listed = [name for names in LAYERS for name in names]
    assert sorted(set(listed) - present) == []
    assert len(listed) == len(set(listed)), "a layer is listed twice"


def test_the_store_facade_sits_above_both_store_and_ops() -> None:
    # The edge this order exists to keep out: nothing in store reaches ops,
    # not at module level, not in a function, not under TYPE_CHECKING.
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if layer_of(module) == "syncengine.store"
        for target in targets
        if layer_of(target) in {"syncengine.ops", "syncengine.local_store"}
    )
    assert upward == []
    assert "syncengine.ops.apply_pull" in GRAPH["syncengine.local_store"]


def test_the_layer_check_names_an_upward_edge() -> None:
    graph = {
        "syncengine.store.teams": {"syncengine.ops.adopt", "syncengine.ids"},
        "syncengine.ops.adopt": {"syncengine.store.teams"},
        "syncengine.ids": set(),
    }
    assert layer_violations(graph, LAYERS) == [
        "syncengine.store.teams -> syncengine.ops.adopt "
        "(syncengine.store must not import syncengine.ops: above it)"
    ]


def test_the_layer_check_names_an_edge_between_layers_of_one_tier() -> None:
    graph = {"syncengine.ops.adopt": {"syncengine.http.client"}, "syncengine.http.client": set()}
    assert layer_violations(graph, LAYERS) == [
        "syncengine.ops.adopt -> syncengine.http.client "
        "(syncengine.ops must not import syncengine.http: same tier)"
    ]


def test_the_layer_check_names_a_layer_the_order_does_not_place() -> None:
    graph = {"syncengine.newthing": {"syncengine.ids"}, "syncengine.ids": set()}
    assert layer_violations(graph, LAYERS) == ["syncengine.newthing has no place in LAYERS"]


def test_the_layer_cycle_check_names_a_loop_between_packages() -> None:
    graph = {
        "syncengine.store.store": {"syncengine.ops.apply_pull"},
        "syncengine.ops.apply_pull": {"syncengine.store.read_overlay"},
        "syncengine.store.read_overlay": set(),
    }
    layers = layer_graph(graph)
    loops = [" -> ".join(_a_cycle(layers, c)) for c in _strongly_connected(layers)]
    assert loops == ["syncengine.ops -> syncengine.store -> syncengine.ops"]
