"""Partition values are data: hostile ones never create or touch a file outside the table.

The rule (docs/SECURITY.md, hoodie_ray.keygen), for every combination of hive style and URL
encoding: a value is refused with a :class:`HoodieInputError` before anything is written when it

* is ``.`` or ``..`` (always: URL encoding does not escape ``.``);
* starts with ``.`` without hive style (a hidden directory, or ``.hoodie`` itself);
* holds ``/``, ``\\``, NUL or another control character without URL encoding;

otherwise it is written (URL-encoded when ``hoodie.datasource.write.partitionpath.urlencode``)
as ONE directory directly in the table, and reads back exactly, in hoodie_ray and in hudi-rs.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieError, HoodieInputError
from tests.conftest import hudi_rs_read
from tests.security import rows, tree, write

HOSTILE = [
    "../../outside",
    "../outside",
    "/abs",
    "/",
    "a/b",
    "a/../../outside",
    "x\u0000y",
    "..",
    ".",
    ".hoodie",
    ".hidden",
    "..%2F..%2Foutside",
    "a=b",
    "p=..",
    "c\\d",
    "\\..\\..\\outside",
    "tab\tnew\nline",
    "del\x7f",
    "%2F",
    "ü/ß",
]

MODES = [
    pytest.param(False, False, id="plain"),
    pytest.param(False, True, id="urlencode"),
    pytest.param(True, False, id="hive"),
    pytest.param(True, True, id="hive-urlencode"),
]

_RAW_UNSAFE = re.compile(r"[/\\=\x00-\x1f\x7f]")


def refused(value: str, hive: bool, urlencode: bool) -> bool:
    """The documented rule."""
    if value in (".", ".."):
        return True
    if not hive and value.startswith("."):
        return True
    return not urlencode and bool(_RAW_UNSAFE.search(value))


def _options(hive: bool, urlencode: bool) -> dict[str, str]:
    return {
        "hoodie.datasource.write.hive_style_partitioning": str(hive).lower(),
        "hoodie.datasource.write.partitionpath.urlencode": str(urlencode).lower(),
    }


@pytest.mark.parametrize(("hive", "urlencode"), MODES)
def test_hostile_partition_values(tmp_path: Path, hive: bool, urlencode: bool) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "sibling.txt").write_text("not part of the table")
    base = parent / "table"
    opts = _options(hive, urlencode)
    write(base, rows(["seed"], ["ok"]), **opts)
    outside_before = tree(tmp_path, skip=base)

    accepted = [v for v in HOSTILE if not refused(v, hive, urlencode)]
    for i, value in enumerate(v for v in HOSTILE if refused(v, hive, urlencode)):
        before = tree(base)
        with pytest.raises(HoodieInputError) as err:
            write(base, rows([f"bad{i}"], [value]), **opts)
        msg = str(err.value)
        assert "partition field p" in msg, msg
        assert tree(base) == before, f"a refused write changed the table ({value!r})"

    ids = [f"k{i}" for i in range(len(accepted))]
    write(base, rows(ids, accepted, ts=2), **opts)

    # nothing outside the base path was created, changed or deleted
    assert tree(tmp_path, skip=base) == outside_before

    # every partition is ONE directory directly in the table
    got = hr.read(str(base))
    for part in set(got.column("_hoodie_partition_path").to_pylist()):
        assert "/" not in part and part not in (".", "..") and not part.startswith(".")
        assert (base / part).is_dir() and (base / part).resolve().parent == base.resolve()

    # the values read back exactly, in hoodie_ray and in hudi-rs
    want = {"seed": "ok", **dict(zip(ids, accepted, strict=True))}
    assert dict(zip(got.column("id").to_pylist(), got.column("p").to_pylist(), strict=True)) == want
    if importlib.util.find_spec("hudi") is not None:  # the oracle (a dev dependency)
        oracle = hudi_rs_read(base)
        got_rs = zip(oracle.column("id").to_pylist(), oracle.column("p").to_pylist(), strict=True)
        assert dict(got_rs) == want


@pytest.mark.parametrize(("hive", "urlencode"), MODES)
def test_partition_path_form(tmp_path: Path, hive: bool, urlencode: bool) -> None:
    """The directory names written for two hostile values, pinned per mode."""
    base = tmp_path / "t"
    values = ["../../outside", "a/b"]
    ok = [v for v in values if not refused(v, hive, urlencode)]
    if not ok:
        with pytest.raises(HoodieInputError):
            write(base, rows(["k"], values[:1]), **_options(hive, urlencode))
        return
    write(base, rows([f"k{i}" for i in range(len(ok))], ok), **_options(hive, urlencode))
    names = sorted(p.name for p in base.iterdir() if p.is_dir() and p.name != ".hoodie")
    expect = {
        (False, True): ["a%2Fb"],  # '../../outside' starts with '.': refused without hive style
        (True, True): ["p=..%2F..%2Foutside", "p=a%2Fb"],
    }[(hive, urlencode)]
    assert names == expect


def test_complex_key_generator_second_field(tmp_path: Path) -> None:
    """Each partition field is checked on its own: a hostile second field is caught too."""
    parent = tmp_path / "parent"
    base = parent / "t"
    opts = {"hoodie.datasource.write.partitionpath.field": "p,q"}

    def batch(q: str) -> pa.Table:
        return rows(["k"], ["ok"]).append_column("q", pa.array([q]))

    write(base, batch("fine"), **opts)
    before = tree(parent)
    for q in ["../../outside", "/abs", "..", ".hoodie", "x\u0000y"]:
        with pytest.raises(HoodieInputError, match="partition field q"):
            write(base, batch(q), **opts)
        assert tree(parent) == before
    encoded = parent / "t2"
    write(encoded, batch("../../outside"), **opts, **_options(True, True))
    assert (encoded / "p=ok" / "q=..%2F..%2Foutside").is_dir()
    assert sorted(p.name for p in parent.iterdir()) == ["t", "t2"]
    assert hr.read(str(encoded)).column("q").to_pylist() == ["../../outside"]


def test_refused_values_never_reach_storage_on_a_new_table(tmp_path: Path) -> None:
    """The first write of a table, refused: no data file anywhere, nothing outside."""
    parent = tmp_path / "parent"
    base = parent / "t"
    with pytest.raises(HoodieError):
        write(base, rows(["a", "b"], ["fine", "../../../outside"]))
    files = [k for k, v in tree(parent).items() if v[0] == "file"]
    assert all(f.startswith("t/.hoodie/") for f in files), files
    assert sorted(p.name for p in parent.iterdir()) == ["t"]
