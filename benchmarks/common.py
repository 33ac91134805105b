"""Shared pieces of the benchmarks: workloads, CPU accounting, the correctness gate, reporting.

Everything here is engine-free except :class:`CpuMeter`, which can also watch the worker
processes of a local Ray node (found through psutil, never through Ray's own APIs).

Data generation is vectorised (numpy and pyarrow compute, no Python loop per row) and fully
determined by the seed, so every baseline and every hoodie_ray run of one benchmark sees the
very same rows in the very same commits.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import json
import math
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.compute as pc

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------

#: The variants of mor-q1 (``--variant``); ``scale`` is made commit by commit
#: (:class:`ScaleWorkload`), the others at once (:func:`generate_workload`).
VARIANTS = ("base", "partitioned", "zipf", "s20", "append", "scale")

#: Full-size key space and record count of mor-q1 (2M keys, 6M records in 12 commits).
FULL_KEYS = 2_000_000
FULL_COMMITS = 12
#: ``--quick`` sizes (200K keys, 600K records in 6 commits).
QUICK_KEYS = 200_000
QUICK_COMMITS = 6
#: Zipf variant: commits after the bulk load, their size relative to K, update share, exponent.
ZIPF_COMMITS = 8
ZIPF_BATCH_PER_KEY = 0.25  # 500K per commit at K = 2M
ZIPF_UPDATE_SHARE = 0.25
ZIPF_EXPONENT = 1.1
#: Partitioned variant: ``p = key % PARTITIONS``.
PARTITIONS = 16
#: ``name`` column of shape q1: ``"item_" + str(key % NAME_MODULUS)``.
NAME_MODULUS = 1_000_003
#: First ``ts`` value (an epoch-millisecond-like number; ``ts`` increases by one per record).
TS_BASE = 1_700_000_000_000
#: s20 shape: number of string columns and their width in hex characters.
S20_COLUMNS = 20
S20_WIDTH = 10

_INT64_MIN = np.iinfo(np.int64).min
_INT64_MAX = np.iinfo(np.int64).max
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


@dataclass(frozen=True)
class Workload:
    """The rows of one benchmark run, already cut into commits.

    Attributes:
        variant: one of :data:`VARIANTS`.
        shape: row shape name (``q1`` or ``s20``).
        num_keys: distinct record keys in the whole input (K).
        commits: one Arrow table per commit, in commit order; ``ts`` increases across them.
        key_field: record key column.
        precombine_field: ordering column (the largest value wins a key).
        partition_field: partition column, or None for a non-partitioned table.
        operation: Hudi write operation the workload calls for (``upsert`` or ``insert``).
        description: one line saying how the rows were made.
    """

    variant: str
    shape: str
    num_keys: int
    commits: tuple[pa.Table, ...]
    key_field: str = "key"
    precombine_field: str = "ts"
    partition_field: str | None = None
    operation: str = "upsert"
    description: str = ""

    @property
    def num_rows(self) -> int:
        """Records in all commits (N)."""
        return sum(c.num_rows for c in self.commits)

    @property
    def arrow_bytes(self) -> int:
        """Arrow bytes of all commits (the denominator of write amplification)."""
        return sum(c.nbytes for c in self.commits)

    @property
    def bytes_per_row(self) -> float:
        """Arrow bytes per record."""
        return self.arrow_bytes / max(self.num_rows, 1)

    @property
    def schema(self) -> pa.Schema:
        """Schema shared by every commit."""
        return self.commits[0].schema

    def summary(self) -> dict[str, Any]:
        """Shape and size figures, as they go into the report."""
        return {
            "variant": self.variant,
            "shape": self.shape,
            "columns": len(self.schema),
            "bytes_per_row": round(self.bytes_per_row, 1),
            "K": self.num_keys,
            "N": self.num_rows,
            "commits": len(self.commits),
            "rows_per_commit": [c.num_rows for c in self.commits],
            "partition_field": self.partition_field,
            "operation": self.operation,
            "description": self.description,
        }


def workload_sizes(variant: str, *, quick: bool, scale: float = 1.0) -> tuple[int, int]:
    """Key space K and commit count of ``variant`` (before the bulk load of ``zipf``).

    ``scale`` shrinks (or grows) K; it exists for development on small machines and for tests.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    if variant == "scale":
        raise ValueError("the scale variant is made commit by commit: see ScaleWorkload")
    keys = QUICK_KEYS if quick else FULL_KEYS
    commits = QUICK_COMMITS if quick else FULL_COMMITS
    if variant == "zipf":
        commits = ZIPF_COMMITS
    return max(round(keys * scale), 3 * commits), commits


def generate_workload(
    variant: str = "base",
    *,
    quick: bool = False,
    scale: float = 1.0,
    seed: int = 20240601,
    num_keys: int | None = None,
    num_commits: int | None = None,
) -> Workload:
    """Make the rows of one mor-q1 variant (see ``../shared/bench/mor-q1.md``).

    - ``base``: q1 shape; every one of K keys appears exactly 3 times, shuffled over N = 3K
      records, so 1/3 of the records are inserts and 2/3 updates; N is cut into equal commits.
    - ``partitioned``: ``base`` plus ``p = key % 16`` as the partition column.
    - ``zipf``: a bulk load of K inserts, then 8 commits of K/4 records each, 25% of them
      updates of existing keys drawn from Zipf(1.1) over the keys written so far (hot keys are
      a fixed random subset of the bulk load), 75% inserts of new keys.
    - ``s20``: ``base``'s keys and commits, but the row is ``key``, ``ts`` and 20 strings of 10
      hex characters (the Paimon micro-benchmark shape; ``ts`` is kept as the precombine field,
      which the correctness gate needs).
    - ``append``: N distinct keys, inserts only (Hudi operation ``insert``).

    Args:
        variant: one of :data:`VARIANTS`.
        quick: the ``--quick`` sizes (K = 200K) instead of the full ones (K = 2M).
        scale: multiplies K (development and tests).
        seed: numpy seed; the same seed gives the same rows.
        num_keys: overrides K.
        num_commits: overrides the commit count (after the bulk load for ``zipf``).
    """
    keys_k, commits_c = workload_sizes(variant, quick=quick, scale=scale)
    if num_keys is not None:
        keys_k = num_keys
    if num_commits is not None:
        commits_c = num_commits
    if keys_k < 1 or commits_c < 1:
        raise ValueError("num_keys and num_commits must be positive")
    rng = np.random.default_rng(seed)

    if variant == "zipf":
        key_chunks = _zipf_keys(rng, keys_k, commits_c)
        # Distinct keys: the bulk load plus every inserted key (updates hit existing keys only).
        total_keys = int(np.unique(np.concatenate(key_chunks)).size)
        desc = (
            f"bulk load of {keys_k} keys, then {commits_c} commits of "
            f"{len(key_chunks[1]) if len(key_chunks) > 1 else 0} records, "
            f"{ZIPF_UPDATE_SHARE:.0%} updates Zipf({ZIPF_EXPONENT}) over existing keys"
        )
    elif variant == "append":
        n = 3 * keys_k
        all_keys = rng.permutation(n).astype(np.int64)
        key_chunks = np.array_split(all_keys, commits_c)
        total_keys = n
        desc = f"{n} distinct keys, inserts only, {commits_c} commits"
    else:
        all_keys = rng.permutation(np.repeat(np.arange(keys_k, dtype=np.int64), 3))
        key_chunks = np.array_split(all_keys, commits_c)
        total_keys = keys_k
        desc = f"{keys_k} keys x 3 occurrences shuffled (1/3 inserts, 2/3 updates), {commits_c} commits"

    tables: list[pa.Table] = []
    ts_next = TS_BASE
    for chunk in key_chunks:
        ts = np.arange(ts_next, ts_next + len(chunk), dtype=np.int64)
        ts_next += len(chunk)
        if variant == "s20":
            t = make_s20_table(chunk, ts, rng)
        else:
            t = make_q1_table(chunk, ts, rng)
        if variant == "partitioned":
            t = t.append_column("p", pa.array(chunk % PARTITIONS, type=pa.int64()))
        tables.append(t)

    return Workload(
        variant=variant,
        shape="s20" if variant == "s20" else "q1",
        num_keys=total_keys,
        commits=tuple(tables),
        partition_field="p" if variant == "partitioned" else None,
        operation="insert" if variant == "append" else "upsert",
        description=desc,
    )


def _truncated_zipf(rng: np.random.Generator, a: float, size: int, upper: int) -> np.ndarray:
    """Zipf(a) ranks in ``1..upper`` (values above ``upper`` are drawn again)."""
    ranks = rng.zipf(a, size=size)
    bad = ranks > upper
    while bad.any():
        ranks[bad] = rng.zipf(a, size=int(bad.sum()))
        bad = ranks > upper
    return ranks.astype(np.int64)


def _zipf_keys(rng: np.random.Generator, bulk: int, commits: int) -> list[np.ndarray]:
    """Keys of the zipf variant: the bulk load, then ``commits`` mixed insert/update commits."""
    batch = max(round(bulk * ZIPF_BATCH_PER_KEY), 4)
    n_upd = round(batch * ZIPF_UPDATE_SHARE)
    n_ins = batch - n_upd
    hot_order = rng.permutation(bulk).astype(np.int64)  # rank 1 = hottest existing key
    chunks = [hot_order.copy()]
    next_key = bulk
    for _ in range(commits):
        ranks = _truncated_zipf(rng, ZIPF_EXPONENT, n_upd, len(hot_order))
        updates = hot_order[ranks - 1]
        inserts = np.arange(next_key, next_key + n_ins, dtype=np.int64)
        next_key += n_ins
        chunks.append(rng.permutation(np.concatenate([updates, inserts])))
        hot_order = np.concatenate([hot_order, inserts])  # new keys start cold
    return chunks


def make_q1_table(keys: np.ndarray, ts: np.ndarray, rng: np.random.Generator) -> pa.Table:
    """Rows of shape q1: ``key``, ``ts``, ``name`` and ``c0``..``c9`` (random int64)."""
    names = pc.binary_join_element_wise(
        pa.scalar("item_"), pc.cast(pa.array(keys % NAME_MODULUS), pa.string()), pa.scalar("")
    )
    cols: dict[str, Any] = {
        "key": pa.array(keys, type=pa.int64()),
        "ts": pa.array(ts, type=pa.int64()),
        "name": names,
    }
    for i in range(10):
        cols[f"c{i}"] = pa.array(
            rng.integers(_INT64_MIN, _INT64_MAX, size=len(keys), dtype=np.int64, endpoint=True)
        )
    return pa.table(cols)


def hex_strings(rng: np.random.Generator, n: int, width: int = S20_WIDTH) -> pa.Array:
    """``n`` random strings of ``width`` lowercase hex characters, built from raw buffers."""
    data = _HEX[rng.integers(0, 16, size=n * width, dtype=np.uint8)]
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())]
    )


def make_s20_table(keys: np.ndarray, ts: np.ndarray, rng: np.random.Generator) -> pa.Table:
    """Rows of shape s20: ``key``, ``ts`` and ``s0``..``s19`` (10 hex characters each)."""
    cols: dict[str, Any] = {
        "key": pa.array(keys, type=pa.int64()),
        "ts": pa.array(ts, type=pa.int64()),
    }
    for i in range(S20_COLUMNS):
        cols[f"s{i}"] = hex_strings(rng, len(keys))
    return pa.table(cols)


def lww_dedup(table: pa.Table, key: str = "key", order: str | None = "ts") -> pa.Table:
    """Last writer wins: one row per ``key``, the one with the largest ``order``, sorted by key.

    Without ``order`` the last row of each key in table order wins.
    """
    if table.num_rows == 0:
        return table
    if order is None:
        table = table.append_column("__pos", pa.array(np.arange(table.num_rows)))
        order = "__pos"
    idx = pc.sort_indices(table, sort_keys=[(key, "ascending"), (order, "descending")])
    sorted_keys = pc.take(table[key], idx).to_numpy()
    first = np.ones(len(sorted_keys), dtype=bool)
    first[1:] = sorted_keys[1:] != sorted_keys[:-1]
    out = table.take(pc.filter(idx, pa.array(first)))
    if "__pos" in out.column_names:
        out = out.drop_columns(["__pos"])
    return out


def expected_snapshot(workload: Workload) -> pa.Table:
    """The table after all commits: last-writer-wins dedup of every record by (key, max ts)."""
    return lww_dedup(
        pa.concat_tables(workload.commits), workload.key_field, workload.precombine_field
    )


def split_rows(table: pa.Table, parts: int, by: str | None = None) -> list[pa.Table]:
    """Cut ``table`` into ``parts`` contiguous slices, or into one table per value of ``by``."""
    if by is not None:
        values = table[by].to_numpy()
        order = np.argsort(values, kind="stable")
        sorted_vals = values[order]
        bounds = np.flatnonzero(np.diff(sorted_vals)) + 1
        return [table.take(pa.array(ix)) for ix in np.split(order, bounds) if len(ix)]
    parts = max(1, min(parts, table.num_rows or 1))
    edges = np.linspace(0, table.num_rows, parts + 1).astype(int)
    return [table.slice(a, b - a) for a, b in itertools.pairwise(edges) if b > a]


def iter_batches(table: pa.Table, max_rows: int) -> Iterator[pa.Table]:
    """Zero-copy slices of at most ``max_rows`` rows."""
    for off in range(0, table.num_rows, max_rows):
        yield table.slice(off, max_rows)


def avro_schema_for(schema: pa.Schema, name: str = "q1_record") -> dict[str, Any]:
    """An Avro record schema for the flat int64/string schemas of the workloads.

    A nullable Arrow field becomes ``["null", T]`` with default null, as Hudi's schema
    converter writes it (so the Avro floor encodes what a Hudi Avro log block must: the union
    branch index costs fastavro about half its speed next to a plain ``T``).
    """
    types = {pa.int64(): "long", pa.int32(): "int", pa.string(): "string", pa.float64(): "double"}
    fields: list[dict[str, Any]] = []
    for f in schema:
        if f.type not in types:
            raise TypeError(f"no Avro type for column {f.name}: {f.type}")
        if f.nullable:
            fields.append({"name": f.name, "type": ["null", types[f.type]], "default": None})
        else:
            fields.append({"name": f.name, "type": types[f.type]})
    return {"type": "record", "name": name, "fields": fields}


# ---------------------------------------------------------------------------------------------
# The scale variant: commits made one at a time
# ---------------------------------------------------------------------------------------------

#: Scale variant (issue 23), full size: a bulk load of 20M keys, then 8 upsert commits of 1M
#: records each, compared with the same commits on a 2M-key table. ``--quick``: a tenth of
#: each; ``--scale`` multiplies all three.
SCALE_KEYS = 20_000_000
SCALE_REFERENCE_KEYS = 2_000_000
SCALE_UPSERT_ROWS = 1_000_000
SCALE_COMMITS = 8
SCALE_QUICK_FACTOR = 0.1
#: Share of an upsert commit's records that update an existing key (the rest insert new keys).
SCALE_UPDATE_SHARE = 2 / 3
#: Bulk-load rows made (and held) at a time.
SCALE_CHUNK_ROWS = 1_000_000


def add_option_argument(parser: Any, help_text: str) -> None:
    """A repeatable ``--option K=V`` (:func:`parse_option`) on a benchmark's ``parser``:
    ``args.option`` the ``(K, V)`` pairs in order."""
    parser.add_argument(
        "--option",
        action="append",
        type=parse_option,
        default=[],
        metavar="K=V",
        help=help_text,
    )


def parse_option(text: str) -> tuple[str, str]:
    """``K=V`` of a ``--option`` argument as ``(K, V)`` (argparse ``type``; the value may hold
    ``=``)."""
    import argparse

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected k=v, got {text!r}")
    return key.strip(), value.strip()


def scale_sizes(*, quick: bool, scale: float = 1.0) -> tuple[int, int, int]:
    """``(bulk keys, bulk keys of the reference table, records per upsert commit)``."""
    f = scale * (SCALE_QUICK_FACTOR if quick else 1.0)
    return (
        max(round(SCALE_KEYS * f), 30),
        max(round(SCALE_REFERENCE_KEYS * f), 3),
        max(round(SCALE_UPSERT_ROWS * f), 3),
    )


@dataclass(frozen=True)
class ScaleWorkload:
    """The scale variant's rows (shape q1), each commit made from the seed when asked for.

    - Bulk load: keys ``0 .. bulk_keys - 1``, made ``chunk_rows`` at a time (each chunk a
      shuffled run of consecutive keys), so it is never held whole unless a caller joins it.
    - Upsert commit ``j`` (0-based): ``upsert_rows`` records in random order,
      ``round(upsert_rows * 2/3)`` of them updates of distinct keys drawn uniformly from every
      key written before the commit, the rest inserts of the next unused keys.
    - ``ts`` grows by one per record over the bulk load and then the commits, so a key's last
      record is the one that must win.

    Every chunk and commit has its own random stream (seeded by ``(seed, kind, number)``), so
    the same sizes and seed give the same rows whichever commits are made, in any order.
    """

    bulk_keys: int
    upsert_rows: int
    num_upserts: int = SCALE_COMMITS
    seed: int = 20240601
    chunk_rows: int = SCALE_CHUNK_ROWS
    key_field: str = "key"
    precombine_field: str = "ts"

    @property
    def schema(self) -> pa.Schema:
        """The q1 schema of every commit."""
        empty = np.zeros(0, dtype=np.int64)
        return make_q1_table(empty, empty, np.random.default_rng(0)).schema

    @staticmethod
    def updates_in(rows: int) -> int:
        """Updates among ``rows`` records of an upsert commit."""
        return round(rows * SCALE_UPDATE_SHARE)

    def keys_before(self, j: int) -> int:
        """Keys written before upsert commit ``j`` (``j = num_upserts``: after all of them)."""
        return self.bulk_keys + j * (self.upsert_rows - self.updates_in(self.upsert_rows))

    @property
    def num_keys(self) -> int:
        """Distinct keys after the bulk load and every upsert commit."""
        return self.keys_before(self.num_upserts)

    @property
    def upsert_records(self) -> int:
        """Records in all upsert commits."""
        return self.num_upserts * self.upsert_rows

    @property
    def num_chunks(self) -> int:
        """Chunks of the bulk load."""
        return -(-self.bulk_keys // self.chunk_rows)

    def bulk_chunk(self, i: int) -> pa.Table:
        """Chunk ``i`` of the bulk load."""
        start = i * self.chunk_rows
        stop = min(start + self.chunk_rows, self.bulk_keys)
        rng = np.random.default_rng([self.seed, 0, i])
        keys = rng.permutation(np.arange(start, stop, dtype=np.int64))
        ts = np.arange(TS_BASE + start, TS_BASE + stop, dtype=np.int64)
        return make_q1_table(keys, ts, rng)

    def bulk(self) -> Iterator[pa.Table]:
        """The bulk load, chunk by chunk."""
        for i in range(self.num_chunks):
            yield self.bulk_chunk(i)

    def upsert(self, j: int, rows: int | None = None) -> pa.Table:
        """Upsert commit ``j``; ``rows`` makes one of another size with the same mix, e.g. a
        check commit after the last one (``j = num_upserts``)."""
        n = self.upsert_rows if rows is None else rows
        rng = np.random.default_rng([self.seed, 1, j])
        existing = self.keys_before(j)
        n_upd = min(self.updates_in(n), existing)
        updates = rng.choice(existing, size=n_upd, replace=False).astype(np.int64)
        inserts = np.arange(existing, existing + n - n_upd, dtype=np.int64)
        keys = rng.permutation(np.concatenate([updates, inserts]))
        ts0 = TS_BASE + self.bulk_keys + j * self.upsert_rows
        return make_q1_table(keys, np.arange(ts0, ts0 + n, dtype=np.int64), rng)

    @property
    def description(self) -> str:
        n_upd = self.updates_in(self.upsert_rows)
        return (
            f"bulk load of {self.bulk_keys} keys, then {self.num_upserts} upsert commits of "
            f"{self.upsert_rows} records ({n_upd} updates uniform over the existing keys, "
            f"{self.upsert_rows - n_upd} inserts), made per commit"
        )

    def as_workload(self) -> Workload:
        """The bulk load (as one commit) and the upsert commits as a :class:`Workload`, for
        code that takes one (the peers). Its commits are made when indexed and only the last
        one made is kept; ``num_rows`` and ``schema`` make none."""
        commits = LazyCommits(1 + self.num_upserts, self._commit)
        return _LazyWorkload(
            variant="scale",
            shape="q1",
            num_keys=self.num_keys,
            commits=cast("tuple[pa.Table, ...]", commits),
            description=self.description,
            rows=self.bulk_keys + self.upsert_records,
            lazy_schema=self.schema,
        )

    def _commit(self, i: int) -> pa.Table:
        if i == 0:
            return pa.concat_tables(list(self.bulk()))
        return self.upsert(i - 1)


class LazyCommits:
    """``count`` tables made by ``make(i)`` when indexed; the last one made is kept (indexing
    it again, or iterating from it, makes nothing twice)."""

    def __init__(self, count: int, make: Callable[[int], pa.Table]) -> None:
        self._count = count
        self._make = make
        self._last: tuple[int, pa.Table] | None = None

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> pa.Table:
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(i)
        if self._last is None or self._last[0] != i:
            self._last = None  # the previous one goes before the next is made
            self._last = (i, self._make(i))
        return self._last[1]

    def __iter__(self) -> Iterator[pa.Table]:
        for i in range(self._count):
            yield self[i]


@dataclass(frozen=True)
class _LazyWorkload(Workload):
    """A :class:`Workload` over :class:`LazyCommits`: row count and schema given, not made."""

    rows: int = 0
    lazy_schema: pa.Schema | None = None

    @property
    def num_rows(self) -> int:
        return self.rows

    @property
    def schema(self) -> pa.Schema:
        return self.lazy_schema if self.lazy_schema is not None else self.commits[0].schema


# ---------------------------------------------------------------------------------------------
# CPU accounting
# ---------------------------------------------------------------------------------------------

_RAY_AGENT_TITLES = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def is_ray_worker_cmdline(cmdline: Sequence[str]) -> bool:
    """True for a Ray worker process (task or actor), false for raylet, GCS and agents.

    A Python worker starts as ``python .../default_worker.py ...`` and renames itself
    (setproctitle) to ``ray::IDLE``, ``ray::<ActorClass>`` or ``ray::<task or method>``; a Java
    worker runs ``io.ray.runtime.runner.worker.DefaultWorker``.
    """
    if not cmdline:
        return False
    first = cmdline[0].strip()
    if first.startswith("ray::"):
        return not first.startswith(_RAY_AGENT_TITLES)
    # Python workers before they rename themselves; Java workers (RayDP) keep their command.
    return any(
        arg.endswith(("default_worker.py", "io.ray.runtime.runner.worker.DefaultWorker"))
        for arg in cmdline
    )


def find_local_raylets() -> list[psutil.Process]:
    """The raylet processes of this driver's Ray node.

    First the raylets started by this process (``ray.init()`` without an address makes the
    driver their ancestor); else the raylets whose command line names this driver's session;
    else every raylet on the machine.
    """
    me = psutil.Process()
    try:
        mine = [p for p in me.children(recursive=True) if p.name() == "raylet"]
    except psutil.Error:
        mine = []
    if mine:
        return mine
    session = _ray_session_name()
    raylets = []
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info.get("name") == "raylet":
            raylets.append(p)
    if session:
        named = [p for p in raylets if any(session in a for a in (p.info.get("cmdline") or []))]
        if named:
            return named
    return raylets


def _ray_session_name() -> str | None:
    try:
        import ray

        node = getattr(ray._private.worker.global_worker, "node", None)
        return getattr(node, "session_name", None)
    except Exception:
        return None


def _peak_rss_bytes(pid: int) -> int | None:
    """Lifetime peak resident set (``VmHWM``) of a process on Linux, else None."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass
class ProcessUsage:
    """CPU and memory of one watched process over a measured section."""

    pid: int
    title: str
    cpu_start_s: float
    cpu_last_s: float
    peak_rss_bytes: int = 0
    exited: bool = False
    sys_start_s: float = 0.0
    sys_last_s: float = 0.0
    faults_start: int = 0
    faults_last: int = 0

    @property
    def minor_faults(self) -> int:
        """Minor page faults inside the section (first touches of memory the process was
        handed: what this VM charges most for, RESULTS twenty-sixth session; 0 off Linux)."""
        return max(self.faults_last - self.faults_start, 0)

    @property
    def cpu_s(self) -> float:
        """CPU seconds (user + system) spent inside the section."""
        return max(self.cpu_last_s - self.cpu_start_s, 0.0)

    @property
    def system_cpu_s(self) -> float:
        """The kernel's part of :attr:`cpu_s`."""
        return min(max(self.sys_last_s - self.sys_start_s, 0.0), self.cpu_s)

    @property
    def peak_rss_mb(self) -> float:
        """Peak RSS in MiB (lifetime peak where the OS gives it, else the largest sample)."""
        return self.peak_rss_bytes / 2**20


@dataclass(frozen=True)
class CpuUsage:
    """Wall and CPU time of a measured section.

    ``total_cpu_s`` = driver CPU (minus the sampler thread's own CPU) + Ray worker CPU.
    """

    wall_s: float
    driver_cpu_s: float
    workers_cpu_s: float
    sampler_cpu_s: float
    samples: int
    processes: tuple[ProcessUsage, ...] = ()
    #: the kernel's part of :attr:`total_cpu_s` (system time: page faults, the page cache's
    #: copies, syscalls), which on a VM with free page reporting moves a lot from run to run
    system_cpu_s: float = 0.0

    @property
    def total_cpu_s(self) -> float:
        """CPU seconds charged to the section."""
        return self.driver_cpu_s + self.workers_cpu_s

    @property
    def user_cpu_s(self) -> float:
        """:attr:`total_cpu_s` less the kernel's part."""
        return max(self.total_cpu_s - self.system_cpu_s, 0.0)

    def peak_rss_mb(self, title_pattern: str | None = None) -> float | None:
        """Largest peak RSS among watched workers (whose title matches ``title_pattern``)."""
        procs = [
            p
            for p in self.processes
            if title_pattern is None or re.search(title_pattern, p.title, re.IGNORECASE)
        ]
        return max((p.peak_rss_mb for p in procs), default=None)


def minor_faults(pid: int) -> int:
    """The process's minor page faults so far (``/proc/<pid>/stat``; 0 where it cannot be
    read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0
    # the fields after the command name, which may hold spaces: minflt is the 10th field
    return int(stat.rsplit(b")", 1)[1].split()[7])


def _is_jvm(cmdline: Sequence[str]) -> bool:
    return bool(cmdline) and os.path.basename(cmdline[0].strip()) == "java"


def raylet_descendants(raylets: Iterable[psutil.Process]) -> Iterator[psutil.Process]:
    """Every process below ``raylets`` (a raylet gone meanwhile is passed over)."""
    for raylet in raylets:
        try:
            children = raylet.children(recursive=True)
        except psutil.Error:
            continue
        yield from children


def ray_workers_cpu_s() -> float:
    """Sum of user + system seconds of this node's Ray worker processes right now."""
    total = 0.0
    for child in raylet_descendants(find_local_raylets()):
        try:
            if is_ray_worker_cmdline(child.cmdline()):
                t = child.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            continue
    return total


def wait_for_ray_idle(
    max_wait_s: float = 30.0, quiet_s: float = 0.5, busy_share: float = 0.05
) -> float:
    """Wait until the Ray workers are quiet: less than ``busy_share`` of one core over
    ``quiet_s`` seconds (actors still importing their modules are not). Returns seconds waited.

    Used before a measured section so actor start-up that Ray runs in the background is not
    charged to the first commit.
    """
    t0 = time.perf_counter()
    before = ray_workers_cpu_s()
    while time.perf_counter() - t0 < max_wait_s:
        time.sleep(quiet_s)
        now = ray_workers_cpu_s()
        if now - before < busy_share * quiet_s:
            break
        before = now
    return time.perf_counter() - t0


class CpuMeter:
    """Measure wall time and CPU seconds of the driver plus every Ray worker over a section.

    Method (Linux, via psutil):

    - Driver: user + system time of this process (``time.process_time()``: all its threads,
      Ray's core-worker threads included) at the start and the end of the section. The sampler thread measures its own
      CPU with ``time.thread_time()`` and that is subtracted, so watching costs nothing.
    - Ray workers: the processes below this node's raylet (:func:`find_local_raylets`) whose
      command line marks them as workers (:func:`is_ray_worker_cmdline`: ``ray::<name>``
      titles or ``default_worker.py``; the dashboard and runtime-env agents, raylet and GCS are
      not counted). A background thread lists them every ``poll_s`` seconds and records each
      process's cumulative user + system time, keyed by (pid, create time). A worker present at
      the start contributes ``last - first`` sample; one started during the section
      contributes everything it used (its start-up is work the section caused). A worker that
      exits keeps its last sample, so at most ``poll_s`` seconds of CPU per exited process are
      missed (the raylet does not accumulate its children's times, so there is no exact
      post-mortem figure). A final sample is taken when the section ends.
    - A JVM this process started (the RayDP Spark driver, py4j's gateway): watched as a worker
      titled ``spark-driver`` (it plans and schedules each Spark job of a hand-off).
    - Peak RSS per worker: ``VmHWM`` from ``/proc/<pid>/status`` at every sample (the
      process's lifetime peak), else the largest sampled RSS.

    With ``ray_workers=False`` only the driver is measured (the in-process baselines).

    Example::

        with CpuMeter(ray_workers=True) as meter:
            do_work()
        print(meter.usage.total_cpu_s)
    """

    def __init__(self, *, ray_workers: bool = False, poll_s: float = 0.1) -> None:
        self.ray_workers = ray_workers
        self.poll_s = poll_s
        self._raylets: list[psutil.Process] = []
        self._watched: dict[tuple[int, float], tuple[psutil.Process, ProcessUsage]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler_cpu_s = 0.0
        self._sampler_sys_s = 0.0
        self._samples = 0
        self._lock = threading.Lock()
        self._wall0 = 0.0
        self._cpu0 = 0.0
        self._sys0 = 0.0
        self.usage: CpuUsage | None = None

    @staticmethod
    def _driver_cpu() -> float:
        # CLOCK_PROCESS_CPUTIME_ID: user + system of every thread, nanosecond resolution
        # (psutil's cpu_times() counts in 10 ms clock ticks).
        return time.process_time()

    def _sample(self, *, initial: bool = False) -> None:
        with self._lock:
            self._samples += 1
            for child in self._candidates():
                try:
                    ident = (child.pid, child.create_time())
                    if ident not in self._watched:
                        cmd = child.cmdline()
                        if _is_jvm(cmd) and child.ppid() == os.getpid():
                            title = "spark-driver"
                        elif is_ray_worker_cmdline(cmd):
                            title = (cmd or ["?"])[0].strip()
                        else:
                            continue
                        self._watched[ident] = (
                            child,
                            ProcessUsage(child.pid, title, 0.0, 0.0),
                        )
                        if initial:
                            t = child.cpu_times()
                            self._watched[ident][1].cpu_start_s = t.user + t.system
                            self._watched[ident][1].sys_start_s = t.system
                            self._watched[ident][1].faults_start = minor_faults(child.pid)
                except psutil.Error:
                    continue
            for proc, usage in self._watched.values():
                if usage.exited:
                    continue
                try:
                    with proc.oneshot():
                        t = proc.cpu_times()
                        cmd = proc.cmdline()
                        rss = proc.memory_info().rss
                    usage.cpu_last_s = t.user + t.system
                    usage.sys_last_s = t.system
                    usage.faults_last = minor_faults(proc.pid) or usage.faults_last
                    if cmd and cmd[0].strip().startswith("ray::"):
                        title = cmd[0].strip()
                        if title != "ray::IDLE":
                            usage.title = title  # keep the most telling name seen
                    peak = _peak_rss_bytes(proc.pid) or rss
                    usage.peak_rss_bytes = max(usage.peak_rss_bytes, peak)
                except psutil.Error:
                    usage.exited = True

    def _candidates(self) -> Iterator[psutil.Process]:
        # Ray's workers, and a JVM this process started (a RayDP Spark driver: py4j's gateway)
        yield from raylet_descendants(self._raylets)
        with contextlib.suppress(psutil.Error):
            yield from psutil.Process().children()

    def _run(self) -> None:
        t0 = time.thread_time()
        s0 = resource.getrusage(resource.RUSAGE_THREAD).ru_stime
        while not self._stop.wait(self.poll_s):
            self._sample()
        self._sampler_cpu_s = time.thread_time() - t0
        # mostly the kernel's (it reads /proc for every watched process): not the driver's
        self._sampler_sys_s = resource.getrusage(resource.RUSAGE_THREAD).ru_stime - s0

    def __enter__(self) -> CpuMeter:
        if self.ray_workers:
            self._raylets = find_local_raylets()
            self._sample(initial=True)
            for _proc, usage in self._watched.values():
                usage.cpu_last_s = max(usage.cpu_last_s, usage.cpu_start_s)
                usage.sys_last_s = max(usage.sys_last_s, usage.sys_start_s)
                usage.faults_last = max(usage.faults_last, usage.faults_start)
        self._sys0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime
        self._cpu0 = self._driver_cpu()
        self._wall0 = time.perf_counter()
        if self.ray_workers:
            self._thread = threading.Thread(target=self._run, name="cpu-meter", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall0
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._sample()
        driver = self._driver_cpu() - self._cpu0 - self._sampler_cpu_s
        own_sys = resource.getrusage(resource.RUSAGE_SELF).ru_stime - self._sys0
        driver_sys = min(max(own_sys - self._sampler_sys_s, 0.0), max(driver, 0.0))
        procs = tuple(u for _p, u in self._watched.values())
        self.usage = CpuUsage(
            wall_s=wall,
            driver_cpu_s=max(driver, 0.0),
            workers_cpu_s=sum(p.cpu_s for p in procs),
            sampler_cpu_s=self._sampler_cpu_s,
            samples=self._samples,
            processes=procs,
            system_cpu_s=driver_sys + sum(p.system_cpu_s for p in procs),
        )


# ---------------------------------------------------------------------------------------------
# Measurements, timers, statistics
# ---------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    """Rows processed over a measured section, with its wall and CPU time."""

    name: str
    rows: int
    usage: CpuUsage | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the section ran to the end."""
        return self.error is None and self.usage is not None

    @property
    def rows_per_s(self) -> float | None:
        """Wall rows per second."""
        if not self.ok or self.usage is None or self.usage.wall_s <= 0:
            return None
        return self.rows / self.usage.wall_s

    @property
    def rows_per_cpu_s(self) -> float | None:
        """Rows per CPU-second (driver + Ray workers)."""
        if not self.ok or self.usage is None or self.usage.total_cpu_s <= 0:
            return None
        return self.rows / self.usage.total_cpu_s

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures."""
        u = self.usage
        out: dict[str, Any] = {
            "rows": self.rows,
            "error": self.error,
            "wall_s": _round(u.wall_s) if u else None,
            "cpu_s": _round(u.total_cpu_s) if u else None,
            "driver_cpu_s": _round(u.driver_cpu_s) if u else None,
            "workers_cpu_s": _round(u.workers_cpu_s) if u else None,
            "rows_per_s": _round(self.rows_per_s, 0),
            "rows_per_cpu_s": _round(self.rows_per_cpu_s, 0),
        }
        out.update(self.extra)
        return out


class Timer:
    """``with Timer() as t: ...`` then ``t.seconds`` (wall, ``time.perf_counter``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._t0 = 0.0

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._t0


def progress_log(tag: str) -> Callable[[str], None]:
    """A ``log(msg)`` that writes ``[tag  12.3s] msg`` to stderr (stdout carries only the
    report), timed from this call."""
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{tag} {time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    return log


def error_text(e: BaseException) -> str:
    """``Type: first line of the message`` (the type alone for an empty message)."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


def print_report(res: dict[str, Any], as_json: bool, width: int) -> None:
    """``res`` as one JSON line, or as ``key value`` lines with keys padded to ``width``."""
    if as_json:
        print(json.dumps(res))
        return
    for k, v in res.items():
        print(f"{k:{width}s} {v}")


@contextlib.contextmanager
def work_dir(keep: Path | None, prefix: str) -> Iterator[Path]:
    """``keep`` (made if missing, kept), or a temporary folder removed on the way out."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        yield Path(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """Smallest wall time of ``repeat`` calls of ``fn`` and the last result."""
    best = float("inf")
    out: T | None = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, cast(T, out)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100, linear interpolation), None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` or None when either is missing or ``b`` is zero."""
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def _round(v: float | None, nd: int = 3) -> float | None:
    if v is None:
        return None
    return round(float(v), nd) if nd else float(round(v))


# ---------------------------------------------------------------------------------------------
# The correctness gate
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateResult:
    """Outcome of comparing a snapshot with the expected table."""

    passed: bool
    reason: str
    rows_expected: int
    rows_actual: int


def check_gate(actual: pa.Table, expected: pa.Table, key: str = "key") -> GateResult:
    """Compare a table snapshot with the expected last-writer-wins result, all columns.

    Hudi meta columns (``_hoodie_*``) and any column ``expected`` lacks are ignored; column
    order and row order do not matter; types are cast to ``expected``'s (hudi-rs may return
    ``large_string`` or a partition column as a string). Every key must appear once.
    """
    n_exp, n_act = expected.num_rows, actual.num_rows

    def fail(reason: str) -> GateResult:
        return GateResult(False, reason, n_exp, n_act)

    missing = [c for c in expected.column_names if c not in actual.column_names]
    if missing:
        return fail(f"snapshot lacks columns {missing}; has {actual.column_names}")
    try:
        cols = [pc.cast(actual[f.name], f.type) for f in expected.schema]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        return fail(f"snapshot columns do not cast to the expected types: {e}")
    act = pa.Table.from_arrays(cols, schema=expected.schema)

    act_keys = act[key].to_numpy()
    uniq, counts = np.unique(act_keys, return_counts=True)
    if (counts > 1).any():
        dups = uniq[counts > 1]
        return fail(f"{len(dups)} keys appear more than once, e.g. {dups[:5].tolist()}")
    exp_keys = expected[key].to_numpy()
    if n_act != n_exp or not np.array_equal(uniq, np.sort(exp_keys)):
        lost = np.setdiff1d(exp_keys, uniq)
        extra = np.setdiff1d(uniq, exp_keys)
        return fail(
            f"{n_act} rows, expected {n_exp}: {len(lost)} keys missing (e.g. {lost[:5].tolist()}),"
            f" {len(extra)} unexpected (e.g. {extra[:5].tolist()})"
        )

    act = act.sort_by(key)
    exp = expected.sort_by(key)
    if act.equals(exp):
        return GateResult(True, "snapshot equals the last-writer-wins dedup", n_exp, n_act)
    for name in exp.column_names:
        eq = pc.equal(act[name], exp[name])
        neq = pc.invert(pc.fill_null(eq, False))
        bad = pc.sum(neq).as_py() or 0
        if bad:
            first = pc.index(neq, True).as_py()
            k = exp[key][first].as_py()
            return fail(
                f"{bad} rows differ in column {name!r}, e.g. key {k}: "
                f"got {act[name][first].as_py()!r}, expected {exp[name][first].as_py()!r}"
            )
    return fail("snapshot differs from the expected table (nulls or types)")


_FP_PRIME = np.uint64(0x100000001B3)


def _column_words(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | None]:
    """A column as rows of 64-bit words that equal values share and unequal ones (almost
    never) do, and how many of each row's words count (None: all). Integers are themselves;
    strings and binaries their byte length, then their bytes in little-endian words (a row's
    words past its length do not count, so a row's words do not depend on the other rows);
    anything else pandas' hash of the value. Each row ends with its validity."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(arr)
    valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=np.uint64)
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_temporal(t) or pa.types.is_boolean(t):
        ints = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        return np.column_stack([ints.view(np.uint64), valid]), None
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        arr = arr.cast(pa.large_binary())
        offsets = np.frombuffer(
            arr.buffers()[1], dtype=np.int64, count=n + 1, offset=arr.offset * 8
        )
        lens = np.where(valid.astype(bool), np.diff(offsets), 0)
        data_buf = arr.buffers()[2]
        nwords = (lens + 7) // 8
        words = [lens.astype(np.uint64), valid]
        if data_buf is not None and int(nwords.max(initial=0)):
            # the bytes, padded, read as 8-byte words starting at any byte (stride 1)
            size = data_buf.size
            padded = np.zeros(-(-(size + 8) // 8) * 8, dtype=np.uint8)
            padded[:size] = np.frombuffer(data_buf, dtype=np.uint8)
            at = np.lib.stride_tricks.as_strided(
                padded.view(np.uint64), shape=(size + 1,), strides=(1,)
            )
            for w in range(int(nwords.max())):
                rest = lens - 8 * w
                live = rest > 0
                word = at[np.where(live, offsets[:-1] + 8 * w, 0)]
                keep = np.clip(rest, 0, 7).astype(np.uint64) * np.uint64(8)
                mask = np.where(rest >= 8, ~np.uint64(0), (np.uint64(1) << keep) - np.uint64(1))
                words.append(np.where(live, word & mask, np.uint64(0)))
        return np.column_stack(words), 2 + nwords
    hashed = pd.util.hash_array(np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object))
    return np.column_stack([hashed, valid]), None


def repeats(values: np.ndarray) -> int:
    """How many entries repeat an earlier one (by sorting: numpy's ``unique`` is slower)."""
    s = np.sort(values)
    return int(np.count_nonzero(s[1:] == s[:-1]))


def row_fingerprints(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """A 64-bit fingerprint of each row over ``columns``: every value's words
    (:func:`_column_words`) folded in with FNV-style multiply-xorshift steps, then a
    splitmix64 finaliser. Vectorised (numpy over Arrow buffers)."""
    h = np.full(table.num_rows, 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for name in columns:
            words, counts = _column_words(table[name])
            for j in range(words.shape[1]):
                step = (h ^ words[:, j]) * _FP_PRIME
                step ^= step >> np.uint64(29)
                h = step if counts is None else np.where(counts > j, step, h)
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


class LastWriterWins:
    """The expected snapshot of a table whose record keys are the integers ``0 .. capacity-1``,
    kept per key instead of per row: the winning record's ordering value (largest wins; ties go
    to the later record) and a fingerprint of its other columns (:func:`row_fingerprints`),
    16 bytes a key. Adding commits and checking a snapshot are vectorised and take a snapshot
    batch by batch, so a table of tens of millions of keys is checked without materialising
    either side.
    """

    def __init__(self, capacity: int, key: str = "key", order: str = "ts") -> None:
        self.key, self.order = key, order
        self.ts = np.full(capacity, _INT64_MIN, dtype=np.int64)
        self.fp = np.zeros(capacity, dtype=np.uint64)
        self.schema: pa.Schema | None = None

    @property
    def columns(self) -> list[str]:
        """The columns a snapshot must have (those of the commits added)."""
        return self.schema.names if self.schema is not None else [self.key, self.order]

    @property
    def num_keys(self) -> int:
        """Keys the snapshot must hold."""
        return int(np.count_nonzero(self.ts != _INT64_MIN))

    def _values(self) -> list[str]:
        return [c for c in self.columns if c not in (self.key, self.order)]

    def add(self, commit: pa.Table) -> None:
        """Apply one commit: each of its keys takes the record with the largest ordering value
        unless the key holds a larger one already."""
        if self.schema is None:
            self.schema = commit.schema
        keys = commit[self.key].to_numpy()
        if len(keys) and (keys.min() < 0 or keys.max() >= len(self.ts)):
            raise ValueError(f"keys outside 0..{len(self.ts) - 1}")
        if repeats(keys):
            commit = lww_dedup(commit, self.key, self.order)
            keys = commit[self.key].to_numpy()
        ts = commit[self.order].to_numpy()
        newer = ts >= self.ts[keys]
        self.ts[keys[newer]] = ts[newer]
        self.fp[keys[newer]] = row_fingerprints(commit, self._values())[newer]

    def check(self, batches: Iterable[pa.RecordBatch | pa.Table]) -> GateResult:
        """Compare a snapshot, batch by batch, with the expected one: every expected key once,
        no other key, each key's ordering value equal and the fingerprint of its other columns
        equal. Meta and extra columns are ignored; types are cast to the commits'."""
        if self.schema is None:
            raise ValueError("no commit added")
        n_exp = self.num_keys
        seen = np.zeros(len(self.ts), dtype=np.uint8)
        n_act = unexpected = repeated = wrong_ts = wrong_fp = 0
        example: str | None = None
        for batch in batches:
            t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
            missing = [c for c in self.columns if c not in t.column_names]
            if missing:
                return GateResult(False, f"snapshot lacks columns {missing}", n_exp, n_act)
            try:
                t = pa.Table.from_arrays(
                    [pc.cast(t[f.name], f.type) for f in self.schema], schema=self.schema
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                return GateResult(False, f"snapshot columns do not cast: {e}", n_exp, n_act)
            n_act += t.num_rows
            keys = t[self.key].to_numpy()
            known = (keys >= 0) & (keys < len(self.ts))
            known[known] = self.ts[keys[known]] != _INT64_MIN
            unexpected += int(np.count_nonzero(~known))
            if not known.all():
                t, keys = t.filter(pa.array(known)), keys[known]
            repeated += repeats(keys)
            seen[keys] = np.minimum(seen[keys], 1) + 1
            bad_ts = t[self.order].to_numpy() != self.ts[keys]
            bad_fp = row_fingerprints(t, self._values()) != self.fp[keys]
            wrong_ts += int(np.count_nonzero(bad_ts))
            wrong_fp += int(np.count_nonzero(bad_fp & ~bad_ts))
            if example is None and (bad_ts.any() or bad_fp.any()):
                k = int(keys[np.flatnonzero(bad_ts | bad_fp)[0]])
                example = f"key {k}"
        lost = int(np.count_nonzero((self.ts != _INT64_MIN) & (seen == 0)))
        repeated += int(np.count_nonzero(seen > 1))
        problems = [
            f"{n} {what}"
            for n, what in (
                (lost, "keys missing"),
                (unexpected, "unexpected keys"),
                (repeated, "keys more than once"),
                (wrong_ts, f"rows with another {self.order} (an older record won)"),
                (wrong_fp, "rows whose other columns differ"),
            )
            if n
        ]
        if problems:
            more = f", e.g. {example}" if example else ""
            return GateResult(False, f"{n_act} rows: " + "; ".join(problems) + more, n_exp, n_act)
        return GateResult(
            True,
            "snapshot equals the last-writer-wins dedup (per-key ts and row fingerprints)",
            n_exp,
            n_act,
        )


# ---------------------------------------------------------------------------------------------
# Table files on disk, commit latencies from the timeline
# ---------------------------------------------------------------------------------------------

LOG_FILE_RE = re.compile(r"^\.(?P<fid>.+?)_(?P<base>\d+)\.log\.(?P<ver>\d+)(_.*)?$")
BASE_FILE_RE = re.compile(r"^(?P<fid>.+?)_(?P<token>[^_]+)_(?P<instant>\d+)\.(parquet|orc|hfile)$")
_LOG_MAGIC = b"#HUDI#"


def _count_magic(path: Path) -> int:
    n = 0
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            buf = tail + chunk
            n += buf.count(_LOG_MAGIC)
            tail = buf[-(len(_LOG_MAGIC) - 1) :]
    return n


def table_file_stats(path: str | Path) -> dict[str, Any]:
    """Bytes and files of a Hudi table directory, read straight from the file system.

    Counts all bytes under the table (``.hoodie`` included), base files, log files, file groups
    (distinct file ids) and log blocks (``#HUDI#`` magic markers in each log file).
    """
    root = Path(path)
    total = meta = 0
    base_files = log_files = log_blocks = 0
    groups: set[tuple[str, str]] = set()
    for dirpath, _dirs, files in os.walk(root):
        d = Path(dirpath)
        in_meta = ".hoodie" in d.relative_to(root).parts
        for name in files:
            p = d / name
            size = p.stat().st_size
            total += size
            if in_meta:
                meta += size
                continue
            rel = str(d.relative_to(root))
            if m := LOG_FILE_RE.match(name):
                log_files += 1
                log_blocks += _count_magic(p)
                groups.add((rel, m["fid"]))
            elif m := BASE_FILE_RE.match(name):
                base_files += 1
                groups.add((rel, m["fid"]))
    n_groups = len(groups)
    return {
        "bytes": total,
        "metadata_bytes": meta,
        "file_groups": n_groups,
        "base_files": base_files,
        "log_files": log_files,
        "log_blocks": log_blocks,
        "log_files_per_group": round(log_files / n_groups, 2) if n_groups else None,
        "log_blocks_per_group": round(log_blocks / n_groups, 2) if n_groups else None,
    }


def timeline_commit_latencies(path: str | Path, action: str = "deltacommit") -> list[float]:
    """Seconds from ``<instant>.<action>.requested`` to the completed instant, by file mtime.

    Handles the version 6 layout (``.hoodie/<ts>.<action>``) and version 8+
    (``.hoodie/timeline/<ts>_<completion>.<action>``); returns [] when nothing matches.
    """
    out: list[float] = []
    for d in (Path(path) / ".hoodie", Path(path) / ".hoodie" / "timeline"):
        if not d.is_dir():
            continue
        requested: dict[str, float] = {}
        completed: dict[str, float] = {}
        for p in d.iterdir():
            name = p.name
            if name.endswith(f".{action}.requested"):
                requested[name.split(".")[0]] = p.stat().st_mtime
            elif name.endswith(f".{action}"):
                completed[name.split(".")[0].split("_")[0]] = p.stat().st_mtime
        out.extend(completed[i] - requested[i] for i in sorted(requested) if i in completed)
    return out


# ---------------------------------------------------------------------------------------------
# Machine description and text tables
# ---------------------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name (``/proc/cpuinfo``), or what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(repo: str | Path, *args: str) -> str:
    """The stripped stdout of ``git -C repo args`` (raises on failure or after 10 s)."""
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=10
    ).stdout.strip()


def git_commit(repo: str | Path) -> str | None:
    """``git rev-parse --short HEAD`` of ``repo`` (with ``+dirty`` when the tree has changes)."""
    try:
        head = _git(repo, "rev-parse", "--short", "HEAD")
        dirty = _git(repo, "status", "--porcelain", "--untracked-files=no")
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info() -> dict[str, Any]:
    """Cores, CPU model, memory, OS, Python and library versions, date (UTC)."""
    import importlib.metadata as md

    versions: dict[str, str | None] = {}
    for dist in ("pyarrow", "numpy", "fastavro", "deltalake", "ray", "hudi", "pyiceberg", "psutil"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            versions[dist] = None
    return {
        "cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "cpu_model": cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def fmt_num(v: float | int | None, nd: int = 0) -> str:
    """A number with thousands separators, ``-`` for None."""
    if v is None:
        return "-"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "-"
    return f"{v:,.{nd}f}"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width table (first column left-aligned, the rest right-aligned)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)
        )

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), sep, *(line(r) for r in cells[1:])])
