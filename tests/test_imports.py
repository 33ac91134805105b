"""The package's import graph: no cycles between modules, and no layer importing a higher one.

Every ``import`` statement counts, function-level and ``TYPE_CHECKING`` ones included. A module
importing ``hoodie_ray.x.y`` depends on ``hoodie_ray.x.y`` (not on the packages above it, which
Python merely initialises on the way).
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import hoodie_ray

ROOT = Path(hoodie_ray.__file__).parent

#: Lower ranks may never import higher ones (same rank: allowed, cycles still refused).
LAYERS: dict[str, int] = {
    "exceptions": 0,
    "codes": 0,
    "jit": 0,
    "lru": 0,
    "threads": 0,
    "meta": 0,
    "storage": 0,
    "config": 1,
    "avro": 2,
    "keygen": 2,
    "index": 2,
    "merge": 2,
    "log_format": 3,
    "hfile": 3,
    "timeline": 4,
    "file_group": 5,
    "metadata": 6,  # the metadata table's reading side: the table handle lists files through it
    "table": 7,
    "reader": 8,
    "metadata_writer": 9,  # the metadata table's writing side: it opens the table handle
    "write": 10,
    "compaction": 11,
    "job": 12,
    "ray": 13,
    "spark": 14,  # Spark interop sits on the Ray layer (RayDP): ray never imports it
    "api": 14,
    "upgrade_table": 14,
    "cli": 14,
    "": 15,  # hoodie_ray/__init__.py: the public surface
    "__main__": 15,  # python -m hoodie_ray: the CLI
}


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


@functools.cache  # suite time: both tests check the one graph (the parse is ~1 s of CI each)
def _graph() -> dict[str, set[str]]:
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    if path.name != "__init__.py":
                        base = base[:-1]
                    base = base[: len(base) - node.level + 1]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                names = [
                    f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names
                ]
            for n in names:
                target = resolve(n) if n.startswith("hoodie_ray") else None
                if target and target != mod:
                    graph[mod].add(target)
    return graph


def _layer(mod: str) -> int:
    parts = mod.split(".")
    top = parts[1] if len(parts) > 1 else ""
    assert top in LAYERS, f"module {mod} is in no layer: add {top!r} to LAYERS"
    return LAYERS[top]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_no_layer_imports_a_higher_one() -> None:
    broken = [
        f"{a} ({_layer(a)}) imports {b} ({_layer(b)})"
        for a, bs in sorted(_graph().items())
        for b in sorted(bs)
        if _layer(b) > _layer(a)
    ]
    assert broken == []


def test_the_checker_sees_a_cycle_and_a_broken_rule() -> None:
    graph = {"hoodie_ray.write.a": {"hoodie_ray.job.b"}, "hoodie_ray.job.b": {"hoodie_ray.write.a"}}
    assert _cycles(graph) == [["hoodie_ray.job.b", "hoodie_ray.write.a"]]
    assert _layer("hoodie_ray.write.a") < _layer("hoodie_ray.job.b")


def test_the_metadata_table_is_split_by_direction() -> None:
    # the handle lists files through the MDT reader; the MDT writer opens tables through it
    assert _layer("hoodie_ray.metadata.reader") < _layer("hoodie_ray.table")
    assert _layer("hoodie_ray.table") < _layer("hoodie_ray.metadata_writer.writer")
    assert _layer("hoodie_ray.reader.query") < _layer("hoodie_ray.metadata_writer.writer")
    assert _layer("hoodie_ray.metadata_writer.writer") < _layer("hoodie_ray.write.commit")
