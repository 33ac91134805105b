"""Space-filling-curve layouts (compaction/layout.py) against plain scalar references of
Hudi's rules: the 8-byte z-order values per type, the bit interleaving, and a Hilbert index
that is a Hilbert curve (consecutive indices are neighbouring cells)."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import random
import struct

import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.compaction.layout import (
    hilbert_long,
    hilbert_transpose,
    interleave,
    layout_order,
    zorder_key,
)
from hoodie_ray.exceptions import HoodieUnsupportedError


# -- scalar references, written from Hudi's BinaryUtil rules -----------------------------------
def ref_z_long(v: int | None) -> int:
    v = (1 << 63) - 1 if v is None else v
    return int.from_bytes(struct.pack(">q", v), "big") ^ (1 << 63)


def ref_z_int(v: int | None) -> int:
    v = (1 << 31) - 1 if v is None else v
    return int.from_bytes(struct.pack(">i", v), "big") ^ (1 << 31)  # left-padded: low 4 bytes


def ref_z_double(v: float | None) -> int:
    v = float(np.finfo(np.float64).max) if v is None else v
    b = bytearray(struct.pack(">d", v))
    if v > 0:
        b[0] ^= 0x80
    elif v < 0:
        b = bytearray(x ^ 0xFF for x in b)
    return int.from_bytes(bytes(b), "big")


def ref_z_string(v: str | None) -> int:
    raw = (v or "").encode()[:8]
    return int.from_bytes(b"\0" * (8 - len(raw)) + raw, "big")


def ref_interleave(values: list[int], bits: int) -> int:
    out = 0
    for s in range(bits):
        for v in values:
            out = (out << 1) | ((v >> (bits - 1 - s)) & 1)
    return out


def _words_to_int(words: list[np.ndarray], row: int, total_bits: int) -> int:
    n = 0
    for w in words:
        n = (n << 64) | int(w[row])
    return n >> (64 * len(words) - total_bits)


# -- z-order -----------------------------------------------------------------------------------
def test_zorder_bytes_per_type_follow_hudis_rules():
    longs = [0, 1, -1, 42, -(1 << 63), (1 << 63) - 1, None]
    got = zorder_key(pa.array(longs, pa.int64()))
    assert [int(x) for x in got] == [ref_z_long(v) for v in longs]
    ints = [0, 7, -7, -(1 << 31), None]
    got = zorder_key(pa.array(ints, pa.int32()))
    assert [int(x) for x in got] == [ref_z_int(v) for v in ints]
    doubles = [0.0, 1.5, -1.5, 1e300, -1e-300, None]
    got = zorder_key(pa.array(doubles, pa.float64()))
    assert [int(x) for x in got] == [ref_z_double(v) for v in doubles]
    strings = ["", "a", "b", "aa", "abcdefghij", "été", None]
    got = zorder_key(pa.array(strings, pa.string()))
    assert [int(x) for x in got] == [ref_z_string(v) for v in strings]
    assert ref_z_string("b") < ref_z_string("aa")  # Hudi's right-aligned padding
    bools = zorder_key(pa.array([True, False, None]))
    assert [int(x) for x in bools] == [ref_z_int(1), ref_z_int(0), ref_z_int(0)]
    day = dt.date(2024, 3, 1)
    ms = (day - dt.date(1970, 1, 1)).days * 86_400_000
    assert int(zorder_key(pa.array([day]))[0]) == ref_z_long(ms)
    ts = dt.datetime(1969, 12, 31, 23, 59, 59, 999_500)  # floor to ms: -1
    assert int(zorder_key(pa.array([ts], pa.timestamp("us")))[0]) == ref_z_long(-1)
    dec = pa.array([decimal.Decimal("-12.70"), None], pa.decimal128(10, 2))
    assert [int(x) for x in zorder_key(dec)] == [ref_z_long(-12), ref_z_long(None)]


def test_zorder_keys_order_like_the_values_for_each_type():
    rng = random.Random(5)
    vals = [rng.randint(-(10**12), 10**12) for _ in range(200)]
    keys = zorder_key(pa.array(vals, pa.int64()))
    assert [vals[i] for i in np.argsort(keys, kind="stable")] == sorted(vals)
    dvals = [rng.uniform(-1e6, 1e6) for _ in range(200)]
    keys = zorder_key(pa.array(dvals))
    assert [dvals[i] for i in np.argsort(keys, kind="stable")] == sorted(dvals)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_interleave_matches_the_bit_by_bit_reference(k):
    rng = np.random.default_rng(k)
    vals = [rng.integers(0, 2**63, 50, dtype=np.uint64) * 2 + 1 for _ in range(k)]
    for bits in (64, 63):
        words = interleave(vals, bits)
        for row in range(50):
            masked = [int(v[row]) & ((1 << bits) - 1) for v in vals]
            assert _words_to_int(words, row, bits * k) == ref_interleave(masked, bits)


def test_zorder_layout_orders_rows_by_the_interleaved_key_in_schema_order():
    rng = random.Random(9)
    t = pa.table(
        {
            "a": pa.array([rng.randint(-50, 50) for _ in range(300)], pa.int64()),
            "s": pa.array([rng.choice(["x", "yy", "zzz", None]) for _ in range(300)]),
            "d": pa.array([rng.uniform(-5, 5) for _ in range(300)]),
        }
    )
    # listed as d, a: interleaved in schema order a, d (Hudi keys its columns by position)
    order = layout_order(t, ["d", "a"], "z-order")
    rows = t.to_pylist()

    def key(r: dict) -> int:
        return ref_interleave([ref_z_long(r["a"]), ref_z_double(r["d"])], 64)

    expected = sorted(range(300), key=lambda i: key(rows[i]))
    assert [key(rows[i]) for i in order] == [key(rows[i]) for i in expected]
    assert sorted(order.tolist()) == list(range(300))


# -- hilbert -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("dims", "bits"), [(2, 3), (2, 4), (3, 2), (4, 2)])
def test_hilbert_index_walks_a_hilbert_curve(dims, bits):
    """Every cell once, and each step of the index moves to a neighbouring cell."""
    cells = np.array(list(itertools.product(range(1 << bits), repeat=dims)), dtype=np.uint64)
    coords = [cells[:, d].copy() for d in range(dims)]
    words = interleave(hilbert_transpose(coords, bits), bits)
    index = [_words_to_int(words, r, bits * dims) for r in range(len(cells))]
    assert sorted(index) == list(range(len(cells)))
    path = cells[np.argsort(index)].astype(np.int64)
    steps = np.abs(np.diff(path, axis=0)).sum(axis=1)
    assert (steps == 1).all()
    assert path[0].tolist() == [0] * dims  # the curve starts at the origin


def test_hilbert_longs_per_type():
    assert hilbert_long(pa.array([5, -1, None], pa.int32())).tolist() == [5, -1, (1 << 63) - 1]
    assert hilbert_long(pa.array([-1, None], pa.int8())).tolist() == [255, (1 << 63) - 1]
    assert hilbert_long(pa.array([True, False, None])).tolist() == [(1 << 63) - 1, 0, 0]
    bits = struct.unpack(">q", struct.pack(">d", -2.5))[0]
    assert hilbert_long(pa.array([-2.5, None])).tolist() == [bits, (1 << 63) - 1]
    assert hilbert_long(pa.array(["ab", None])).tolist() == [0x6162, (1 << 63) - 1]


def test_hilbert_layout_keeps_every_row_and_clusters_neighbours():
    rng = np.random.default_rng(3)
    n = 4096
    t = pa.table({"x": rng.integers(0, 1 << 20, n), "y": rng.integers(0, 1 << 20, n)})
    order = layout_order(t, ["x", "y"], "hilbert")
    assert sorted(order.tolist()) == list(range(n))
    # a curve keeps neighbours together: the rows of each eighth span a fraction of the plane
    xy = np.stack([t.column("x").to_numpy(), t.column("y").to_numpy()], axis=1)[order]
    area = [np.ptp(c[:, 0]) * np.ptp(c[:, 1]) for c in np.array_split(xy, 8)]
    assert max(area) < 0.5 * float(1 << 40)


def test_single_column_and_unknown_types():
    t = pa.table({"a": [3, 1, 2], "m": pa.array([{"k": 1}] * 3)})
    assert layout_order(t, ["a"], "z-order").tolist() == [1, 2, 0]
    with pytest.raises(HoodieUnsupportedError, match="struct"):
        layout_order(t, ["a", "m"], "hilbert")


def test_columns_a_layout_cannot_order_are_refused_before_anything_runs():
    from hoodie_ray.compaction.layout import check_layout_columns

    schema = pa.schema(
        [("a", pa.int64()), ("s", pa.string()), ("m", pa.struct([("k", pa.int32())]))]
    )
    check_layout_columns(schema, ["a", "s"], "z-order")
    check_layout_columns(schema, ["m"], "hilbert")  # one column: sorted linearly
    with pytest.raises(HoodieUnsupportedError, match="'m' of type struct"):
        check_layout_columns(schema, ["a", "m"], "hilbert")
    with pytest.raises(HoodieUnsupportedError, match="'nope' is not a column"):
        check_layout_columns(schema, ["a", "nope"], "z-order")
    with pytest.raises(HoodieUnsupportedError, match="spiral"):
        check_layout_columns(schema, ["a", "s"], "spiral")
    # sorted linearly (one column, or the linear strategy): a type Arrow cannot sort is
    # refused here too (it was a raw ArrowTypeError in the tasks, the clustering scheduled)
    unsortable = {
        "l": pa.list_(pa.int32()),
        "mp": pa.map_(pa.string(), pa.int32()),
    }
    for name, t in unsortable.items():
        wider = schema.append(pa.field(name, t))
        for columns, strategy in [([name], "z-order"), (["a", name], "linear")]:
            with pytest.raises(
                HoodieUnsupportedError, match=f"'{name}' of type .* cannot be sorted"
            ):
                check_layout_columns(wider, columns, strategy)
