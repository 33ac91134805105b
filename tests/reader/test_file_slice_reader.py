"""A file slice's consecutive log data blocks are folded into the log buffer together
(``file_slice_reader._DataRun``): many small blocks, as a streaming writer's checkpoints leave
them, cost one fold's fixed work, not one each. Folding a run must give what folding its blocks
one by one gives, for both buffers, with keys repeated inside and across blocks, ties of the
ordering value, deletes by marker column and by delete block between the data blocks, and the
compiled buffer's Parquet blocks decoded whole and in two passes (``WHOLE_BLOCKS_MAX_BYTES``). Avro blocks of one writer schema are
decoded together too (``data_of_blocks``). hudi-rs reads the same tables.
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.reader import file_slice_reader as fsr
from hoodie_ray.reader import read_table
from hoodie_ray.reader.compiled_merger import new_log_record_buffer
from hoodie_ray.reader.query import plan_file_slices
from tests.conftest import hudi_rs_read
from tests.reader.builder import TableBuilder, frame_block

SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("ts", pa.int64()),
        ("v", pa.string()),
        ("_hoodie_is_deleted", pa.bool_()),
    ]
)


def _rows(rng: np.random.Generator, n: int, tag: str, deletes: bool) -> pa.Table:
    keys = [f"k{int(k):03d}" for k in rng.integers(0, 60, n)]  # repeats inside a block too
    return pa.table(
        {
            "key": keys,
            "ts": rng.integers(0, 6, n),  # few values: many ties
            "v": [f"{tag}-{i}" for i in range(n)],
            "_hoodie_is_deleted": (rng.random(n) < 0.1) if deletes else np.zeros(n, bool),
        },
        schema=SCHEMA,
    )


def build(root: Path, seed: int, mode: str, fmt: str = "parquet") -> TableBuilder:
    """A base file of 40 keys, then 10 delta commits of one to four data blocks each, some
    small (1-8 rows), some large (300-500 rows), with an ordered delete block now and then."""
    rng = np.random.default_rng(seed)
    b = TableBuilder(root, SCHEMA, version=6, merge_mode=mode)
    c = b.begin()
    base_rows = _rows(rng, 40, "base", deletes=False)
    base_rows = base_rows.set_column(0, "key", pa.array([f"k{k:03d}" for k in range(40)]))
    base = c.base_file("", "f1-0", base_rows)
    c.complete()
    t1 = c.instant
    for i in range(10):
        c = b.begin()
        blocks = []
        for j in range(int(rng.integers(1, 5))):
            n = int(rng.integers(300, 500)) if rng.random() < 0.25 else int(rng.integers(1, 9))
            blocks.append(c.data_block(_rows(rng, n, f"c{i}b{j}", True), "", "f1-0", fmt))
            if rng.random() < 0.3:
                keys = sorted({f"k{int(k):03d}" for k in rng.integers(0, 60, 3)})
                order = [("LongWrapper", int(rng.integers(0, 6))) for _ in keys]
                blocks.append(c.delete_block(keys, "", order))
        c.log_file("", "f1-0", blocks, base_instant=t1, base_file=base)
        c.complete()
    return b


def _view(t: pa.Table) -> list[tuple]:
    cols = ["_hoodie_record_key", "ts", "v"]
    return sorted(tuple(r[c] for c in cols) for r in t.select(cols).to_pylist())


class _OneBlockRuns(fsr._DataRun):
    """Every block folded alone: the block-by-block fold the runs must equal."""

    def __init__(self, buffer: Any, max_rows: int, failed: Any) -> None:
        super().__init__(buffer, 1, failed)


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
@pytest.mark.parametrize("mode", ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"])
@pytest.mark.parametrize("seed", [1, 2])
def test_folding_runs_of_blocks_equals_folding_each_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, mode: str, fmt: str
) -> None:
    b = build(tmp_path / "t", seed, mode, fmt)
    root = str(b.root)
    expected = _view(hudi_rs_read(root))
    reads = {}
    # whole: the compiled buffer's budget of Parquet blocks decoded in one pass (None: the
    # default, every block here; 0: none, all in two passes; 20,000: the first few, then two)
    for compiled in (False, True):
        for whole in (None, 0, 20_000) if compiled else (None,):
            for runs in (True, False):
                with monkeypatch.context() as m:
                    m.setattr(
                        fsr,
                        "new_log_record_buffer",
                        functools.partial(new_log_record_buffer, compiled=compiled),
                    )
                    if whole is not None:
                        m.setattr(fsr, "WHOLE_BLOCKS_MAX_BYTES", whole)
                    if not runs:  # each block decoded and folded alone
                        m.setattr(fsr, "_DataRun", _OneBlockRuns)
                        m.setattr(fsr, "JOINT_DECODE_MAX_BYTES", 0)
                    reads[(compiled, whole, runs)] = _view(read_table(root))
    for how, got in reads.items():
        assert got == reads[(False, None, False)], how
    assert reads[(False, None, True)] == expected


def test_a_run_is_bounded_by_the_batch_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A run folds once it holds a batch's rows (a delete block and the log's end fold it
    too), so what it holds stays bounded as a log grows."""
    b = build(tmp_path / "t", 4, "EVENT_TIME_ORDERING")
    folds: list[int] = []
    real = fsr._DataRun.flush

    def counting(self: fsr._DataRun) -> None:
        if self._tables:
            folds.append(self._rows)
        real(self)

    monkeypatch.setattr(fsr._DataRun, "flush", counting)
    monkeypatch.setattr(
        fsr, "new_log_record_buffer", functools.partial(new_log_record_buffer, compiled=False)
    )
    root = str(b.root)
    whole = _view(plan_file_slices(root).read_all())
    blocks = len(folds)
    assert max(folds) > 500  # several blocks a fold
    folds.clear()
    assert _view(plan_file_slices(root, batch_rows=400).read_all()) == whole
    assert len(folds) > blocks
    assert max(folds) < 400 + 500  # at most one block past the bound


def test_a_joint_avro_run_is_bounded_by_the_batch_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = build(tmp_path / "t", 4, "EVENT_TIME_ORDERING", "avro")
    runs: list[int] = []
    real = fsr.data_of_blocks

    def counting(blocks: Any, columns: Any) -> pa.Table:
        out = real(blocks, columns)
        runs.append(out.num_rows)
        return out

    monkeypatch.setattr(fsr, "data_of_blocks", counting)
    root = str(b.root)
    whole = _view(plan_file_slices(root).read_all())
    assert max(runs) > 500  # several blocks decoded as one
    runs.clear()
    assert _view(plan_file_slices(root, batch_rows=400).read_all()) == whole
    assert max(runs) < 400 + 500  # at most one block past the bound


def test_a_block_that_is_not_admitted_is_never_decoded(tmp_path: Path) -> None:
    """A pending instant's Avro block without a SCHEMA header is skipped, as hudi-rs skips
    it: the scan that groups Avro blocks by their schema reads the header as it is."""
    schema = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
    b = TableBuilder(tmp_path / "t", schema)
    c = b.begin()
    base = c.base_file("", "f1-0", pa.table({"key": ["a"], "ts": [1], "v": ["base"]}, schema))
    c.complete()
    t1 = c.instant
    c = b.begin()
    good = c.data_block(pa.table({"key": ["a"], "ts": [2], "v": ["log"]}, schema), "", "f1-0")
    c.log_file("", "f1-0", [good], base_instant=t1, base_file=base)
    c.complete()
    c = b.begin()  # left pending
    headerless = frame_block(3, {0: c.instant}, struct.pack(">ii", 3, 0))
    c.log_file("", "f1-0", [headerless], base_instant=t1, base_file=base)
    want = [("a", 2, "log")]
    assert _view(hudi_rs_read(str(b.root))) == want
    assert _view(read_table(str(b.root))) == want
