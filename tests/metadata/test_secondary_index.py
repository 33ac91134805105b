"""Secondary-index keys and upkeep column-wise (metadata/secondary_index.py): the same keys and
the same added / removed entries as the per-key Python rules they replace (kept here as the
model)."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from hoodie_ray.exceptions import HoodieUnsupportedError
from hoodie_ray.metadata.secondary_index import (
    escape_key_part,
    escape_key_parts,
    java_string_array,
    java_strings,
    secondary_index_changes,
    secondary_index_key,
    secondary_index_keys,
)

_ALPHABET = "ab$\\\x00é€😀"


def _strings(rng: random.Random, n: int, nulls: bool = True) -> list[str | None]:
    out: list[str | None] = []
    for _ in range(n):
        if nulls and rng.random() < 0.1:
            out.append(None)
        else:
            out.append("".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 5))))
    return out


def test_keys_are_escaped_as_the_per_key_rule_does() -> None:
    rng = random.Random(3)
    values, keys = _strings(rng, 500), _strings(rng, 500, nulls=False)
    assert escape_key_parts(pa.array(values)).to_pylist() == [escape_key_part(v) for v in values]
    got = secondary_index_keys(pa.array(values), pa.chunked_array([pa.array(keys)]))
    assert got.to_pylist() == [secondary_index_key(v, k) for v, k in zip(values, keys, strict=True)]
    # strings with nothing to escape skip the passes; a slice sees only its own bytes
    clean = ["plain", "é€😀", "", None, "a$b"]
    for arr in (pa.array(clean[:3]), pa.array(clean[:4]), pa.array(clean).slice(1, 2)):
        want = [escape_key_part(v) for v in arr.to_pylist()]
        assert escape_key_parts(arr).to_pylist() == want
    assert escape_key_parts(pa.array(clean).slice(4)).to_pylist() == ["a\\$b"]


def _model(old: dict[str, str | None], new: dict[str, str | None]) -> tuple[set[str], set[str]]:
    """The per-key comparison the column-wise one replaced."""
    put: set[str] = set()
    gone: set[str] = set()
    for rk, v in new.items():
        if rk in old and old[rk] == v:
            continue
        if rk in old:
            gone.add(secondary_index_key(old[rk], rk))
        put.add(secondary_index_key(v, rk))
    for rk, v in old.items():
        if rk not in new:
            gone.add(secondary_index_key(v, rk))
    return put, gone - put


def _table(d: dict[str, str | None]) -> pa.Table:
    return pa.table({"key": pa.array(list(d), pa.string()), "value": pa.array(list(d.values()))})


@pytest.mark.parametrize("seed", range(6))
def test_changes_are_the_per_key_comparisons(seed: int) -> None:
    """Keys kept, changed (to and from null), new and gone; a value moved from one key to
    another; empty sides; the same entries added and removed as the per-key model."""
    rng = random.Random(seed)
    pool = _strings(rng, 300, nulls=False)
    vals = ["x", "y", "$", "\\", None, "é"]
    old = {k: rng.choice(vals) for k in rng.sample(pool, rng.randint(0, 120))}  # type: ignore[arg-type]
    new = {k: rng.choice(vals) for k in rng.sample(pool, rng.randint(0, 120))}  # type: ignore[arg-type]
    for k in list(old)[:20]:
        new[k] = old[k]  # kept as they are
    added, removed = secondary_index_changes(_table(old), _table(new))
    want_put, want_gone = _model(old, new)
    assert len(added) == len(set(added.to_pylist())) and set(added.to_pylist()) == want_put
    assert sorted(removed.to_pylist()) == sorted(want_gone)


def test_no_change_and_empty_sides() -> None:
    same = {"a": "1", "b": None}
    added, removed = secondary_index_changes(_table(same), _table(same))
    assert len(added) == len(removed) == 0
    added, removed = secondary_index_changes(_table({}), _table(same))
    assert sorted(added.to_pylist()) == ["\x00$b", "1$a"] and len(removed) == 0
    added, removed = secondary_index_changes(_table(same), _table({}))
    assert len(added) == 0 and sorted(removed.to_pylist()) == ["\x00$b", "1$a"]


@pytest.mark.parametrize(
    "values",
    [
        pa.array(["a", None, "$b"]),
        pa.array(["a", "b", "a"]).dictionary_encode(),
        pa.array([1, None, -7], pa.int8()),
        pa.array([2**40, None], pa.int64()),
        pa.array([True, None, False]),
        pa.array([dt.date(2024, 1, 2), None], pa.date32()),
        pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 6789), None], pa.timestamp("ms")),
        pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 6789), None], pa.timestamp("us", "UTC")),
        pa.array([Decimal("1.50"), None], pa.decimal128(5, 2)),
        pa.array([0.1, -0.0, None, 1e21, float("nan")], pa.float64()),
        pa.array([0.1, None], pa.float32()),
        pa.chunked_array([pa.array([1, 2]), pa.array([3])]),
        pa.chunked_array([], pa.int32()),
    ],
)
def test_java_string_array_is_java_strings(values: pa.Array | pa.ChunkedArray) -> None:
    got = java_string_array(values, "f")
    assert got.type == pa.large_string()
    assert got.to_pylist() == java_strings(values, "f")


def test_java_string_array_refuses_types_naming_the_field() -> None:
    with pytest.raises(HoodieUnsupportedError, match="'blob'"):
        java_string_array(pa.array([b"x"]), "blob")
