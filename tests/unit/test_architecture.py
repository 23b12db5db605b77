"""The import structure docs/architecture.md describes: imports only point down the list
of layers, and the stream and batch jobs never import each other."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

# Lowest first: a package may import only from packages before it (and from itself).
LAYERS = [
    "jobs.errors",
    "jobs.spec",
    "jobs.runtime",
    "jobs.store",
    "jobs.kafka",
    "jobs.changelog",
    "jobs.plan",
    "jobs.point",
    "jobs.lookup",
    "jobs.spark_sql",
    "jobs.stream",
    "jobs.batch",
    "expectations",
    "jobs.rebuild",
    "jobs.pipeline",
    "jobs.cli",
    "operators_lib",
    "dags",
]
SIBLINGS = {("jobs.stream", "jobs.batch"), ("jobs.batch", "jobs.stream")}


def _package(module: str) -> str:
    return next(
        layer for layer in sorted(LAYERS, key=len, reverse=True) if module == layer or module.startswith(layer + ".")
    )


def _imports() -> set[tuple[str, str, str]]:
    """(importing package, imported package, file) for every import between two packages."""
    found = set()
    for top in ("jobs", "expectations", "operators_lib", "dags"):
        for path in (ROOT / top).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [node.module]
                    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                for name in names:
                    if name.split(".")[0] in ("jobs", "expectations", "operators_lib", "dags") and name != "jobs":
                        found.add((_package(module), _package(name), str(path.relative_to(ROOT))))
    return found


def test_imports_point_down_the_layers_only():
    upward = sorted(
        f"{file}: {importer} imports {imported}"
        for importer, imported, file in _imports()
        if LAYERS.index(imported) > LAYERS.index(importer)
    )
    assert upward == []


def test_the_stream_and_batch_jobs_do_not_import_each_other():
    crossing = sorted(file for importer, imported, file in _imports() if (importer, imported) in SIBLINGS)
    assert crossing == []
