"""Query API: bad input, projection and filters (against hudi-rs), plans and per-slice reads."""

from __future__ import annotations

import datetime as dt
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import (
    HoodieError,
    HoodieQueryError,
    HoodieTableNotFoundError,
    HoodieTimelineError,
)
from hoodie_ray.reader import plan_file_slices, read_file_slice, read_table
from hoodie_ray.timeline.instant import Action
from tests.conftest import hudi_rs_read
from tests.reader.builder import TableBuilder

TRIPS = "trips_mor_avro_v6_trips_8i1u"
SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture
def trips(sample_table) -> str:
    return str(sample_table(TRIPS))


def rows_of(t: pa.Table) -> list[str]:
    return sorted(map(str, t.to_pylist()))


# -- bad input ------------------------------------------------------------------------------------


def test_not_a_table(tmp_path: Path) -> None:
    with pytest.raises(HoodieTableNotFoundError):
        read_table(str(tmp_path))
    with pytest.raises(HoodieTableNotFoundError):
        read_table(str(tmp_path / "missing"))


@pytest.mark.shared
def test_bad_query_arguments(trips: str) -> None:
    with pytest.raises(HoodieQueryError, match="unknown query type"):
        read_table(trips, query_type="streaming")
    with pytest.raises(HoodieQueryError, match="after end"):
        read_table(
            trips, query_type="incremental", begin="20250331030645735", end="20250331030642808"
        )
    with pytest.raises(HoodieQueryError, match="unknown column"):
        read_table(trips, columns=["fare", "nope"])
    with pytest.raises(HoodieQueryError, match="columns is empty"):
        read_table(trips, columns=[])
    with pytest.raises(HoodieQueryError, match="unknown column"):
        read_table(trips, filters=[("nope", "=", "1")])
    with pytest.raises(HoodieQueryError, match="operator"):
        read_table(trips, filters=[("fare", "~", "1")])
    with pytest.raises(HoodieQueryError, match="fare"):
        read_table(trips, filters=[("fare", ">", "not-a-number")])
    with pytest.raises(HoodieQueryError):
        read_table(trips, as_of="20250331030645735", query_type="incremental")
    with pytest.raises(HoodieQueryError):
        read_table(trips, begin="20250331030642808")
    with pytest.raises(HoodieQueryError):
        read_table(trips, as_of="yesterday")


@pytest.mark.shared
def test_instant_not_on_the_timeline(trips: str) -> None:
    with pytest.raises(HoodieTimelineError, match="not an instant"):
        read_table(trips, as_of="20250331030642809")
    with pytest.raises(HoodieTimelineError, match="before the first commit"):
        read_table(trips, as_of=dt.datetime(2020, 1, 1))
    # every error is a HoodieError, as the API promises
    assert issubclass(HoodieTimelineError, HoodieError)


def test_time_travel_to_cleaned_slices(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", SCHEMA)
    c1 = b.begin()
    old = c1.base_file("", "f1-0", pa.table({"key": ["a"], "ts": [1], "v": ["x"]}, schema=SCHEMA))
    c1.complete()
    c2 = b.begin(Action.COMMIT)
    c2.base_file("", "f1-0", pa.table({"key": ["a"], "ts": [2], "v": ["y"]}, schema=SCHEMA))
    c2.complete()
    assert read_table(str(b.root), as_of=c1.instant).column("v").to_pylist() == ["x"]
    (b.root / old).unlink()  # what the cleaner does
    with pytest.raises(HoodieQueryError, match="cleaned"):
        read_table(str(b.root), as_of=c1.instant)
    assert read_table(str(b.root)).column("v").to_pylist() == ["y"]


@pytest.mark.shared
def test_empty_table(sample_table) -> None:
    root = str(sample_table("sample_mor_parquet_v6_empty"))
    t = read_table(root)
    assert t.num_rows == 0 and t.schema.names[:5] == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    ]
    assert read_table(root, query_type="incremental").num_rows == 0


# -- projection and filters, against hudi-rs --------------------------------------------------------

FILTERS = [
    [("city", "=", "san_francisco")],
    [("city", "!=", "san_francisco")],
    [("fare", ">", "20")],
    [("fare", ">=", "25.0"), ("city", "IN", "san_francisco,chennai")],
    [("ts", "<", "1695115999911")],
    [("rider", "NOT IN", "rider-A,rider-D")],
    [("city", "NOT IN", "sao_paulo")],
]


@pytest.mark.shared
@pytest.mark.parametrize("filters", FILTERS, ids=[str(f) for f in FILTERS])
def test_filters_and_projection_match_hudi_rs(trips: str, filters: list) -> None:
    from hudi import HudiReadOptions, HudiTable

    for cols in (None, ["rider", "fare", "city"]):
        batches = HudiTable(trips).read(HudiReadOptions(filters=filters, projection=cols))
        theirs = pa.Table.from_batches(batches) if batches else None
        mine = read_table(trips, filters=filters, columns=cols)
        assert mine.schema.names == (cols or hudi_rs_read(trips).schema.names)
        assert rows_of(mine) == (rows_of(theirs) if theirs is not None else [])


@pytest.mark.shared
def test_partition_pruning_and_typed_values(trips: str) -> None:
    plan = plan_file_slices(trips, filters=[("city", "=", "chennai")])
    assert {s.partition_path for s in plan.slices} == {"city=chennai"}
    plan = plan_file_slices(trips, filters=[("city", "IN", ["chennai", "sao_paulo"])])
    assert {s.partition_path for s in plan.slices} == {"city=chennai", "city=sao_paulo"}
    t = read_table(trips, filters=[("fare", ">", 20.0)], columns=["fare"])
    assert all(f > 20.0 for f in t.column("fare").to_pylist())


# -- plans and per-slice reads --------------------------------------------------------------------


@pytest.mark.shared
@pytest.mark.parametrize("query", ["snapshot", "read_optimized", "incremental"])
def test_plan_slices_are_picklable_and_read_one_by_one(trips: str, query: str) -> None:
    plan = plan_file_slices(trips, query_type=query)
    assert plan.slices
    ctx = pickle.loads(pickle.dumps(plan.context))
    parts = [read_file_slice(ctx, pickle.loads(pickle.dumps(s))) for s in plan.slices]
    whole = read_table(trips, query_type=query)
    assert rows_of(pa.concat_tables(parts)) == rows_of(whole)


@pytest.mark.shared
def test_hr_read_is_the_query_function(trips: str) -> None:
    import hoodie_ray.reader.query  # noqa: F401  (binds the package name; hr.read must still work)

    assert hr.read(trips, columns=["uuid"]).num_rows == 8


def test_row_group_pruning_never_hides_a_losing_log_record(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from hoodie_ray.reader.file_slice_reader import BaseFooter, _row_group_may_match
    from hoodie_ray.reader.filters import parse_filters

    b = TableBuilder(tmp_path / "t", SCHEMA)
    c1 = b.begin()
    base = pa.table(
        {"key": ["a", "b", "c", "d"], "ts": [100, 100, 100, 100], "v": ["x", "x", "y", "y"]},
        schema=SCHEMA,
    )
    name = c1.base_file("", "f1-0", base, row_group_size=2)
    c1.complete()
    pf = pq.ParquetFile(b.root / name)
    flt = tuple(parse_filters([("v", "=", "y")], b.full_schema))
    footer = BaseFooter(pf.metadata)
    assert [_row_group_may_match(footer, g, flt) for g in range(2)] == [False, True]
    assert [_row_group_may_match(footer, g, flt) for g in range(2)] == [False, True]  # kept
    assert rows_of(read_table(str(b.root), filters=[("v", "=", "y")], columns=["key"])) == rows_of(
        pa.table({"key": ["c", "d"]})
    )
    # A late update (lower ts) of "a" to v=y loses to the base record v=x: the row group
    # holding "a" must still be read to know that, so it is not pruned.
    c2 = b.begin()
    late = pa.table({"key": ["a"], "ts": [1], "v": ["y"]}, schema=SCHEMA)
    c2.log_file(
        "", "f1-0", [c2.data_block(late, "", "f1-0")], base_instant=c1.instant, base_file=name
    )
    c2.complete()
    got = read_table(str(b.root), filters=[("v", "=", "y")], columns=["key"])
    assert sorted(got.column("key").to_pylist()) == ["c", "d"]
    theirs = hudi_rs_read(str(b.root))
    assert sorted(theirs.filter(pc.equal(theirs.column("v"), "y")).column("key").to_pylist()) == [
        "c",
        "d",
    ]


def test_as_of_a_pending_instant(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", SCHEMA)
    c1 = b.begin()
    c1.base_file("", "f1-0", pa.table({"key": ["a"], "ts": [1], "v": ["x"]}, schema=SCHEMA))
    c1.complete()
    pending = b.begin()
    with pytest.raises(HoodieTimelineError, match="not completed"):
        read_table(str(b.root), as_of=pending.instant)


@pytest.mark.shared
def test_as_of_a_completion_time_v9(sample_table) -> None:
    from hoodie_ray.storage import open_storage
    from hoodie_ray.timeline.timeline import ActiveTimeline

    root = str(sample_table("sample_mor_avro_v9_txns_nonpart_nometa"))
    for inst in ActiveTimeline(open_storage(root), 2).completed_commits()[::3]:
        ct = inst.completion_time
        theirs = hudi_rs_read(root, **{"hoodie.read.as.of.timestamp": ct})
        assert rows_of(read_table(root, as_of=ct)) == rows_of(theirs)


def test_latest_slices_are_listed_once_per_table_state(tmp_path: Path, monkeypatch) -> None:
    """Snapshot reads of an unchanged table listed through its metadata table group its
    files once (the process keeps the latest slices by table state); a commit lists again,
    and time travel and storage-listed tables are never kept."""
    from hoodie_ray.file_group.view import FileSystemView

    built = []
    real = FileSystemView.latest_file_slices

    def counting(self, *a, **k):
        built.append(self.listing is not None)  # the data table's view, not the MDT's own
        return real(self, *a, **k)

    opts = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts",
        "hoodie.write.table.version": "8",
    }
    root = str(tmp_path / "t")
    first = hr.write(pa.table({"key": ["a"], "ts": [1], "v": ["x"]}), root, opts, engine="local")
    monkeypatch.setattr(FileSystemView, "latest_file_slices", counting)
    assert read_table(root).column("v").to_pylist() == ["x"]
    assert read_table(root).column("v").to_pylist() == ["x"]
    assert built.count(True) == 1
    hr.write(pa.table({"key": ["b"], "ts": [1], "v": ["y"]}), root, opts, engine="local")
    built.clear()
    assert sorted(read_table(root).column("v").to_pylist()) == ["x", "y"]
    assert sorted(read_table(root).column("v").to_pylist()) == ["x", "y"]
    assert built.count(True) == 1
    built.clear()
    for _ in range(2):  # time travel is never kept: the cleaner may remove its files
        assert read_table(root, as_of=first.instant).column("v").to_pylist() == ["x"]
    assert built.count(True) == 2

    b = TableBuilder(tmp_path / "v6", SCHEMA)  # listed from storage: never kept
    c1 = b.begin()
    c1.base_file("", "f1-0", pa.table({"key": ["a"], "ts": [1], "v": ["x"]}, schema=SCHEMA))
    c1.complete()
    built.clear()
    for _ in range(2):
        assert read_table(str(b.root)).column("v").to_pylist() == ["x"]
    assert built == [False, False]


@pytest.mark.parametrize(
    "filters",
    [
        [("a", "=", 2)],  # one row
        [("a", "IN", [1, 5, 16])],  # a few rows of two chunks
        [("a", ">", 0)],  # many rows
        [("a", "=", 99)],  # none
        [("a", "NOT IN", [1]), ("b", "!=", "v")],  # nulls never match
    ],
)
def test_apply_filters_keeps_the_rows_and_schema_whatever_the_matches(filters) -> None:
    """The rows come out copied: a few matches never keep their batch's buffers alive."""
    from hoodie_ray.reader.filters import apply_filters, parse_filters

    n = 24
    a = [None if i == 3 else i for i in range(n)]
    t = pa.Table.from_arrays(
        [pa.chunked_array([a[:10], a[10:]]), pa.array([f"v{i % 3}" for i in range(n)])],
        names=["a", "b"],
    )
    flt = parse_filters(filters, t.schema)
    mask = None
    for f in flt:
        m = pc.fill_null(f.mask(t.column(f.field)), False)
        mask = m if mask is None else pc.and_(mask, m)
    got = apply_filters(flt, t)
    assert got.schema == t.schema and got.equals(t.filter(mask))
    if got.num_rows < n:
        assert got.get_total_buffer_size() < t.get_total_buffer_size()


@pytest.mark.parametrize("batch_rows", [3, 1 << 16])
@pytest.mark.parametrize("workers", [1, 2])
def test_filters_over_runs_of_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_rows: int, workers: int
) -> None:
    """read_all filters a run of slices' rows together (``FILTER_BATCH_ROWS`` at a time): the
    rows and their order are a slice-by-slice filter's, a projection without the filtered
    column included, and a run's held rows are flushed as they pass the bound."""
    from hoodie_ray.reader import query

    b = TableBuilder(tmp_path / "t", SCHEMA)
    c = b.begin()
    for g in range(6):
        keys = [f"g{g}-{i:02d}" for i in range(10)]
        rows = pa.table(
            {"key": keys, "ts": [1] * 10, "v": ["x" if i % 3 == 0 else "y" for i in range(10)]},
            schema=SCHEMA,
        )
        c.base_file("", f"f{g}-0", rows)
    c.complete()
    path = str(tmp_path / "t")
    monkeypatch.setattr(query, "FILTER_BATCH_ROWS", batch_rows)
    whole = plan_file_slices(path).read_all(max_workers=workers)
    for columns in (None, ["key"]):
        plan = plan_file_slices(path, filters=[("v", "=", "x")], columns=columns)
        assert len(plan.slices) == 6
        got = plan.read_all(max_workers=workers)
        expected = whole.filter(pc.equal(whole["v"], "x"))
        expected = expected.select(columns) if columns else expected
        assert got.equals(expected)
        # slice by slice, as a Ray task reads them
        one_by_one = pa.concat_tables(read_file_slice(plan.context, s) for s in plan.slices)
        assert got.equals(one_by_one)


# -- nulls and empty values against the pruning ---------------------------------------------------

NULLS_OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "precombine.field": "ts",
}


#: What prunes a filtered read: the files' own statistics (row groups), or the metadata
#: table's column statistics too
PRUNING_LAYOUTS: dict[str, dict[str, str]] = {
    "stats": {},
    "column_stats": {
        "hoodie.write.table.version": "8",
        "hoodie.metadata.index.column.stats.enable": "true",
    },
}


def _ids(t: pa.Table) -> list[str]:
    return sorted(t.column("id").to_pylist())


def _expected_ids(full: pa.Table, flt: tuple) -> list[str]:
    """The ids a filter keeps, evaluated on the whole table with no pruning."""
    from hoodie_ray.reader.filters import apply_filters, parse_filters

    return _ids(apply_filters(parse_filters([flt], full.schema), full))


@pytest.mark.parametrize(
    "flt",
    [
        ("p", "=", ""),
        ("p", "IN", [""]),
        ("p", "IN", [None]),
        ("p", "IN", ["", "a"]),
        ("p", "!=", "a"),
        ("p", "<", "a"),
        ("p", "NOT IN", ["a"]),
        ("p", "=", "a"),
        ("p", "=", "__HIVE_DEFAULT_PARTITION__"),
        ("p", "!=", ""),
        ("p", "NOT IN", [""]),
    ],
    ids=str,
)
@pytest.mark.parametrize("hive_style", [False, True], ids=["plain", "hive"])
def test_the_default_partition_holds_empty_values_and_nulls(
    tmp_path: Path, flt: tuple, hive_style: bool
) -> None:
    """Hudi's key generators write a null, an empty value and the value that is its name
    alike to ``__HIVE_DEFAULT_PARTITION__``: partition pruning keeps that partition for a
    filter any of them satisfies, so a filter gives the rows it gives unpruned."""
    path = str(tmp_path / "t")
    opts = {
        **NULLS_OPTS,
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.hive_style_partitioning": str(hive_style).lower(),
    }
    literal = "__HIVE_DEFAULT_PARTITION__"
    rows = pa.table(
        {"id": ["k1", "k2", "k3", "k4"], "ts": [1, 2, 3, 4], "p": ["", None, "a", literal]}
    )
    hr.write(rows, path, opts, engine="local")
    full = hr.read(path)
    want = _expected_ids(full, flt)
    assert _ids(hr.read(path, filters=[flt])) == want
    if flt[1] in ("=", "!=") or flt[2] == [None]:
        assert want  # the case is not vacuous


@pytest.mark.parametrize(
    "flt",
    [("s", "IN", [None]), ("v", "IN", [100, None]), ("s", "IN", ["x", None]), ("v", "IN", [3])],
    ids=str,
)
def test_in_a_list_holding_a_null_is_never_pruned_by_min_and_max(tmp_path: Path, flt) -> None:
    """``IN`` a list holding a null keeps the null rows (the row filter's rule); a row group's
    or a file's min / max say nothing of its nulls, so neither prunes such a filter: the same
    rows with the row groups' statistics and with the metadata table's column statistics."""
    for name, extra in PRUNING_LAYOUTS.items():
        path = str(tmp_path / name)
        rows = pa.table(
            {
                "id": ["a", "b", "c", "d"],
                "ts": [1, 1, 1, 1],
                "s": ["x", None, "y", None],
                "v": [1, None, 3, None],
            }
        )
        hr.write(rows, path, {**NULLS_OPTS, **extra}, engine="local")
        full = hr.read(path)
        assert _ids(hr.read(path, filters=[flt])) == _expected_ids(full, flt), name


@pytest.mark.parametrize(
    "flt",
    [("f", "=", 0.1), ("f", ">=", 0.7), ("f", "<=", 0.1), ("f", "IN", [0.1, 0.7])],
    ids=str,
)
def test_float_statistics_prune_a_column_widened_to_double_as_its_values_read(
    tmp_path: Path, flt
) -> None:
    """A float column widened to double reads its old values through their shortest decimal
    (0.1f is 0.1); the old files' float statistics prune by the same reading (their raw
    0.10000000149 ruled 0.1 out): row-group statistics of base files and log blocks' column
    statistics in the metadata table, before and after the compaction."""
    for name, extra in PRUNING_LAYOUTS.items():
        path = str(tmp_path / name)
        opts = {**NULLS_OPTS, **extra, "compaction.delta_commits": "100"}
        old = pa.table({"id": ["a", "b"], "ts": [1, 1], "f": pa.array([0.1, 0.7], pa.float32())})
        hr.write(old, path, opts, engine="local")
        upd = pa.table({"id": ["b"], "ts": [2], "f": pa.array([0.7], pa.float32())})
        hr.write(upd, path, opts, engine="local")  # a float log block
        new = pa.table({"id": ["c"], "ts": [3], "f": pa.array([0.3], pa.float64())})
        hr.write(new, path, opts, engine="local")  # widens f
        for when in ("before", "after"):
            full = hr.read(path)
            assert full.schema.field("f").type == pa.float64()
            want = _expected_ids(full, flt)
            assert want and _ids(hr.read(path, filters=[flt])) == want, (name, when)
            hr.compact(path, opts)


def test_number_filters_on_a_decimal_column(tmp_path: Path) -> None:
    """A Python int or float compared with a decimal column is read as that number, not
    cast through int64 / double (which needs more digits than the column has)."""
    import decimal

    path = str(tmp_path / "t")
    d = pa.decimal128(10, 2)
    rows = pa.table(
        {
            "id": ["a", "b", "c"],
            "ts": [1, 1, 1],
            "d": pa.array(
                [decimal.Decimal("-1.25"), decimal.Decimal("0"), decimal.Decimal("1.5")], d
            ),
        }
    )
    hr.write(rows, path, NULLS_OPTS, engine="local")
    assert _ids(hr.read(path, filters=[("d", "<", 0)])) == ["a"]
    assert _ids(hr.read(path, filters=[("d", "=", 1.5)])) == ["c"]
    assert _ids(hr.read(path, filters=[("d", "IN", [0, -1.25])])) == ["a", "b"]
    with pytest.raises(HoodieQueryError, match="'d'"):
        hr.read(path, filters=[("d", "=", 0.001)])


# -- reads of instants the cleaner no longer keeps ------------------------------------------------


def _cleaned_table_options(version: str) -> dict[str, str]:
    """A table partitioned by ``city`` whose compactions and cleans run only when asked."""
    return {
        **NULLS_OPTS,
        "hoodie.datasource.write.partitionpath.field": "city",
        "compaction.schedule.enabled": "false",
        "clean.async.enabled": "false",
        "hoodie.write.table.version": version,
    }


@pytest.mark.parametrize("savepoint", [False, True], ids=["no-savepoint", "savepoint"])
@pytest.mark.parametrize("version", ["6", "8"])
def test_reads_after_a_clean_give_what_they_gave_before_or_are_refused(
    tmp_path: Path, version: str, savepoint: bool
) -> None:
    """Every time travel, incremental read and CDC range gives after a clean what it gave
    before it, or a HoodieQueryError: never missing or stale rows. A savepoint older than
    the commits the clean kept holds an older slice of the group, which a read as of a
    cleaned instant must not take for the cleaned one. Reads the clean left whole still
    read, savepoint or not: the retained commits, a partition no later commit rewrote."""
    path = str(tmp_path / "t")
    opts = _cleaned_table_options(version)

    def write(ts: int, city: str = "sf") -> str:
        rows = pa.table(
            {"id": ["a" if city == "sf" else "z"], "ts": [ts], "fare": [float(ts)], "city": [city]}
        )
        return hr.write(rows, path, opts, engine="local").instant

    lone = write(1, "la")  # a partition no later commit rewrites
    i1 = write(1)
    if savepoint:
        hr.savepoint(path)  # keeps the slice of base i1
    i2 = write(2)
    hr.compact(path, opts)
    i3 = write(3)
    i4 = write(4)
    hr.compact(path, opts)
    i5 = write(5)
    i6 = write(6)
    instants = [lone, i1, i2, i3, i4, i5, i6]

    def reads() -> dict[tuple, object]:
        out: dict[tuple, object] = {}
        for at in instants:
            kw: dict[str, object] = {"as_of": at}
            out[("as_of", at)] = kw
        for b in [None, *instants]:
            for e in [*instants, None]:
                if b is not None and e is not None and b >= e:
                    continue
                out[("incremental", b, e)] = {"query_type": "incremental", "begin": b, "end": e}
                out[("cdc", b, e)] = {
                    "query_type": "incremental",
                    "incremental_format": "cdc",
                    "begin": b,
                    "end": e,
                }
        got: dict[tuple, object] = {}
        for name, kw in out.items():
            try:
                t = hr.read(path, **kw)  # type: ignore[arg-type]
            except HoodieQueryError as e:
                got[name] = e
                continue
            cols = ["op", "ts_ms", "before", "after"] if name[0] == "cdc" else ["id", "ts", "fare"]
            got[name] = sorted(map(str, t.select(cols).to_pylist()))
        return got

    before = reads()
    assert not any(isinstance(v, HoodieQueryError) for v in before.values())
    hr.clean(path, {**opts, "clean.retain_commits": "1"})
    retained = hr.HoodieTable.load(path).earliest_retained_commit()
    assert retained is not None and i5 < retained <= i6
    after = reads()
    for name, was in before.items():
        now = after[name]
        assert isinstance(now, HoodieQueryError) or now == was, name
    # what the clean left whole reads
    for name in [("as_of", i6), ("incremental", i5, None), ("cdc", i5, i6), ("cdc", i6, None)]:
        assert after[name] == before[name], name
    assert after[("cdc", None, lone)] == before[("cdc", None, lone)]
    assert after[("incremental", None, lone)] == before[("incremental", None, lone)]
    if savepoint:
        assert after[("as_of", i1)] == before[("as_of", i1)]


@pytest.mark.parametrize("version", ["6", "8"])
def test_reads_before_the_commits_a_clean_kept_are_refused(tmp_path: Path, version: str) -> None:
    """A clean keeps the file slices of the commits from its ``earliestCommitToRetain`` on.
    Time travel to an older instant and a CDC range needing an older slice are refused, even
    where a savepoint kept an older slice of the same file group (read in place of the cleaned
    one, it gave stale rows); the savepointed instant and the retained ones read right."""
    path = str(tmp_path / "t")
    opts = _cleaned_table_options(version)

    def write(ts: int) -> str:
        rows = pa.table({"id": ["a"], "ts": [ts], "fare": [float(ts)], "city": ["sf"]})
        return hr.write(rows, path, opts, engine="local").instant

    i1 = write(1)
    hr.savepoint(path)  # keeps the slice of base i1
    i2 = write(2)
    hr.compact(path, opts)
    i3 = write(3)
    i4 = write(4)
    hr.compact(path, opts)
    i5 = write(5)
    hr.clean(path, {**opts, "clean.retain_commits": "1"})
    retained = hr.HoodieTable.load(path).earliest_retained_commit()
    assert retained is not None and i4 < retained <= i5

    def fare(**kw: object) -> list:
        return hr.read(path, columns=["fare"], **kw).column("fare").to_pylist()

    assert fare(as_of=i1) == [1.0]  # savepointed
    assert fare(as_of=i5) == [5.0]
    for old in (i2, i3, i4):
        with pytest.raises(HoodieQueryError, match="the last clean kept"):
            fare(as_of=old)
    for begin in (None, i2, i3):
        with pytest.raises(HoodieQueryError, match="cleaned"):
            hr.read(path, query_type="incremental", incremental_format="cdc", begin=begin, end=i5)
    assert fare(query_type="incremental", begin=i4) == [5.0]
    cdc = hr.read(path, query_type="incremental", incremental_format="cdc", begin=retained)
    assert [(r["op"], r["after"]["fare"]) for r in cdc.to_pylist()] == (
        [] if retained == i5 else [("u", 5.0)]
    )
