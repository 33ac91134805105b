"""The compiled log buffer gives exactly the column-wise buffer's results.

Randomised folds (data and delete blocks, deletes of every kind, null and NaN ordering values,
duplicate keys, keys longer than a table slot holds, forced hash collisions, blocks whose other
columns load later), then the slice reader on the merge scenarios with either buffer forced.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import hoodie_ray.index as index_mod
import hoodie_ray.reader.compiled_merger as cm
import hoodie_ray.reader.file_slice_reader as fsr
from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.reader import read_table
from hoodie_ray.reader.compiled_merger import (
    CompiledLogRecordBuffer,
    compiled_ordering_supported,
    new_log_record_buffer,
    ord_keys,
)
from hoodie_ray.reader.file_slice_reader import delete_ordering_values
from hoodie_ray.reader.merger import RECORD_KEY, DeleteMarker, LogRecordBuffer
from tests.reader.test_merge_semantics import SCENARIOS, scenario_builder
from tests.reliability.common import FULL

pytestmark = pytest.mark.usefixtures("needs_numba")

EVENT = MergeMode.EVENT_TIME_ORDERING
COMMIT = MergeMode.COMMIT_TIME_ORDERING
ORDERING_TYPES = [
    pa.int64(),
    pa.int32(),
    pa.int8(),
    pa.uint32(),
    pa.bool_(),
    pa.float64(),
    pa.float32(),
    pa.timestamp("us", tz="UTC"),
    pa.date32(),
    pa.time64("us"),
    pa.duration("s"),
]


# -- randomised folds ------------------------------------------------------------------------------

_FLOATS = {-2: float("nan"), -1: -0.0, 3: -1.5, 4: -1e30}


def _ordering(values: list[int | None], t: pa.DataType) -> pa.Array:
    """Small ints as values of ``t`` (floats: NaN, -0.0 and negatives among them)."""
    if pa.types.is_floating(t):
        f = [None if v is None else _FLOATS.get(v, float(v)) for v in values]
        return pa.array(f, pa.float64()).cast(t)
    if pa.types.is_boolean(t):
        return pa.array([None if v is None else v > 1 for v in values], t)
    if pa.types.is_unsigned_integer(t):
        return pa.array([None if v is None else v + 2 for v in values], t)
    if pa.types.is_date32(t):
        return pa.array(values, pa.int32()).view(t)
    if pa.types.is_time64(t) or pa.types.is_duration(t):
        return pa.array([None if v is None else abs(v) for v in values], pa.int64()).view(t)
    return pa.array(values, pa.int64()).cast(t)


def _run(seed: int, *, big: bool = False, hot: bool = False) -> list[Any]:
    """Fold random blocks into the column-wise buffer, the compiled one, and the compiled one
    fed only the merge columns first; their outputs (sorted) and sizes."""
    rng = np.random.default_rng(seed)
    otype = ORDERING_TYPES[int(rng.integers(len(ORDERING_TYPES)))]
    mode = EVENT if rng.random() < 0.5 else COMMIT
    of = None if rng.random() < 0.15 else "ts"
    schema = pa.schema(
        [
            (RECORD_KEY, pa.string()),
            ("ts", otype),
            ("v", pa.int64()),
            ("_hoodie_is_deleted", pa.bool_()),
        ]
    )
    nk = int(rng.integers(1, 30 if hot else 3000 if big else 60))
    pool = [
        "k" * int(rng.integers(1, 3))
        + str(i)
        + ("x" * int(rng.integers(0, 25)) if rng.random() < 0.3 else "")
        for i in range(nk)
    ]
    bufs: list[LogRecordBuffer | CompiledLogRecordBuffer] = [
        LogRecordBuffer(schema, of, mode),
        CompiledLogRecordBuffer(schema, of, mode),
        CompiledLogRecordBuffer(schema, of, mode),
    ]
    counter = 0
    for _ in range(int(rng.integers(0, 12 if hot else 8))):
        n = int(rng.integers(0, 5000 if big or hot else 40))
        keys = [pool[i] for i in rng.integers(0, nk, n)]
        if rng.random() < 0.7:
            ts = [None if rng.random() < 0.1 else int(x) for x in rng.integers(-2, 5, n)]
            t = pa.table(
                {
                    RECORD_KEY: pa.array(keys, pa.string()),
                    "ts": _ordering(ts, otype),
                    "v": pa.array(np.arange(counter, counter + n)),
                    "_hoodie_is_deleted": pa.array(rng.random(n) < 0.2),
                },
                schema=schema,
            )
            counter += n
            mask = DeleteMarker().mask(t)
            bufs[0].add_data_block(t, mask)
            bufs[1].add_data_block(t, mask)
            head = t.select([RECORD_KEY, "ts", "_hoodie_is_deleted"])
            rest = functools.partial(t.select, ["v"])
            assert isinstance(bufs[2], CompiledLogRecordBuffer)
            bufs[2].add_data_block(head, mask, rest=rest)
        else:
            kinds = [[None, "int", "long", "string"][int(rng.integers(4))] for _ in range(n)]
            low = 0 if pa.types.is_unsigned_integer(otype) else -1
            vals = [
                None if k is None else (int(rng.integers(low, 4)) if k in ("int", "long") else "z")
                for k in kinds
            ]
            if of is not None:
                ordering, default, foreign = delete_ordering_values(kinds, vals, otype)
            else:
                ordering = None
                default = np.array([k is None for k in kinds], dtype=bool)
                foreign = np.zeros(n, dtype=bool)
            for b in bufs:
                b.add_delete_block(pa.array(keys, pa.string()), None, ordering, default, foreign)
    base_keys = [pool[i] for i in rng.permutation(nk)[: int(rng.integers(0, nk + 1))]]
    base_ts = [None if rng.random() < 0.1 else int(x) for x in rng.integers(-1, 5, len(base_keys))]
    base = pa.table(
        {
            RECORD_KEY: pa.array(base_keys, pa.string()),
            "ts": _ordering(base_ts, otype),
            "v": pa.array(np.arange(len(base_keys)) - 10_000),
            "_hoodie_is_deleted": pa.array(np.zeros(len(base_keys), dtype=bool)),
        },
        schema=schema,
    )
    use_base = rng.random() < 0.8
    out = []
    for b in bufs:
        parts = [b.merge_base(base) if use_base and not b.is_empty else base, b.remaining()]
        t = pa.concat_tables(parts)
        out.append(
            (
                sorted(map(str, t.to_pylist())),
                len(b),
                b.num_log_records,
                sorted(b.live_keys().to_pylist()),
            )
        )
    return out


@pytest.fixture
def colliding_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five hash values in all, in either buffer: distinct keys share hashes all the time."""
    real = index_mod.hash_keys
    monkeypatch.setattr(index_mod, "hash_keys", lambda keys: real(keys) % np.uint64(5))
    real_arrays = cm._key_arrays

    def colliding(keys: pa.Array, kernels: Any = None) -> cm._KeyArrays:
        k = real_arrays(keys, kernels)
        return k._replace(hashes=k.hashes % np.uint64(5))

    monkeypatch.setattr(cm, "_key_arrays", colliding)


def _check(seed: int, *, big: bool = False, hot: bool = False) -> None:
    column_wise, compiled, split = _run(seed, big=big, hot=hot)
    assert compiled == column_wise, f"seed {seed}"
    assert split == column_wise, f"seed {seed} (merge columns first)"


@pytest.mark.parametrize(
    "chunk",
    # suite time: seeds 0-74 in CI (was 0-149), the other 525 of the 600 under -m slow
    [0, *(pytest.param(c, marks=pytest.mark.slow) for c in range(1, 8))],
)
def test_random_folds_match_the_column_wise_buffer(chunk: int) -> None:
    for seed in range(chunk * 75, (chunk + 1) * 75):
        _check(seed)


@pytest.mark.parametrize(
    "seeds",
    [
        # suite time: the first 10 of the 25 seeds compact in 6 of them (14 compactions), and
        # grow the table; the other 15 run under -m slow
        pytest.param(range(10_000, 10_010), id="ci"),
        pytest.param(range(10_010, 10_025), id="more", marks=pytest.mark.slow),
    ],
)
def test_large_random_folds_compact_and_grow_the_table(seeds: range) -> None:
    for seed in seeds:
        _check(seed, big=True)


@pytest.mark.slow  # suite time: the random folds above cover the same merge in CI
def test_hot_keys_compact_blocks_held_by_their_merge_columns() -> None:
    compactions = {"n": 0}
    real = CompiledLogRecordBuffer._compact

    def counting(self: CompiledLogRecordBuffer) -> None:
        compactions["n"] += any(p.rest is not None for p in self._pieces)
        real(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CompiledLogRecordBuffer, "_compact", counting)
        for seed in range(15):
            _check(40_000 + seed, hot=True)
    assert compactions["n"] >= 5


@pytest.mark.usefixtures("colliding_hashes")
@pytest.mark.parametrize(
    ("seeds", "big_seeds"),
    [
        # suite time: half the folds in CI, the other half under -m slow (HOODIE_RAY_FULL=1
        # runs twice the folds)
        pytest.param(range(20_000, 20_050), range(30_000, 30_002), id="ci"),
        pytest.param(
            range(20_050, 20_000 + (200 if FULL else 100)),
            range(30_002, 30_000 + (8 if FULL else 4)),
            id="more",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_random_folds_with_colliding_hashes(seeds: range, big_seeds: range) -> None:
    for seed in seeds:
        _check(seed)
    for seed in big_seeds:
        _check(seed, big=True)


# -- pieces ----------------------------------------------------------------------------------------


def test_a_block_fed_merge_columns_first_loads_the_others_once_at_output() -> None:
    schema = pa.schema([(RECORD_KEY, pa.string()), ("ts", pa.int64()), ("v", pa.string())])
    buf = CompiledLogRecordBuffer(schema, "ts", EVENT)
    loads = {"n": 0}

    def block(keys: list[str], ts: list[int], v: list[str]) -> None:
        t = pa.table({RECORD_KEY: keys, "ts": ts, "v": v}, schema=schema)

        def rest() -> pa.Table:
            loads["n"] += 1
            return t.select(["v"])

        buf.add_data_block(t.select([RECORD_KEY, "ts"]), rest=rest)

    block(["a", "b", "c"], [1, 1, 1], ["a1", "b1", "c1"])
    block(["a", "b"], [2, 0], ["a2", "b2"])
    assert loads["n"] == 0
    batches = list(buf.remaining_batches())
    assert loads["n"] == 2
    out = pa.concat_tables(batches)
    assert out.schema == schema
    assert sorted(out.to_pylist(), key=lambda r: r[RECORD_KEY]) == [
        {RECORD_KEY: "a", "ts": 2, "v": "a2"},
        {RECORD_KEY: "b", "ts": 1, "v": "b1"},
        {RECORD_KEY: "c", "ts": 1, "v": "c1"},
    ]


def test_remaining_batches_gather_whole_blocks() -> None:
    schema = pa.schema([(RECORD_KEY, pa.string()), ("ts", pa.int64())])
    buf = CompiledLogRecordBuffer(schema, "ts", EVENT)
    for b in range(5):
        keys = [f"{b}-{i}" for i in range(100)]
        buf.add_data_block(pa.table({RECORD_KEY: keys, "ts": [b] * 100}, schema=schema))
    sizes = [t.num_rows for t in buf.remaining_batches(max_rows=250)]
    assert sizes == [300, 200]


# -- ordering keys ---------------------------------------------------------------------------------


def test_float_ordering_keys_order_like_the_values() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [
            rng.normal(0, 1e6, 2000),
            [0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 1.0, -1.0, np.nan],
        ]
    )
    keys, bits = ord_keys(pa.array(values), "float")
    ok = ~np.isnan(values)
    v, k = values[ok], keys[ok]
    i, j = rng.integers(0, len(v), (2, 20_000))
    assert np.array_equal(v[i] >= v[j], k[i] >= k[j])
    assert bits[-1] != 0 and not bits[:-1].any()
    assert keys[values == 0.0].tolist() == [0, 0]


def test_supported_ordering_types() -> None:
    for t in ORDERING_TYPES:
        schema = pa.schema([(RECORD_KEY, pa.string()), ("ts", t)])
        assert compiled_ordering_supported(schema, "ts")
    for t in (pa.string(), pa.binary(), pa.decimal128(10, 2), pa.uint64(), pa.float16()):
        schema = pa.schema([(RECORD_KEY, pa.string()), ("ts", t)])
        assert not compiled_ordering_supported(schema, "ts")
        buf = new_log_record_buffer(schema, "ts", EVENT, compiled=True)
        assert isinstance(buf, LogRecordBuffer)
    assert compiled_ordering_supported(pa.schema([(RECORD_KEY, pa.string())]), None)


# -- the slice reader with either buffer -----------------------------------------------------------


@pytest.fixture
def force_buffer(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def force(compiled: bool) -> None:
        monkeypatch.setattr(
            fsr,
            "new_log_record_buffer",
            functools.partial(new_log_record_buffer, compiled=compiled),
        )

    yield force


def _rows(t: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in t.to_pylist())


@pytest.mark.parametrize(
    ("fmt", "version"),
    [
        # suite time: each scenario and mode in CI with both block formats and both table
        # versions (avro-6, parquet-8); the other two pairs under -m slow
        ("avro", 6),
        ("parquet", 8),
        pytest.param("parquet", 6, marks=pytest.mark.slow),
        pytest.param("avro", 8, marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("mode", ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_slice_reads_match_across_buffers(
    tmp_path: Path, force_buffer: Any, name: str, mode: str, fmt: str, version: int
) -> None:
    b = scenario_builder(tmp_path / "t", name, version=version, merge_mode=mode)
    SCENARIOS[name](b, fmt)
    root = str(b.root)
    reads = []
    for compiled in (False, True):
        force_buffer(compiled)
        snapshot = read_table(root)
        commits = b.timeline.reload().completed_commits()
        travel = [read_table(root, as_of=i.timestamp) for i in commits]
        reads.append([_rows(snapshot)] + [_rows(t) for t in travel])
    assert reads[1] == reads[0]


def test_long_keys_hash_as_the_key_index_hashes_them() -> None:
    """The merge's hash of a key longer than a word is the key index's (one finish rule)."""
    from hoodie_ray.reader import _jit

    keys = pa.array(["", "a", "12345678", "123456789", "rider-000000042", "k" * 40])
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8)
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32)[: len(keys) + 1]
    starts, lens = offsets[:-1].astype(np.int64), np.diff(offsets).astype(np.int64)
    hashes = np.zeros(len(keys), dtype=np.uint64)
    words = np.zeros(len(keys), dtype=np.uint64)
    _jit.key_hashes(data, starts, lens, hashes, words)
    long = lens > 8
    assert long.sum() == 3
    assert (hashes[long] == index_mod.hash_keys(keys)[long]).all()
