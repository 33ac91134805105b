from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodie_ray import jit
from hoodie_ray.write import base_file


@pytest.mark.parametrize("compiled", [True, False])
def test_commit_seqnos_number_the_rows(monkeypatch, compiled):
    if compiled and not jit.enabled():
        pytest.skip("numba is not importable here (HOODIE_RAY_NO_JIT or missing)")
    monkeypatch.setattr(jit, "loaded", lambda: compiled)
    for start, n in ((0, 1), (0, 25), (7, 1000), (99_995, 10), (9, 2), (999, 3), (10**12, 4)):
        got = base_file.commit_seqnos("20261201050000000_3_", start, n)
        seq = pc.cast(pa.array(np.arange(start, start + n, dtype=np.int64)), pa.string())
        assert got.equals(pc.binary_join_element_wise("20261201050000000_3_", seq, ""))
    assert len(base_file.commit_seqnos("p_", 5, 0)) == 0
