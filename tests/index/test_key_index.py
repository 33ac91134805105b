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


def _java_extract(key: str, fields: list[str]) -> list[str | None] | None:
    """Hudi 1.x ``KeyGenUtils.extractRecordKeysByFields``, step for step as Java scans the key
    (``indexOf`` / ``lastIndexOf``), to check :func:`bucket_ids` against; None where Java's
    scan never ends."""
    if "," not in key or ":" not in key:
        return [key]
    out: list[str | None] = []
    pos, steps = 0, 0
    match_all = not fields or fields == [""]
    while pos < len(key):
        sep1 = key.find(":", pos)
        sep2 = key.find(":", sep1 + 1)
        if match_all or key[pos:sep1] in fields:
            if sep2 < 0:
                value, pos = key[sep1 + 1 :], len(key)
            else:
                comma = key.rfind(",", 0, sep2 + 1)
                while comma < sep1 and sep2 > 0:
                    sep2 = key.find(":", sep2 + 1)
                    comma = key.rfind(",", 0, sep2 + 1) if sep2 >= 0 else -1
                if comma > 0:
                    value, pos = key[sep1 + 1 : comma], comma + 1
                else:
                    value, pos = key[sep1 + 1 :], len(key)
            out.append(None if value == "__null__" else "" if value == "__empty__" else value)
        elif sep2 < 0:
            pos = len(key)
        else:
            comma = key.rfind(",", 0, sep2 + 1)
            while comma < sep1:
                steps += 1
                if steps > 4 * len(key):
                    return None  # Java cycles through the key's ':' forever
                sep2 = key.find(":", sep2 + 1)  # from -1: from the start again, as Java
                comma = key.rfind(",", 0, sep2 + 1) if sep2 >= 0 else -1
            pos = len(key) if comma < 0 else comma + 1
    return out or [key]


# (key, record key fields, what Java hashes: worked out by hand from its rules)
_JAVA_CASES: list[tuple[str, list[str], list[str | None]]] = [
    # a complex key's value with a comma: the value ends at the last ',' before the next ':'
    ("name:Smith, John,n:1", ["name", "n"], ["Smith, John", "1"]),
    ("a:x,y,b:v", ["a", "b"], ["x,y", "v"]),
    ("id1:1,id2:2,2,id3:3", ["id2"], ["2,2"]),  # Java's own TestKeyGenUtils cases
    ("id1:1,1,1,id2:,2,2,,id3:3", ["id2"], [",2,2,"]),
    ("a:1,b:x,", ["a", "b"], ["1", "x,"]),  # no ':' after the last ',': to the end
    # values with ':' (timestamps)
    ("a:2014-10-22 13:50:42,b:v3", ["a", "b"], ["2014-10-22 13:50:42", "v3"]),
    ("a:1,b:10:00", ["a", "b"], ["1", "10:00"]),
    ("a:10:00:01,b:1", ["b"], ["1"]),
    # a simple key holding ',' and ':': no pair of a key field, the whole key
    ("host:80,backup", ["id"], ["host:80,backup"]),
    ("10:00,11:00", ["slot"], ["10:00,11:00"]),
    ("f:1,g", ["id"], ["f:1,g"]),
    # fields not among the key fields are skipped
    ("a:1,b:2,c:3", ["a", "c"], ["1", "3"]),
    ("x:1,y:2", ["a"], ["x:1,y:2"]),
    ("name:Doe, J,n:2", ["n"], ["2"]),
    # placeholders: a null and an empty string; a key without both ',' and ':' is itself
    ("a:__null__,b:__empty__", ["a", "b"], [None, ""]),
    ("__null__", ["a"], ["__null__"]),
    ("id:5", ["id"], ["id:5"]),
    ("k:ü,l:日本", ["k", "l"], ["ü", "日本"]),
]


def test_java_extract_reference_matches_the_hand_worked_cases():
    for key, fields, want in _JAVA_CASES:
        assert _java_extract(key, fields) == want, key


def test_bucket_ids_extract_values_as_java_does():
    """Java's BucketIdentifier hashes ``extractRecordKeysByFields(key, keyFields)``: a value
    runs to the last ',' before the next ':', only the key fields' pairs count, and a key
    with no pair of a key field hashes whole. The values were split at every ',' and every
    field kept (a bucket Java would not pick), and a piece without ':' (``host:80,backup``,
    ``Smith, John``) raised ArrowInvalid."""
    for n in (4, 16, 1000):
        for key, fields, want in _JAVA_CASES:
            got = bucket_ids(pa.array([key]), n, fields).tolist()
            assert got == [_java_list_bucket(want, n)], key
        # one batch by record key fields: fast and slow rows mixed keep their order
        by_fields: dict[tuple[str, ...], list[int]] = {}
        for i, (_, fields, _) in enumerate(_JAVA_CASES):
            by_fields.setdefault(tuple(fields), []).append(i)
        for fields_t, idx in by_fields.items():
            keys = pa.array([_JAVA_CASES[i][0] for i in idx] * 3)
            want_b = [_java_list_bucket(_JAVA_CASES[i][2], n) for i in idx] * 3
            assert bucket_ids(keys, n, list(fields_t)).tolist() == want_b


def test_bucket_ids_end_where_javas_scan_never_does():
    """Past a field that is not a key field, Java looks for the ',' before a later ':'; where
    there is none (the key's last field, skipped, holds a second ':') it cycles forever.
    Here the scan ends there: the values before it count."""
    assert _java_extract("a:1,t:10:00", ["a"]) is None
    assert bucket_ids(pa.array(["a:1,t:10:00"]), 16, ["a"]).tolist() == [
        _java_list_bucket(["1"], 16)
    ]
    assert bucket_ids(pa.array(["a:1,b:2,t:10:00,x"]), 16, ["a", "b"]).tolist() == [
        _java_list_bucket(["1", "2"], 16)
    ]


def test_bucket_ids_match_java_on_random_keys():
    """Keys made of ``,``, ``:``, field names and letters (in one batch: column-wise and
    one-by-one rows mixed) bucket as the step-for-step reference of Java's scan."""
    rng = np.random.default_rng(7)
    alphabet = ["a", "b", "x", ",", ":", "é", "__null__", "__empty__", "a:", ",b:", ",x:"]
    keys: list[str] = []
    while len(keys) < 3000:
        k = "".join(rng.choice(alphabet, int(rng.integers(1, 10))).tolist())
        if "," not in k or ":" not in k or rng.random() < 0.3:
            k = f"a:{k},b:{rng.integers(100)}" if rng.random() < 0.5 else k
        keys.append(k)
    keys += [f"a:{i},b:v{i}" for i in range(2000)]  # the common shape
    for fields in ([], ["a"], ["a", "b"], ["b", "x"]):
        want = [_java_extract(k, fields) for k in keys]
        ok = [i for i, w in enumerate(want) if w is not None]
        got = bucket_ids(pa.array([keys[i] for i in ok]), 97, fields).tolist()
        assert got == [_java_list_bucket(want[i], 97) for i in ok]  # type: ignore[arg-type]


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
