"""Shared fixtures: the Java-written tables of ../shared/tables and the hudi-rs oracle.

The zips are read in place from ../shared/tables and unpacked into a per-test temporary
directory; tests that need them skip with a clear reason when ../shared is absent (a user's
fresh clone has no ../shared).
"""

from __future__ import annotations

import compileall
import os
import py_compile
import re
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest


def _compile_bytecode() -> None:
    """Write the bytecode of the project's modules once, before any process imports them.

    Every Ray worker (each actor, each task worker) imports hoodie_ray afresh; where the
    environment sets ``PYTHONDONTWRITEBYTECODE`` (CI's does) no import ever writes the
    bytecode of an editable install, so each process compiled every module again: ~0.4 s of
    CPU an actor. Compiled here they are read; an up-to-date file is skipped (~15 ms).
    """
    if not sys.flags.dont_write_bytecode:
        return  # imports write it themselves
    root = Path(__file__).resolve().parents[1]
    for package in ("hoodie_ray", "tests", "benchmarks"):
        # timestamp-checked files (SOURCE_DATE_EPOCH would make compileall write hash-checked
        # ones and redo them every session); quiet=2: a read-only checkout stays silent
        compileall.compile_dir(
            str(root / package),
            quiet=2,
            invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
        )


_compile_bytecode()

pytest_plugins = ["tests.fixtures_ray"]

# The shared helper modules assert for the tests that call them: pytest explains their failures.
pytest.register_assert_rewrite("tests.write.model")

SHARED_TABLES = Path(
    os.environ.get(
        "HOODIE_RAY_SHARED_TABLES", Path(__file__).resolve().parents[1] / ".." / "shared" / "tables"
    )
).resolve()

SAMPLE_TABLES = (
    sorted(p.stem for p in SHARED_TABLES.glob("*.zip")) if SHARED_TABLES.is_dir() else []
)

# A placeholder id keeps parametrized tests collectable (and skipped) without ../shared.
SAMPLE_TABLE_PARAMS = SAMPLE_TABLES or ["<no ../shared/tables>"]


def extract_sample_table(name: str, dest: Path) -> Path:
    """Unpack ``../shared/tables/<name>.zip`` under ``dest``; return the table root."""
    zpath = SHARED_TABLES / f"{name}.zip"
    if not zpath.is_file():
        pytest.skip(f"../shared/tables/{name}.zip is absent (a fresh clone has no ../shared)")
    with zipfile.ZipFile(zpath) as z:
        members = [
            m for m in z.namelist() if not m.startswith("__MACOSX/") and not m.endswith(".DS_Store")
        ]
        z.extractall(dest, members)
    roots = sorted(
        p.parent.parent
        for p in dest.rglob("hoodie.properties")
        if p.parent.name == ".hoodie"
        and "metadata" not in p.parent.parent.parts[-1:]
        and ".hoodie" not in p.parent.parent.parts
    )
    assert roots, f"no table root in {zpath}"
    return roots[0]


@pytest.fixture
def sample_table(tmp_path: Path):
    """Factory fixture: ``sample_table("trips_mor_avro_v6_trips_8i1u")`` -> table root path."""

    def _make(name: str) -> Path:
        if not SAMPLE_TABLES:
            pytest.skip("../shared/tables is absent (a fresh clone has no ../shared)")
        return extract_sample_table(name, tmp_path / name)

    return _make


@pytest.fixture(scope="session")
def shared_sample(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Read-only sample tables, unpacked once per session: ``shared_sample(name) -> root``."""
    cache: dict[str, Path] = {}

    def _get(name: str) -> Path:
        if not SAMPLE_TABLES:
            pytest.skip("../shared/tables is absent (a fresh clone has no ../shared)")
        if name not in cache:
            cache[name] = extract_sample_table(name, tmp_path_factory.mktemp(name))
        return cache[name]

    return _get


@pytest.fixture(autouse=True)
def _no_warm_topology_between_tests():
    """A topology hr.write keeps warm holds its actors' CPUs and its table's lock: tests start
    without one (the warm-writer tests check the warm behaviour itself)."""
    yield
    stream = sys.modules.get("hoodie_ray.ray.stream")
    if stream is not None:
        stream.release_warm_writers()


def hudi_rs_read(path: str | Path, **read_options: str) -> pa.Table:
    """Read a table with hudi-rs (the oracle): snapshot by default.

    ``read_options`` are hudi read configs, e.g. ``{"hoodie.read.as.of.timestamp": "..."}``.
    """
    from hudi import HudiReadOptions, HudiTable

    t = HudiTable(str(path))
    opts = HudiReadOptions(hudi_options=dict(read_options)) if read_options else None
    batches = t.read(opts) if opts is not None else t.read()
    if not batches:
        return t.get_schema_with_meta_fields().empty_table()
    return pa.Table.from_batches(batches)


def sort_by_key(table: pa.Table, key: str = "_hoodie_record_key") -> pa.Table:
    return table.sort_by([(key, "ascending")])


_RAY_LOG_LINE = re.compile(r"^(\x1b\[[0-9;]*m)?\((raylet|[\w.-]*\s*pid=)")


def without_ray_log_lines(text: str) -> str:
    """``text`` less the lines Ray's log monitor forwards to the driver's stderr.

    The raylet's own warnings (a disk over 95% full, say) reach whatever test captures
    stderr at that moment; what a command printed is what is left.
    """
    return "".join(line for line in text.splitlines(keepends=True) if not _RAY_LOG_LINE.match(line))
