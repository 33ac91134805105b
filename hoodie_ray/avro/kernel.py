"""Compiled single-pass walks over Avro binary records (numba), for flat record schemas.

The numpy decoder in :mod:`hoodie_ray.avro.codec` decodes one field of every record at a time,
so a varint costs one gather per byte over all records, and finding the records of a block
(length prefixes) is a Python loop. These kernels walk the buffer once, record by record, and
return the *payloads* the numpy decoder would compute (varint values, string spans, raw float
bits, union branches); the Arrow arrays are then built by the same code. They cover records
whose fields are null, boolean, int, long, float, double, string or bytes, or a union of null
and one of those (every Hudi table without nested columns); other schemas use the numpy path.

On malformed input a kernel only reports failure; the caller then runs the numpy path, which
raises the precise error, so both paths accept and reject exactly the same bytes.

numba is imported on first use; when it is missing, or ``HOODIE_RAY_NO_JIT=1`` is set
(:func:`hoodie_ray.jit.enabled`), the kernels are unavailable and the numpy path runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hoodie_ray.avro.schema import AvroType

__all__ = [
    "FlatPlan",
    "available",
    "encode_flat_records",
    "flat_plan",
    "walk_flat_records",
    "walk_length_prefixed",
]

# Field kinds of a flat plan.
K_NULL, K_BOOLEAN, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_BYTES = range(7)
_KIND = {
    "null": K_NULL,
    "boolean": K_BOOLEAN,
    "int": K_INT,
    "long": K_LONG,
    "float": K_FLOAT,
    "double": K_DOUBLE,
    "string": K_BYTES,
    "bytes": K_BYTES,
}

_kernels: Any = None  # the four _jit kernels once loaded; False when unavailable


@dataclass(frozen=True)
class FlatPlan:
    """Per top-level field: kind, and for a ``[null, T]`` union the null and value branch
    indexes (-1 for a plain field)."""

    kinds: np.ndarray  # int8
    null_branch: np.ndarray  # int8
    value_branch: np.ndarray  # int8
    value_types: tuple[AvroType, ...]  # the non-null type of each field


def _flat_kind(t: AvroType) -> int | None:
    if t.kind in ("string", "bytes") and t.logical == "decimal":
        return None
    return _KIND.get(t.kind)


def flat_plan(t: AvroType) -> FlatPlan | None:
    """The plan of record schema ``t``, or None when a field is not flat."""
    if t.kind != "record" or not t.fields:
        return None
    kinds, nulls, values, vtypes = [], [], [], []
    for f in t.fields:
        ft = f.type
        if ft.kind == "union":
            if len(ft.branches) != 2:
                return None
            null_idx = [i for i, b in enumerate(ft.branches) if b.kind == "null"]
            if len(null_idx) != 1:
                return None
            vi = 1 - null_idx[0]
            vt = ft.branches[vi]
            k = _flat_kind(vt)
            if k is None or k == K_NULL:
                return None
            kinds.append(k)
            nulls.append(null_idx[0])
            values.append(vi)
            vtypes.append(vt)
        else:
            k = _flat_kind(ft)
            if k is None or k == K_NULL:  # a plain null field: left to the numpy path
                return None
            kinds.append(k)
            nulls.append(-1)
            values.append(-1)
            vtypes.append(ft)
    return FlatPlan(
        np.array(kinds, dtype=np.int8),
        np.array(nulls, dtype=np.int8),
        np.array(values, dtype=np.int8),
        tuple(vtypes),
    )


def _compile() -> Any:
    from hoodie_ray.avro import _jit

    return _jit.walk_records, _jit.walk_prefixed, _jit.record_sizes, _jit.write_records


def available() -> bool:
    """Whether the compiled kernels can run here (loads them on the first call)."""
    global _kernels
    if _kernels is None:
        from hoodie_ray import jit

        _kernels = _compile() if jit.enabled() else False
    return bool(_kernels)


def walk_flat_records(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, plan: FlatPlan
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(values, value positions, valid)``, each ``(fields, records)``, or None when a record
    does not decode (the numpy path then names the fault)."""
    assert _kernels
    nf, n = len(plan.kinds), len(starts)
    vals = np.empty((nf, n), dtype=np.int64)
    vpos = np.empty((nf, n), dtype=np.int64)
    valid = np.ones((nf, n), dtype=np.bool_)
    bad = _kernels[0](
        np.ascontiguousarray(buf, dtype=np.uint8),
        np.ascontiguousarray(starts, dtype=np.int64),
        np.ascontiguousarray(ends, dtype=np.int64),
        plan.kinds,
        plan.null_branch,
        plan.value_branch,
        vals,
        vpos,
        valid,
    )
    return None if bad >= 0 else (vals, vpos, valid)


def walk_length_prefixed(buf: np.ndarray, start: int, count: int) -> tuple[np.ndarray, int] | None:
    """Record starts after big-endian int32 length prefixes, and the end of the last record;
    None when the lengths are malformed (the Python walk then names the fault)."""
    assert _kernels
    starts = np.empty(count, dtype=np.int64)
    end = int(_kernels[1](buf, start, count, starts))
    return None if end < 0 else (starts, end)


def encode_flat_records(
    plan: FlatPlan,
    vals: np.ndarray,
    valid: np.ndarray,
    sstart: np.ndarray,
    sdata: np.ndarray,
    length_prefix: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)`` of the records whose field payloads are given, each ``(records,
    fields)``: ``vals`` holds int/long values, boolean bytes, raw float bits and string
    lengths; ``valid`` False for nulls of a union; strings are ``sdata[sstart:sstart+len]``.
    With ``length_prefix`` each record starts with its big-endian int32 length."""
    assert _kernels
    n = vals.shape[0]
    sizes = np.empty(n, dtype=np.int64)
    _kernels[2](plan.kinds, plan.null_branch, plan.value_branch, vals, valid, sizes)
    if length_prefix:
        sizes += 4
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    _kernels[3](
        plan.kinds,
        plan.null_branch,
        plan.value_branch,
        vals,
        valid,
        sstart,
        sdata,
        offsets,
        length_prefix,
        out,
    )
    return out, offsets
