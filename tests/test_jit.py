"""jit.drop_stale_kernels: a cached kernel that compiles in code from another file is compiled
afresh when that file changes (numba checks the kernel's own file only)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

KERNEL = """
import numba

import rule_source
from hoodie_ray.jit import drop_stale_kernels

rule = numba.njit(inline="always")(rule_source.rule)


@numba.njit(cache=True)
def kernel(x):
    return rule(x)


if GUARDED:
    drop_stale_kernels(kernel, [rule_source.__file__])
"""


def _kernel_result(tmp_path: Path, module: str) -> int:
    for name in (module, "rule_source"):
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return int(importlib.import_module(module).kernel(1))


@pytest.mark.parametrize("guarded", [True, False])
def test_a_changed_source_file_recompiles_the_kernels_that_inline_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guarded: bool
) -> None:
    pytest.importorskip("numba")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = f"kernel_{'guarded' if guarded else 'bare'}"
    (tmp_path / f"{module}.py").write_text(KERNEL.replace("GUARDED", str(guarded)))
    (tmp_path / "rule_source.py").write_text("def rule(x):\n    return x + 1\n")
    assert _kernel_result(tmp_path, module) == 2  # compiled and cached
    (tmp_path / "rule_source.py").write_text("def rule(x):\n    return x + 100\n")
    # without the guard numba loads the stale machine code: what the guard is for
    assert _kernel_result(tmp_path, module) == (101 if guarded else 2)
    assert _kernel_result(tmp_path, module) == (101 if guarded else 2)  # and caches it
    for name in (module, "rule_source"):
        sys.modules.pop(name, None)


def test_key_kernels_see_one_array_type_whatever_the_bytes_came_from():
    """Keys over a mutable buffer (built here) and over an immutable one (what Ray's object
    store gives an actor) reach the key-hash and bloom-filter kernels as one array type: an
    actor loads each kernel once, at its warm-up, never again in its first batch."""
    pytest.importorskip("numba")
    import numpy as np
    import pyarrow as pa

    from hoodie_ray import jit
    from hoodie_ray.index import _bloom_jit, _jit, hash_keys, warm_up
    from hoodie_ray.index.bloom_filter import MURMUR_HASH, key_buffers, set_bits

    if not jit.enabled():
        pytest.skip("numba is switched off (HOODIE_RAY_NO_JIT)")
    warm_up()
    hashes, blooms = set(_jit.fnv_splitmix.signatures), set(_bloom_jit.murmur_bits.signatures)
    keys = pa.array([f"key-{i:08d}" for i in range(5000)])
    frozen = pa.Array.from_buffers(
        pa.string(), len(keys), [None, keys.buffers()[1], pa.py_buffer(bytes(keys.buffers()[2]))]
    )
    for k in (keys, frozen):
        hash_keys(k)
        data, starts, lens = key_buffers(k)
        set_bits(np.zeros((1, 64), bool), data, starts, lens, None, 3, MURMUR_HASH, compiled=True)
        set_bits(np.zeros((1, 64), bool), data.copy(), starts, lens, None, 3, MURMUR_HASH)
    assert set(_jit.fnv_splitmix.signatures) == hashes
    assert set(_bloom_jit.murmur_bits.signatures) == blooms
