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
