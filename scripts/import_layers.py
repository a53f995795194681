"""Print the import edges between the project's layers, by kind (ARCHITECTURE.md).

A layer is a subpackage (``syncengine.store``, ``relay.http``, ``wire.http_v1``)
or, for a module that sits directly in ``syncengine`` or ``relay``, that
module (``syncengine.crash``, ``syncengine.local_store``); the codec's own
modules (``wire.jcs``, ``wire.envelope`` …) are one layer, ``wire`` — the
same layers, by the same names, as ``LAYERS`` in ``tests/test_import_graph.py``.
Every ``import`` and ``from … import`` naming a project module is counted
once per imported name, as one of three kinds, because they bind differently:

* ``top`` — at module level: paid when the importing module loads;
* ``fn`` — inside a function body: paid when that function first runs (the
  lazy imports that keep command start-up small);
* ``tc`` — under ``if TYPE_CHECKING:``: never executed, read by mypy only.

``tests/test_import_graph.py`` forbids module cycles of all three kinds, and
any import that does not point down its ``LAYERS`` order; this script shows
the measured edges between layers, so the order and the architecture map can
be compared with the code: ``python scripts/import_layers.py`` prints
every edge between two layers; ``--package syncengine`` keeps the edges
leaving one package; ``--from syncengine.local_store --to syncengine.ops`` lists the
module edges (every kind) behind one layer edge.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("wire", "syncengine", "relay")
KINDS = ("top", "fn", "tc")


def module_files() -> dict[str, Path]:
    """Every module of the three packages, by dotted name."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = module_files()


def layer(module: str) -> str:
    """The layer a module belongs to (see the module docstring)."""
    parts = module.split(".")
    if len(parts) == 1 or (parts[0] == "wire" and parts[1] != "http_v1"):
        return parts[0]  # the codec's own modules read as one layer
    return ".".join(parts[:2])


def _nearest(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.AST, package: str) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _nearest(alias.name)
            if target is not None:
                yield target
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        for alias in node.names:
            target = _nearest(f"{source}.{alias.name}")
            if target is not None:
                yield target


def _walk(node: ast.AST, kind: str, package: str) -> Iterator[tuple[str, str]]:
    for child in ast.iter_child_nodes(node):
        child_kind = kind
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            child_kind = "fn"
        elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            child_kind = "tc"
        for target in _targets(child, package):
            yield target, child_kind
        yield from _walk(child, child_kind, package)


def edges() -> list[tuple[str, str, str]]:
    """(importer, imported, kind) for every project import, self-imports left out."""
    found: list[tuple[str, str, str]] = []
    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for target, kind in _walk(tree, "top", package):
            if target != module:
                found.append((module, target, kind))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", help="only edges leaving this package (e.g. syncengine)")
    parser.add_argument("--from", dest="source", help="with --to: the module edges behind it")
    parser.add_argument("--to", dest="target", help="with --from: the module edges behind it")
    args = parser.parse_args()
    found = edges()
    if args.source and args.target:
        for module, target, kind in sorted(set(found)):
            if layer(module) == args.source and layer(target) == args.target:
                print(f"{kind:3}  {module} -> {target}")
        return
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for module, target, kind in found:
        if layer(module) != layer(target):
            counts[(layer(module), layer(target))][kind] += 1
    print(f"{'from':26} {'to':26} " + " ".join(f"{k:>4}" for k in KINDS))
    for (source, target), kinds in sorted(counts.items()):
        if args.package and source.partition(".")[0] != args.package:
            continue
        print(f"{source:26} {target:26} " + " ".join(f"{kinds[k]:4}" for k in KINDS))


if __name__ == "__main__":
    main()
