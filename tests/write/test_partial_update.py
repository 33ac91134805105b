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


#: ``FILL_UNAVAILABLE``'s marker in the model tests (Debezium's, the option's default).
MARKER = "__debezium_unavailable_value"


def _merge(old: Version | None, new: Version, fill: bool = False) -> Version:
    """Two versions of a key (Java's partial merge, ``old`` first). ``fill``:
    ``FILL_UNAVAILABLE``, where only the string ``w`` holding the marker is missing."""
    if old is None:
        return new
    if old[3] or new[3]:
        return new if new[0] >= old[0] else old
    hi, lo = (new, old) if new[0] >= old[0] else (old, new)
    if fill:
        return (hi[0], hi[1], lo[2] if hi[2] == MARKER else hi[2], False)
    return (hi[0], lo[1] if hi[1] is None else hi[1], lo[2] if hi[2] is None else hi[2], False)


def _fold(versions: list[Version], fill: bool = False) -> Version | None:
    out: Version | None = None
    for v in versions:
        out = _merge(out, v, fill)
    return out


class _Model:
    """Per key: the stored record (a base file's) and, on merge-on-read, the log's versions
    (one a commit: the writer folds a batch first)."""

    def __init__(self, mor: bool, fill: bool = False) -> None:
        self.mor = mor
        self.fill = fill
        self.base: dict[str, Version] = {}
        self.log: dict[str, list[Version]] = {}

    def commit(self, rows: list[tuple[str, Version]]) -> None:
        by_key: dict[str, list[Version]] = {}
        for k, v in rows:
            by_key.setdefault(k, []).append(v)
        for k, vs in by_key.items():
            folded = _fold(vs, self.fill)
            assert folded is not None
            known = k in self.base or k in self.log
            if not known and folded[3]:
                continue  # a delete of a key nobody has
            if self.mor and k in self.base:
                self.log.setdefault(k, []).append(folded)
            elif self.mor and not known:
                self.base[k] = folded  # a new key: into a base file
            else:
                self.base[k] = (
                    _merge(self.base.get(k), folded, self.fill) if k in self.base else folded
                )
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
            log = _fold(self.log.get(k, []), self.fill)
            base = self.base.get(k)
            v = base if log is None else (log if base is None else _merge(base, log, self.fill))
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
    ("version", "table_type", "mode"),
    [
        ("9", "MERGE_ON_READ", "IGNORE_DEFAULTS"),
        ("9", "COPY_ON_WRITE", "IGNORE_DEFAULTS"),
        ("6", "MERGE_ON_READ", "IGNORE_DEFAULTS"),
        ("9", "MERGE_ON_READ", "FILL_UNAVAILABLE"),
        ("9", "COPY_ON_WRITE", "FILL_UNAVAILABLE"),
    ],
)
def test_partial_update_writes_read_as_the_model(
    tmp_path: Path, version: str, table_type: str, mode: str
) -> None:
    """``FILL_UNAVAILABLE``: the string ``w`` holding the marker keeps the stored value, a null
    (of ``u`` or ``w``) is a value."""
    path = str(tmp_path / "t")
    opts = {**_options(version, table_type), "hoodie.table.partial.update.mode": mode}
    fill = mode == "FILL_UNAVAILABLE"
    model = _Model(table_type == "MERGE_ON_READ", fill)
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
            if fill and w is None and rng.random() < 0.7:
                w = MARKER
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
        assert cfg.props["hoodie.table.partial.update.mode"] == mode
        if fill:  # Java's key, and the one hudi-rs reads
            assert (
                cfg.props[
                    "hoodie.record.merge.property.hoodie.write.partial.update.unavailable.value"
                ]
                == MARKER
            )
            assert cfg.unavailable_value == MARKER
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
    fill = {**opts, "hoodie.table.partial.update.mode": "FILL_UNAVAILABLE"}
    del fill["payload.class"]
    with pytest.raises(HoodieOptionError, match="FILL_UNAVAILABLE needs table version 9"):
        HoodieWriteClient(str(tmp_path / "v"), {**fill, "hoodie.write.table.version": "8"}).write(
            row
        )
    assert not (tmp_path / "v" / ".hoodie" / "hoodie.properties").exists()
    with pytest.raises(HoodieOptionError, match="unavailable.value=other != table's"):
        HoodieWriteClient(str(tmp_path / "x"), fill).write(row)
        HoodieWriteClient(
            str(tmp_path / "x"), {"hoodie.write.partial.update.unavailable.value": "other"}
        ).write(row)
    with pytest.raises(HoodieOptionError, match="IGNORE_DEFAULTS != table's FILL_UNAVAILABLE"):
        HoodieWriteClient(str(tmp_path / "w"), fill).write(row)
        HoodieWriteClient(
            str(tmp_path / "w"), {"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}
        ).write(row)


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


# -- partial updates of a plain table (write.partial.updates: Spark MERGE INTO's) --------------

PVersion = tuple[int, Any, Any, bool, bool, bool]  # ts, u, w, deleted, has u, has w


def _pmerge(old: PVersion | None, new: PVersion) -> PVersion:
    """Java's merge of partial records (``mergePartialRecords``): the higher-ordered record's
    columns win (ties: the newer), the other fills the columns it lacks; a delete leaves the
    higher-ordered side."""
    if old is None:
        return new
    if old[3] or new[3]:
        return new if new[0] >= old[0] else old
    hi, lo = (new, old) if new[0] >= old[0] else (old, new)
    u, has_u = (hi[1], True) if hi[4] else (lo[1], lo[4])
    w, has_w = (hi[2], True) if hi[5] else (lo[2], lo[5])
    return (hi[0], u, w, False, has_u, has_w)


@pytest.mark.parametrize(
    ("version", "table_type", "ordered"),
    [
        ("8", "MERGE_ON_READ", True),
        ("9", "MERGE_ON_READ", True),
        ("6", "COPY_ON_WRITE", True),
        ("9", "COPY_ON_WRITE", True),
        ("9", "MERGE_ON_READ", False),
    ],
)
def test_partial_updates_read_as_the_model(
    tmp_path: Path, version: str, table_type: str, ordered: bool
) -> None:
    """Upserts that carry some of the columns (``write.partial.updates``) update only those:
    merge-on-read logs get ``IS_PARTIAL`` blocks of them, copy-on-write merges keep the stored
    values; read by hoodie_ray and hudi-rs as a model of Java's merge says, before and after a
    compaction. Keys repeat within a batch; new keys come in full rows (as MERGE INTO's
    inserts). hudi-rs is the oracle where each commit's ordering values are above the last
    one's (``ordered``); out of order, it merges a slice's versions one after another onto the
    base record, where Java's file-group reader (and hoodie_ray) folds the log versions first
    and then meets the base record, so there the model alone is the oracle."""
    path = str(tmp_path / "t")
    opts = {
        **_options(version, table_type),
        "hoodie.table.partial.update.mode": "NONE",
        "index.global.enabled": "false",
    }
    partial = {**opts, "write.partial.updates": "true"}
    mor = table_type == "MERGE_ON_READ"
    rng = np.random.default_rng(int(version) * 10 + mor + 2 * ordered)
    keys = [f"k{i:02d}" for i in range(24)]
    base: dict[str, PVersion] = {}
    log: dict[str, list[PVersion]] = {}

    def state() -> dict[str, tuple]:
        out = {}
        for k in set(base) | set(log):
            v: PVersion | None = base.get(k)
            folded: PVersion | None = None
            for x in log.get(k, []):
                folded = _pmerge(folded, x)
            if folded is not None:
                v = folded if v is None else _pmerge(v, folded)
            if v is not None and not v[3]:
                out[k] = (v[0], v[1], v[2])
        return out

    blocks_partial = False
    for c in range(7):
        columns = ["u", "w"] if c in (0, 3) else [["u"], ["w"], ["u", "w"]][int(rng.integers(3))]
        pool = keys if c == 0 else sorted(state())
        batch_keys = list(pool) if c == 0 else [str(k) for k in rng.choice(pool, 14)]
        rows: list[tuple[str, PVersion]] = []
        for k in batch_keys:
            ts = int(rng.integers(0, 5)) + c * (10 if ordered else 1)
            u = None if rng.random() < 0.2 else int(rng.integers(0, 100))
            w = None if rng.random() < 0.2 else f"w{c}-{k}"
            deleted = bool(c == 5 and rng.random() < 0.15)
            rows.append((k, (ts, u, w, deleted, "u" in columns, "w" in columns)))
        data: dict[str, Any] = {
            "key": [k for k, _ in rows],
            "p": ["x"] * len(rows),
            "ts": pa.array([v[0] for _, v in rows], pa.int64()),
            "_hoodie_is_deleted": [v[3] for _, v in rows],
        }
        if "u" in columns:
            data["u"] = pa.array([v[1] for _, v in rows], pa.int64())
        if "w" in columns:
            data["w"] = pa.array([v[2] for _, v in rows], pa.string())
        HoodieWriteClient(path, partial if len(columns) < 2 else opts).write(pa.table(data))
        by_key: dict[str, list[PVersion]] = {}
        for k, v in rows:
            by_key.setdefault(k, []).append(v)
        for k, vs in by_key.items():
            folded = None
            for v in vs:
                folded = _pmerge(folded, v)
            assert folded is not None
            if mor and (k in base or k in log):
                log.setdefault(k, []).append(folded)
            elif mor:
                base[k] = folded
            else:
                base[k] = _pmerge(base[k], folded) if k in base else folded
                if base[k][3]:
                    del base[k]
        blocks_partial |= mor and len(columns) < 2
        if c == 4 and mor:
            hr.compact(path)
            base, log = {k: (*v, False, True, True) for k, v in state().items()}, {}
        want = state()
        assert _read(hr.read(path)) == want, c
        if ordered:
            assert _read(hudi_rs_read(path)) == want, c
    if mor:
        from hoodie_ray.log_format import HeaderMetadataType, read_log_file

        storage = LocalStorage(path)
        headers = [
            b.header
            for f in sorted((Path(path) / "x").glob(".*.log.*"))
            for b in read_log_file(storage, f"x/{f.name}")
        ]
        assert blocks_partial and any(
            h.get(HeaderMetadataType.IS_PARTIAL) == "true" for h in headers
        )


def test_partial_updates_are_refused_where_java_writes_none(tmp_path: Path) -> None:
    row = pa.table({"key": ["a"], "p": ["x"], "ts": [1], "u": [1]})
    opts = {
        **_options("6", "MERGE_ON_READ"),
        "hoodie.table.partial.update.mode": "NONE",
        "index.global.enabled": "false",
        "write.partial.updates": "true",
    }
    cases = [
        ({}, "needs table version 8"),
        ({"hoodie.write.table.version": "9", "index.global.enabled": "true"}, "global"),
        (
            {
                "hoodie.write.table.version": "9",
                "hoodie.table.partial.update.mode": "IGNORE_DEFAULTS",
            },
            "does not go with",
        ),
        ({"hoodie.write.table.version": "9", "write.operation": "insert"}, "not an upsert"),
    ]
    for i, (extra, match) in enumerate(cases):
        with pytest.raises(HoodieOptionError, match=match):
            HoodieWriteClient(str(tmp_path / str(i)), {**opts, **extra}).write(row)
        assert not (tmp_path / str(i) / ".hoodie" / "hoodie.properties").exists()


def test_a_null_in_a_partial_update_is_a_value(tmp_path: Path) -> None:
    """A column the batch carries is written, null or not (the block's schema has it: Java's
    ``SparkRecordMergingUtils.mergePartialRecords`` takes from the older record only the
    fields the newer record's schema lacks); a column it lacks keeps the stored value; a new
    key gets nulls."""
    path = str(tmp_path / "t")
    opts = {
        **_options("9", "MERGE_ON_READ"),
        "hoodie.table.partial.update.mode": "NONE",
        "index.global.enabled": "false",
        "write.partial.updates": "true",
    }
    HoodieWriteClient(path, opts).write(
        pa.table({"key": ["a", "b"], "p": ["x"] * 2, "ts": [1, 1], "u": [1, 2], "w": ["a", "b"]})
    )
    HoodieWriteClient(path, opts).write(
        pa.table({"key": ["a", "b", "c"], "p": ["x"] * 3, "ts": [2, 2, 2], "u": [None, 5, 7]})
    )
    want = {"a": (2, None, "a"), "b": (2, 5, "b"), "c": (2, 7, None)}
    # a partial batch needs no nulls for missing columns: it names them
    strict = {**opts, "hoodie.write.set.null.for.missing.columns": "false"}
    HoodieWriteClient(path, strict).write(
        pa.table({"key": ["a"], "p": ["x"], "ts": [1], "u": [3]})  # loses on ordering
    )
    assert _read(hr.read(path)) == want == _read(hudi_rs_read(path))
    hr.compact(path)
    assert _read(hr.read(path)) == want == _read(hudi_rs_read(path))


def test_a_cdc_read_sees_a_lower_partial_version_fill_a_record(tmp_path: Path) -> None:
    """A lower-ordered partial version fills a column the higher-ordered one lacks: the
    record's values change while its sequence number stays (the winner's), and the CDC query
    reports the update."""
    path = str(tmp_path / "t")
    opts = {
        **_options("9", "MERGE_ON_READ"),
        "hoodie.table.partial.update.mode": "NONE",
        "index.global.enabled": "false",
    }
    HoodieWriteClient(path, opts).write(
        pa.table({"key": ["a"], "p": ["x"], "ts": [1], "u": [1], "w": ["x"]})
    )
    partial = {**opts, "write.partial.updates": "true"}
    HoodieWriteClient(path, partial).write(
        pa.table({"key": ["a"], "p": ["x"], "ts": [10], "u": [2]})
    )
    c3 = HoodieWriteClient(path, partial).write(
        pa.table({"key": ["a"], "p": ["x"], "ts": [5], "w": ["y"]})
    )
    assert _read(hr.read(path)) == {"a": (10, 2, "y")} == _read(hudi_rs_read(path))
    changes = hr.read(path, query_type="incremental", incremental_format="cdc").to_pylist()
    last = [
        (r["op"], r["before"]["w"], r["after"]["w"]) for r in changes if r["ts_ms"] == c3.instant
    ]
    assert last == [("u", "x", "y")]


def test_partial_rows_before_a_delete_do_not_count() -> None:
    """Rows of one key in one flush: w only (ts 4), a delete (ts 5), u only (ts 6). The fold
    restarts after the delete, so the folded row carries u only (the stored w then fills it,
    as Java's pairwise merge does), not a w the fold dropped."""
    from hoodie_ray.config.table_config import MergeMode
    from hoodie_ray.merge import partial_merge
    from hoodie_ray.write.records import folded_presence

    rows = pa.table(
        {
            "_hoodie_record_key": ["k", "k", "k"],
            "ts": [4, 5, 6],
            "u": [None, None, 7],
            "w": ["a", None, None],
            "_hoodie_is_deleted": [False, True, False],
        }
    )
    present = {
        "ts": np.ones(3, dtype=bool),
        "u": np.array([False, True, True]),
        "w": np.array([True, True, False]),
    }
    counted = np.zeros(3, dtype=bool)
    folded, deleted = partial_merge(
        rows,
        is_delete=np.array([False, True, False]),
        is_base=np.zeros(3, dtype=bool),
        ordering_field="ts",
        mode=MergeMode.EVENT_TIME_ORDERING,
        present=present,
        counted=counted,
    )
    assert not deleted.any() and folded.column("u").to_pylist() == [7]
    has = folded_presence(rows, present, folded, counted)
    assert has["u"].tolist() == [True] and has["w"].tolist() == [False]
