"""Writing partial-update tables (``hoodie.table.partial.update.mode=IGNORE_DEFAULTS``; Flink's
``payload.class=...PartialUpdateAvroPayload``): a null field of an upsert keeps the stored value,
through the writer's fold of a batch, the copy-on-write merge, merge-on-read logs and
compaction, against a model of Java's grouping and hudi-rs (version 9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.exceptions import HoodieOptionError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.storage import LocalStorage
from tests.conftest import hudi_rs_read

Version = tuple[int, Any, Any, bool]  # ts, u, w, deleted


def _merge(old: Version | None, new: Version) -> Version:
    """Two versions of a key (Java's partial merge, ``old`` first)."""
    if old is None:
        return new
    if old[3] or new[3]:
        return new if new[0] >= old[0] else old
    hi, lo = (new, old) if new[0] >= old[0] else (old, new)
    return (hi[0], lo[1] if hi[1] is None else hi[1], lo[2] if hi[2] is None else hi[2], False)


def _fold(versions: list[Version]) -> Version | None:
    out: Version | None = None
    for v in versions:
        out = _merge(out, v)
    return out


class _Model:
    """Per key: the stored record (a base file's) and, on merge-on-read, the log's versions
    (one a commit: the writer folds a batch first)."""

    def __init__(self, mor: bool) -> None:
        self.mor = mor
        self.base: dict[str, Version] = {}
        self.log: dict[str, list[Version]] = {}

    def commit(self, rows: list[tuple[str, Version]]) -> None:
        by_key: dict[str, list[Version]] = {}
        for k, v in rows:
            by_key.setdefault(k, []).append(v)
        for k, vs in by_key.items():
            folded = _fold(vs)
            assert folded is not None
            known = k in self.base or k in self.log
            if not known and folded[3]:
                continue  # a delete of a key nobody has
            if self.mor and k in self.base:
                self.log.setdefault(k, []).append(folded)
            elif self.mor and not known:
                self.base[k] = folded  # a new key: into a base file
            else:
                self.base[k] = _merge(self.base.get(k), folded) if k in self.base else folded
            self._settle(k)

    def _settle(self, k: str) -> None:
        if not self.mor and self.base.get(k, (0, 0, 0, False))[3]:
            del self.base[k]

    def compact(self) -> None:
        self.base = {k: v for k, v in self.snapshot_versions().items()}
        self.log = {}

    def snapshot_versions(self) -> dict[str, Version]:
        out = {}
        for k in set(self.base) | set(self.log):
            log = _fold(self.log.get(k, []))
            base = self.base.get(k)
            v = base if log is None else (log if base is None else _merge(base, log))
            if v is not None and not v[3]:
                out[k] = v
        return out

    def snapshot(self) -> dict[str, tuple]:
        return {k: (v[0], v[1], v[2]) for k, v in self.snapshot_versions().items()}


def _options(version: str, table_type: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "partial",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": table_type,
        "hoodie.write.table.version": version,
        "hoodie.table.partial.update.mode": "IGNORE_DEFAULTS",
        "compaction.schedule.enabled": "false",
    }


def _read(t: pa.Table) -> dict[str, tuple]:
    return {r["key"]: (r["ts"], r["u"], r["w"]) for r in t.to_pylist()}


@pytest.mark.parametrize(
    ("version", "table_type"),
    [("9", "MERGE_ON_READ"), ("9", "COPY_ON_WRITE"), ("6", "MERGE_ON_READ")],
)
def test_partial_update_writes_read_as_the_model(
    tmp_path: Path, version: str, table_type: str
) -> None:
    path = str(tmp_path / "t")
    opts = _options(version, table_type)
    model = _Model(table_type == "MERGE_ON_READ")
    rng = np.random.default_rng(7)
    keys = [f"k{i:02d}" for i in range(20)]
    gone: set[str] = set()  # a deleted key is not written again (it may land elsewhere)
    for c in range(7):
        rows: list[tuple[str, Version]] = []
        live = [k for k in keys if k not in gone]
        for k in keys if c == 0 else rng.choice(live, 16):  # repeats within a batch
            ts = int(rng.integers(0, 6)) + c
            u = None if c and rng.random() < 0.5 else int(rng.integers(0, 100))
            w = None if c and rng.random() < 0.5 else f"w{c}"
            rows.append((str(k), (ts, u, w, bool(c in (3, 6) and rng.random() < 0.15))))
        gone |= {k for k, v in rows if v[3]}
        HoodieWriteClient(path, opts).write(
            pa.table(
                {
                    "key": [k for k, _ in rows],
                    "p": ["x"] * len(rows),
                    "ts": pa.array([v[0] for _, v in rows], pa.int64()),
                    "u": pa.array([v[1] for _, v in rows], pa.int64()),
                    "w": pa.array([v[2] for _, v in rows], pa.string()),
                    "_hoodie_is_deleted": [v[3] for _, v in rows],
                }
            )
        )
        model.commit(rows)
        if c == 4 and table_type == "MERGE_ON_READ":
            hr.compact(path)
            model.compact()
        assert _read(hr.read(path)) == model.snapshot(), c
        if version == "9":
            assert _read(hudi_rs_read(path)) == model.snapshot(), c
    cfg = HoodieTableConfig.load(LocalStorage(path))
    assert cfg.partial_update
    if version == "9":
        assert cfg.props["hoodie.table.partial.update.mode"] == "IGNORE_DEFAULTS"
    else:
        assert cfg.props["hoodie.compaction.payload.class"].endswith("PartialUpdateAvroPayload")


def test_partial_update_options(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = {**_options("9", "MERGE_ON_READ")}
    del opts["hoodie.table.partial.update.mode"]
    opts["payload.class"] = "org.apache.hudi.common.model.PartialUpdateAvroPayload"  # Flink's
    row = pa.table({"key": ["a"], "p": ["x"], "ts": [1], "u": [1], "w": ["a"]})
    HoodieWriteClient(path, opts).write(row)
    assert HoodieTableConfig.load(LocalStorage(path)).partial_update
    with pytest.raises(HoodieOptionError, match="partial.update.mode=NONE != table's"):
        HoodieWriteClient(path, {"hoodie.table.partial.update.mode": "NONE"}).write(row)
    with pytest.raises(HoodieOptionError, match="is not supported; use IGNORE_DEFAULTS"):
        HoodieWriteClient(str(tmp_path / "u"), {**opts, "payload.class": "x.Y"}).write(row)


@pytest.mark.parametrize("from_version", ["6", "8"])
def test_a_partial_update_table_upgraded_to_version_9_reads_the_same_in_hudi_rs(
    tmp_path: Path, from_version: str
) -> None:
    """6 -> 9 and 8 -> 9 map PartialUpdateAvroPayload onto IGNORE_DEFAULTS, as Java's
    upgrade does: hudi-rs, which refuses the payload class, then reads what hoodie_ray read."""
    path = str(tmp_path / "t")
    opts = _options(from_version, "MERGE_ON_READ")
    rows = [("a", 1, 1, "a1"), ("b", 1, 2, "b1"), ("a", 2, None, "a2"), ("b", 3, 9, None)]
    for k, ts, u, w in rows:
        HoodieWriteClient(path, opts).write(
            pa.table({"key": [k], "p": ["x"], "ts": [ts], "u": [u], "w": [w]})
        )
    before = _read(hr.read(path))
    assert before == {"a": (2, 1, "a2"), "b": (3, 9, "b1")}
    if from_version == "8":
        cfg = HoodieTableConfig.load(LocalStorage(path))
        assert cfg.props["hoodie.record.merge.mode"] == "CUSTOM"
    assert hr.upgrade(path, to_version=9) == 9
    cfg = HoodieTableConfig.load(LocalStorage(path))
    assert cfg.props["hoodie.table.partial.update.mode"] == "IGNORE_DEFAULTS"
    assert cfg.props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert "hoodie.compaction.payload.class" not in cfg.props
    assert _read(hr.read(path)) == before == _read(hudi_rs_read(path))
