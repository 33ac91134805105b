"""The two log merge engines on the same inputs: the column-wise buffer (``reader/merger.py``)
and the compiled one (``reader/compiled_merger.py``), both deciding by ``hoodie_ray.merge``.

Random versions of a few keys (inserts, updates, deletes with and without ordering values, as
``_hoodie_is_deleted`` records and as delete blocks, null ordering values) in several log
blocks, then a base file: both engines give the same rows for every ordering type the compiled
path takes, the rows a per-key model of the rule gives (a fold of the base record and the log
versions one by one), and, where the rule says the order of the blocks does not matter (event
time, distinct ordering values, no default-ordered delete), the same rows for every order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.meta import IS_DELETED
from hoodie_ray.reader.compiled_merger import CompiledLogRecordBuffer
from hoodie_ray.reader.file_slice_reader import delete_ordering_values
from hoodie_ray.reader.merger import RECORD_KEY, DeleteMarker, LogRecordBuffer
from tests.reader.test_compiled_merger import ORDERING_TYPES, _ordering

pytestmark = pytest.mark.usefixtures("needs_numba")

EVENT = MergeMode.EVENT_TIME_ORDERING
COMMIT = MergeMode.COMMIT_TIME_ORDERING
KEYS = [f"k{i}" for i in range(8)] + ["a-key-longer-than-a-slot-holds"]

#: one version of a key: (key, ordering value or None, is a delete, value, in a delete block)
Version = tuple[str, Any, bool, int, bool]


def _schema(otype: pa.DataType) -> pa.Schema:
    return pa.schema(
        [(RECORD_KEY, pa.string()), ("ts", otype), ("v", pa.int64()), (IS_DELETED, pa.bool_())]
    )


def _random_blocks(rng: np.random.Generator, distinct: bool) -> list[list[Version]]:
    """1-5 blocks of versions; ``distinct``: every ordering value differs and none is null, and
    no delete is default-ordered (the order of the blocks then cannot matter)."""
    n_blocks = int(rng.integers(1, 6))
    sizes = rng.integers(1, 7, n_blocks)
    ts_pool = iter(rng.permutation(100))  # fits every type, abs() keeps them apart
    blocks, value = [], 0
    for b, size in enumerate(sizes):
        in_delete_block = not distinct and rng.random() < 0.25
        block = []
        for _ in range(int(size)):
            key = KEYS[int(rng.integers(len(KEYS)))]
            is_delete = in_delete_block or rng.random() < 0.25
            if distinct:
                ts: int | None = int(next(ts_pool))
            elif in_delete_block:  # a delete block's values are cast as they are: no negatives
                ts = None if rng.random() < 0.3 else int(rng.integers(0, 5))
            else:
                ts = None if rng.random() < 0.2 else int(rng.integers(-2, 5))
            value += 1
            block.append((key, ts, is_delete, 1000 * b + value, in_delete_block))
        blocks.append(block)
    return blocks


def _base(rng: np.random.Generator) -> list[tuple[str, int | None, int]]:
    keys = [k for k in KEYS if rng.random() < 0.6]
    return [(k, int(rng.integers(-2, 5)), -i) for i, k in enumerate(keys)]


def _merge(
    engine: type[LogRecordBuffer | CompiledLogRecordBuffer],
    otype: pa.DataType,
    mode: MergeMode,
    blocks: list[list[Version]],
    base: list[tuple[str, int | None, int]],
) -> list[tuple[str, Any, int]]:
    """The rows a slice of ``base`` and log ``blocks`` reads as, through ``engine``."""
    schema = _schema(otype)
    buf = engine(schema, "ts", mode)
    for block in blocks:
        keys = pa.array([x[0] for x in block], pa.string())
        if block[0][4]:  # a delete block: no ordering value means the default one
            kinds = [None if x[1] is None else "long" for x in block]
            ordering, default, foreign = delete_ordering_values(kinds, [x[1] for x in block], otype)
            buf.add_delete_block(keys, None, ordering, default, foreign)
            continue
        t = pa.table(
            {
                RECORD_KEY: keys,
                "ts": _ordering([x[1] for x in block], otype),
                "v": pa.array([x[3] for x in block], pa.int64()),
                IS_DELETED: pa.array([x[2] for x in block]),
            },
            schema=schema,
        )
        buf.add_data_block(t, DeleteMarker().mask(t))
    base_t = pa.table(
        {
            RECORD_KEY: pa.array([b[0] for b in base], pa.string()),
            "ts": _ordering([b[1] for b in base], otype),
            "v": pa.array([b[2] for b in base], pa.int64()),
            IS_DELETED: pa.array([False] * len(base)),
        },
        schema=schema,
    )
    out = pa.concat_tables([buf.merge_base(base_t), buf.remaining()])
    cols = [out.column(c).to_pylist() for c in (RECORD_KEY, "ts", "v")]
    return sorted(((k, repr(ts), v) for k, ts, v in zip(*cols, strict=True)), key=_by_key)


def _by_key(row: tuple[str, Any, int]) -> tuple[str, int]:
    return row[0], row[2]


def _newer_wins(old: Version, new: Version) -> bool:
    """The rule, restated per pair of versions (event time, int64 ordering values)."""
    if new[2] and new[1] is None:  # a default-ordered delete replaces what came before it
        return True
    if old[2] and old[1] is None:  # ... and whatever follows it replaces it
        return True
    if old[1] is None:  # nulls lowest, two nulls tie: the newer wins
        return True
    return new[1] is not None and new[1] >= old[1]


def _model(
    blocks: list[list[Version]], base: list[tuple[str, int | None, int]]
) -> list[tuple[str, Any, int]]:
    """Each key's base record and log versions folded one by one, in log order."""
    state: dict[str, Version] = {k: (k, ts, False, v, False) for k, ts, v in base}
    for block in blocks:
        for x in block:
            old = state.get(x[0])
            if old is None or _newer_wins(old, x):
                state[x[0]] = x
    return sorted(((k, repr(x[1]), x[3]) for k, x in state.items() if not x[2]), key=_by_key)


def _seeds(n_ci: int, n_all: int, start: int = 0) -> list[Any]:
    """Seeds ``start .. start + n_all`` of a randomised test in two parameters: the first
    ``n_ci`` run in CI, the rest under ``-m slow`` (suite time: the rule and both engines meet
    the same kinds of inputs in the first seeds; the full count still runs with the slow ones)."""
    return [
        pytest.param(range(start, start + n_ci), id="ci"),
        pytest.param(range(start + n_ci, start + n_all), id="more", marks=pytest.mark.slow),
    ]


@pytest.mark.parametrize("seeds", _seeds(8, 25))  # suite time: 8 of 25 seeds in CI
@pytest.mark.parametrize("otype", ORDERING_TYPES, ids=str)
def test_both_engines_give_the_same_rows(otype: pa.DataType, seeds: range) -> None:
    for seed in seeds:
        rng = np.random.default_rng(seed)
        blocks, base = _random_blocks(rng, distinct=False), _base(rng)
        for mode in (EVENT, COMMIT):
            column_wise = _merge(LogRecordBuffer, otype, mode, blocks, base)
            compiled = _merge(CompiledLogRecordBuffer, otype, mode, blocks, base)
            assert compiled == column_wise, (seed, mode, blocks, base)


@pytest.mark.parametrize("seeds", _seeds(35, 100))  # suite time: 35 of 100 seeds in CI
def test_both_engines_give_the_rows_of_the_rule(seeds: range) -> None:
    for seed in seeds:
        rng = np.random.default_rng(seed)
        blocks, base = _random_blocks(rng, distinct=False), _base(rng)
        expected = _model(blocks, base)
        for engine in (LogRecordBuffer, CompiledLogRecordBuffer):
            assert _merge(engine, pa.int64(), EVENT, blocks, base) == expected, (seed, engine)


@pytest.mark.parametrize("seeds", _seeds(5, 15, 1000))  # suite time: 5 of 15 seeds in CI
@pytest.mark.parametrize(
    "otype", [t for t in ORDERING_TYPES if not pa.types.is_boolean(t)], ids=str
)
def test_block_order_does_not_matter_for_distinct_ordering_values(
    otype: pa.DataType, seeds: range
) -> None:
    for seed in seeds:
        rng = np.random.default_rng(seed)
        blocks, base = _random_blocks(rng, distinct=True), _base(rng)
        first = _merge(LogRecordBuffer, otype, EVENT, blocks, base)
        for _ in range(2):
            shuffled = [blocks[i] for i in rng.permutation(len(blocks))]
            for engine in (LogRecordBuffer, CompiledLogRecordBuffer):
                assert _merge(engine, otype, EVENT, shuffled, base) == first, (seed, engine)
