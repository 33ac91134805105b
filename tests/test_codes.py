from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.codes import encode_strings, factorize_ints


def test_factorize_ints_numbers_values_as_pandas_does():
    rng = np.random.default_rng(3)
    cases = [
        np.zeros(0, np.int64),
        np.array([5], np.int64),
        np.full(300, 7, np.int64),
        rng.integers(0, 3, 500),
        rng.integers(0, 5000, 100),  # a range too wide for the scatter
        rng.integers(-4, 4, 200),  # negatives
        rng.integers(0, 6, 64).astype(np.int32),
        rng.integers(0, 2**40, 50).astype(np.uint64),
    ]
    for values in cases:
        codes, uniq = factorize_ints(values)
        want_codes, want_uniq = pd.factorize(values)
        assert codes.tolist() == want_codes.tolist()
        assert np.asarray(uniq).tolist() == np.asarray(want_uniq).tolist()
        assert codes.dtype == np.int64


def test_encode_strings_is_dictionary_encode():
    cases = [
        pa.array([""] * 40),
        pa.array(["2024/01/01"] * 25),
        pa.array(["a", "b", "a", "c"]),
        pa.array(["ab", "ba", "ab"]),  # one width, two values
        pa.array(["x", None, "x"]),
        pa.array(["p", "q"] * 10).slice(3, 11),
        pa.array(["same"] * 9).slice(2, 5),
        pa.chunked_array([["k", "k"], ["k"]]),
        pa.array([], pa.string()),
        pa.array([b"\x00", b"\x00"], pa.binary()),
        pa.array(["z"] * 4, pa.large_string()),
    ]
    for values in cases:
        got = encode_strings(values)
        arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        want = pc.dictionary_encode(arr)
        assert got.indices.to_pylist() == want.indices.to_pylist()
        assert got.dictionary.to_pylist() == want.dictionary.to_pylist()
        assert got.indices.type == want.indices.type
        assert got.to_pylist() == arr.to_pylist()
