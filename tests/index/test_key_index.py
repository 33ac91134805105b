from __future__ import annotations

import numpy as np
import pyarrow as pa

from hoodie_ray.index import KeyIndex, bucket_ids, java_string_hash


def _java_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_java_string_hash_matches_reference():
    vals = ["", "a", "hello world", "key123456789", "é", "日本", "x" * 300, "\U0001f600"]
    got = java_string_hash(pa.array(vals)).tolist()
    assert got == [_java_hash(v) for v in vals]
    assert java_string_hash(pa.array(["Aa", "BB"])).tolist() == [2112, 2112]  # the famous collision


def test_bucket_ids_in_range():
    b = bucket_ids(pa.array([f"k{i}" for i in range(1000)]), 4)
    assert set(b.tolist()) == {0, 1, 2, 3}


def _java_list_bucket(values: list[str | None], num_buckets: int) -> int:
    """``(List.hashCode() & Integer.MAX_VALUE) % numBuckets`` in Java (a null hashes 0)."""
    h = 1
    for v in values:
        h = (31 * h + (0 if v is None else _java_hash(v))) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % num_buckets


def test_bucket_ids_hash_a_complex_keys_field_values_as_java_does():
    """A complex key ``f1:v1,f2:v2`` buckets by the list of its values
    (``KeyGenUtils.extractRecordKeysByFields``), ``__null__`` as a null and ``__empty__`` as
    an empty string; any other key by itself. The whole key string gave another bucket for 5
    of 12 keys: a Java bucket writer and hoodie_ray put one key in two file groups."""
    keys = [f"id:{i},name:n{i}" for i in range(40)] + [
        "id:7,name:__null__",
        "id:__empty__,name:x,t:ü",
        "plain",
        "a,b",
        "x:1",
    ]
    want = []
    for k in keys:
        if "," in k and ":" in k:
            vals = [kv.split(":", 1)[1] for kv in k.split(",")]
            vals = [None if v == "__null__" else "" if v == "__empty__" else v for v in vals]
        else:
            vals = [k]
        want.append(_java_list_bucket(vals, 8))
    assert bucket_ids(pa.array(keys), 8).tolist() == want


def _run_against_dict(seed: int, rounds: int, key_space: int, batch: int):
    """Random puts (-1 removes) into a KeyIndex and a dict; every lookup agrees after each."""
    rng = np.random.default_rng(seed)
    idx = KeyIndex()
    model: dict[str, int] = {}
    for _ in range(rounds):
        keys = [f"k{x}" for x in rng.integers(0, key_space, batch)]
        locs = rng.integers(-1, 5, batch).astype(np.int32)
        idx.put(pa.array(keys), locs)
        for k, v in zip(keys, locs.tolist(), strict=True):
            if v < 0:
                model.pop(k, None)
            else:
                model[k] = v
        probe = [f"k{x}" for x in range(key_space + 20)]
        assert idx.lookup(pa.array(probe)).tolist() == [model.get(k, -1) for k in probe]
    assert len(idx) == len(model)
    return idx, model


def test_key_index_model():
    _run_against_dict(seed=1, rounds=40, key_space=300, batch=50)


def test_location_ids_interned():
    idx = KeyIndex()
    a = idx.location_ids(
        np.array(["p", "p", "q"], dtype=object), np.array(["f1", "f1", "f2"], dtype=object)
    )
    assert a[0] == a[1] != a[2]
    parts, fids = idx.location_arrays()
    assert parts[a[2]] == "q" and fids[a[2]] == "f2"


def test_key_index_hash_collisions_never_mix_keys(monkeypatch):
    """Keys sharing a 64-bit hash keep their own locations (hits are verified by the keys'
    fingerprints, a second independent hash)."""
    import hoodie_ray.index as index_mod

    real = index_mod.hash_keys
    monkeypatch.setattr(index_mod, "hash_keys", lambda keys: real(keys) % np.uint64(7))
    _run_against_dict(seed=2, rounds=30, key_space=200, batch=40)


def test_hash_keys_mixed_lengths_and_large_strings():
    from hoodie_ray.index import hash_keys

    vals = ["", "a", "ab", "abc" * 30, "é", "a", None]
    h = hash_keys(pa.array(vals))
    assert h[1] == h[5] and len(set(h[:5].tolist())) == 5
    assert (hash_keys(pa.array(vals, pa.large_string())) == h).all()
    assert (hash_keys(pa.chunked_array([vals[:3], vals[3:]])) == h).all()
    assert h[6] == h[0]  # null hashes like ""


def test_compiled_hash_keys_equal_the_numpy_hashes(monkeypatch):
    """The numba kernel and the column-wise numpy hashing give the same 64-bit hashes
    (routing and the indexes depend on them being stable across processes)."""
    import hoodie_ray.index as index_mod
    from hoodie_ray import jit

    if not jit.enabled():
        import pytest

        pytest.skip("numba is not installed here")
    rng = np.random.default_rng(4)
    words = ["", "é", "日本", "x" * 70, "key_1", "a\x00b"]
    vals = [
        None if i % 97 == 0 else words[i % len(words)] + str(int(v))
        for i, v in enumerate(rng.integers(0, 10**12, 3000))
    ]
    for arr in (
        pa.array(vals),
        pa.array(vals, pa.large_string()),
        pa.array(vals).slice(123, 2000),
        pa.chunked_array([vals[:1000], vals[1000:]]),
    ):
        compiled = index_mod.hash_keys(arr)
        with monkeypatch.context() as m:
            m.setattr(index_mod, "_jit_loaded", lambda: False)
            plain = index_mod.hash_keys(arr)
        assert compiled.dtype == plain.dtype == np.uint64
        assert (compiled == plain).all()


def test_ordering_values_follow_their_keys_through_updates_and_merges() -> None:
    import datetime as dt

    from hoodie_ray.index import ORDERING_NULL_INT, ordering_nulls, ordering_numbers

    idx = KeyIndex()
    keys = pa.array([f"k{i}" for i in range(100)])
    idx.put(keys, np.zeros(100, dtype=np.int32))  # no ordering kept yet
    assert not idx.keeps_ordering
    idx.put(pa.array(["k1", "x"]), np.zeros(2, np.int32), ords=np.array([7, 9], np.int64))
    assert idx.keeps_ordering
    for i in range(12):  # many segments: merges must carry the ordering values along
        more = pa.array([f"m{i}_{j}" for j in range(5)])
        idx.put(more, np.ones(5, np.int32), ords=np.full(5, i, np.int64))
    _, seg, pos = idx.probe(pa.array(["k1", "x", "k2", "m3_4", "absent"]))
    got = idx.ordering_at(seg, pos)
    assert got[:2].tolist() == [7, 9] and got[3] == 3
    assert got[2] == ORDERING_NULL_INT and got[4] == ORDERING_NULL_INT
    idx.set_ordering(seg[:1], pos[:1], np.array([11], np.int64))
    _, seg, pos = idx.probe(pa.array(["k1"]))
    assert idx.ordering_at(seg, pos).tolist() == [11]
    # floats widen the store; unknowns stay unknown
    idx.put(pa.array(["f"]), np.zeros(1, np.int32), ords=np.array([2.5]))
    _, seg, pos = idx.probe(pa.array(["f", "k1", "k2"]))
    got = idx.ordering_at(seg, pos)
    assert got[0] == 2.5 and got[1] == 11.0 and ordering_nulls(got).tolist() == [False, False, True]
    ts = pa.array([dt.datetime(2025, 1, 1), None], pa.timestamp("us"))
    assert ordering_numbers(ts)[1] == ORDERING_NULL_INT
    assert ordering_numbers(pa.array(["a", None])).tolist() == ["a", None]
    assert ordering_numbers(pa.array([[1]])) is None  # nested: no ordering kept


def test_nbytes_counts_every_per_key_array():
    idx = KeyIndex()
    assert idx.nbytes() == 0
    n = 10_000
    keys = pa.array([f"key{i:06d}" for i in range(n)])  # 9 bytes a key
    idx.put(keys, np.zeros(n, np.int32), ords=np.arange(n, dtype=np.int64))
    got = idx.nbytes()
    # at least: 8 B hash + 8 B fingerprint + 4 B location + 8 B ordering value a key, plus the
    # table over the hashes; the key bytes are not kept
    assert 28 * n <= got < 80 * n
    idx.put(pa.array([f"new{i}" for i in range(n)]), np.ones(n, np.int32))
    assert len(idx) == 2 * n and idx.nbytes() > got
    s = KeyIndex()  # string ordering values count with their Python objects
    s.put(keys, np.zeros(n, np.int32), ords=np.array([f"v{i}" for i in range(n)], dtype=object))
    assert s.nbytes() > got + 30 * n


def test_compiled_tables_after_warm_up(monkeypatch) -> None:
    """After ``warm_up`` (assigner actors call it) segments use the compiled open-addressing
    tables, with the same answers as the dict model."""
    from hoodie_ray import jit
    from hoodie_ray.index import WARM_UP_ENV, warm_up

    monkeypatch.setenv(WARM_UP_ENV, "1")  # the suite's Ray session turns it off for its actors
    warm_up()
    idx, _ = _run_against_dict(seed=3, rounds=20, key_space=300, batch=50)
    if jit.enabled():
        assert all(s.table._slots is not None for s in idx._segments)
