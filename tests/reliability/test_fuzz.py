"""Bad-input and options fuzzing (hypothesis).

Random schemas and values -- null and duplicate keys, NaN and null ordering values, unicode,
``/``, ``=``, ``..`` and very long partition values, very long strings, empty batches, a second
batch of another type, mixed-type pandas columns, nested types, field names Avro refuses --
written in two commits with HoodieWriteClient. Every write must either be read back exactly
by hoodie_ray and by hudi-rs (the model: Hudi's precombine and event-time merge, global
index), or raise a HoodieError and leave the table as it was (no data file, no completed
instant changed; a failed *first* write may leave an initialised table with no commit).

Options likewise: random valid, invalid and unknown options on top of a working set.

CI runs a few dozen examples (derandomized); ``HOODIE_RAY_FULL=1`` runs 600 + 300.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from tests.conftest import hudi_rs_read
from tests.reliability.common import FULL, timeline
from tests.reliability.report import record

DATA_EXAMPLES = 600 if FULL else 60
OPTION_EXAMPLES = 300 if FULL else 30
UTC = dt.timezone.utc
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# -- value strategies ---------------------------------------------------------------------------

TEXT = st.text(max_size=12)
LONG_TEXT = st.text(min_size=300, max_size=3000, alphabet="abcxyzé日本🙂")
ANY_TEXT = st.one_of(TEXT, TEXT, TEXT, LONG_TEXT)
DATES = st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 1, 1))
DATETIMES = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))


def _ints(bits: int, signed: bool = True) -> st.SearchStrategy[int]:
    if signed:
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return st.integers(0, 2**bits - 1)


SCALARS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "int8": (pa.int8(), _ints(8)),
    "int16": (pa.int16(), _ints(16)),
    "int32": (pa.int32(), _ints(32)),
    "int64": (pa.int64(), _ints(64)),
    "uint8": (pa.uint8(), _ints(8, False)),
    "uint32": (pa.uint32(), _ints(32, False)),
    "uint64": (pa.uint64(), _ints(64, False)),
    "float32": (pa.float32(), st.floats(width=32)),
    "float64": (pa.float64(), st.floats()),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), ANY_TEXT),
    "large_string": (pa.large_string(), TEXT),
    "binary": (pa.binary(), st.binary(max_size=16)),
    "date32": (pa.date32(), DATES),
    "ts_us": (pa.timestamp("us"), DATETIMES),
    "ts_ms_utc": (
        pa.timestamp("ms", tz="UTC"),
        DATETIMES.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=UTC)),
    ),
    "ts_ns": (pa.timestamp("ns"), DATETIMES),
    "decimal": (
        pa.decimal128(12, 3),
        st.decimals(min_value=-(10**8), max_value=10**8, places=3, allow_nan=False),
    ),
    "decimal256": (
        pa.decimal256(40, 2),
        st.decimals(min_value=-(10**8), max_value=10**8, places=2, allow_nan=False),
    ),
    "time64": (pa.time64("us"), st.times()),
    "duration": (pa.duration("s"), st.timedeltas(max_value=dt.timedelta(days=999))),
    "null": (pa.null(), st.none()),
    "dict_string": (pa.dictionary(pa.int32(), pa.string()), TEXT),
}


def _nested() -> dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]]:
    i64 = st.none() | _ints(64)
    s = st.none() | TEXT
    return {
        "list_int": (pa.list_(pa.int64()), st.lists(i64, max_size=4)),
        "list_string": (pa.list_(pa.string()), st.lists(s, max_size=4)),
        "struct": (
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
            st.fixed_dictionaries({"a": i64, "b": s}),
        ),
        "map": (pa.map_(pa.string(), pa.int64()), st.dictionaries(TEXT, i64, max_size=3)),
        "list_struct": (
            pa.list_(pa.struct([("x", pa.float64()), ("y", pa.list_(pa.int32()))])),
            st.lists(
                st.fixed_dictionaries(
                    {"x": st.none() | st.floats(), "y": st.lists(st.none() | _ints(32), max_size=2)}
                ),
                max_size=3,
            ),
        ),
    }


TYPES = {**SCALARS, **_nested()}
#: Types Hudi (Avro) cannot store: a batch with one of them must be refused.
UNSTORABLE = ("uint64", "time64", "duration", "decimal256")
STORABLE = sorted(t for t in TYPES if t not in UNSTORABLE)
PARTITION_VALUES = st.one_of(
    st.sampled_from(["a", "b", "x=1", "a/b", "a/b/c", "=", "/", "..", ".", "", "é/日本", "a%2Fb"]),
    TEXT,
    st.text(min_size=200, max_size=400, alphabet="pq"),
)
KEY_TYPES = ("string", "int64", "int32", "large_string", "float64", "binary", "date32")
ORDERING_TYPES = ("int64", "float64", "string", "ts_us", "int32", "decimal", "bool", "list_int")
GOOD_NAMES = st.from_regex(r"\A[a-z][a-z0-9_]{0,8}\Z")
FIELD_NAMES = st.one_of(
    GOOD_NAMES, st.sampled_from(["a-b", "1x", "é", "a b", "_x", "A", "select", "key2"])
)


@st.composite
def batches(draw: Any) -> dict[str, Any]:
    """A schema (key, optional partition and ordering fields, extra columns) and two batches."""
    hostile = draw(st.integers(0, 3)) == 0  # a quarter: names and types Hudi must refuse
    key_t = draw(st.sampled_from(KEY_TYPES))
    part_t = draw(st.sampled_from([None, "string", "string", "int32", "date32"]))
    ord_t = draw(st.sampled_from([None, *ORDERING_TYPES]))
    names = FIELD_NAMES if hostile else GOOD_NAMES
    types = sorted(TYPES) if hostile else STORABLE
    extra_names = draw(st.lists(names, max_size=4, unique=True))
    extra = [
        (n, draw(st.sampled_from(types))) for n in extra_names if n not in ("key", "part", "ts")
    ]
    cols = [("key", key_t)]
    if part_t:
        cols.append(("part", part_t))
    if ord_t:
        cols.append(("ts", ord_t))
    cols += extra
    null_keys = draw(st.integers(0, 5)) == 0
    key_pool = draw(st.lists(TYPES[key_t][1], min_size=1, max_size=6, unique_by=lambda v: repr(v)))

    def rows(n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            r: dict[str, Any] = {}
            for name, t in cols:
                if name == "key":
                    v = draw(st.sampled_from(key_pool))
                    if null_keys and draw(st.integers(0, 9)) == 0:
                        v = None
                elif name == "part" and t == "string":
                    v = draw(st.none() | PARTITION_VALUES)
                else:
                    v = draw(st.none() | TYPES[t][1])
                r[name] = v
            out.append(r)
        return out

    b1 = rows(draw(st.integers(0, 8)))
    b2 = rows(draw(st.integers(0, 8)))
    second_types = dict(cols)
    if draw(st.integers(0, 7)) == 0 and extra:  # the second batch changes a column's type
        name = extra[0][0]
        second_types[name] = draw(st.sampled_from(sorted(SCALARS)))
        b2 = [dict(r, **{name: draw(st.none() | TYPES[second_types[name]][1])}) for r in b2]
    return {
        "cols": cols,
        "types2": second_types,
        "b1": b1,
        "b2": b2,
        "pandas_mixed": draw(st.integers(0, 9)) == 0,
    }


def _table(cols: list[tuple[str, str]], rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([(n, TYPES[t][0]) for n, t in cols])
    return pa.Table.from_pylist(rows, schema=schema)


# -- the model ----------------------------------------------------------------------------------


def _ord_key(v: Any) -> Any:
    """Java's compareTo order for the ordering values (NaN greatest, -0.0 < 0.0)."""
    if isinstance(v, float):
        return (1, 0.0) if math.isnan(v) else (0, v, math.copysign(1.0, v))
    return v


def _newer(new: Any, old: Any) -> bool:
    """Hudi's fold: the newer row wins when its ordering value is >= (or either is null)."""
    if new is None or old is None:
        return True
    try:
        return _ord_key(new) >= _ord_key(old)
    except TypeError:
        return True


def _part_path(v: Any) -> Any:
    return DEFAULT_PARTITION if v is None or v == "" else v


def expected(
    state: dict, rows: list[dict], has_ord: bool, has_part: bool, global_index: bool = True
) -> dict:
    """Apply one committed batch to ``state`` (key -> row, or (key, partition) -> row for a
    non-global index): precombine by key, then merge."""
    latest: dict[Any, dict] = {}
    for r in rows:
        k = _hashable(r["key"])
        cur = latest.get(k)
        if cur is None or not has_ord or _newer(r.get("ts"), cur.get("ts")):
            latest[k] = r
    out = dict(state)
    for k, r in latest.items():
        if not global_index:
            k = (k, _part_path(r.get("part")))
        old = out.get(k)
        if old is None:
            out[k] = r
            continue
        # with an ordering field (event time) a row that names another partition moves the
        # key only when it is newer, as any other update wins only when it is newer
        if not has_ord or _newer(r.get("ts"), old.get("ts")):
            out[k] = r
    return out


def _hashable(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def _normal(v: Any) -> Any:
    """Values as compared after a round trip: NaN equal to NaN, timestamps in UTC."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else v
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    if isinstance(v, decimal.Decimal):
        return v.normalize()
    if isinstance(v, dict):
        return {k: _normal(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_normal(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_normal(x) for x in v)
    return v


def _rows_by_key(table: pa.Table, names: list[str], global_index: bool = True) -> dict[Any, dict]:
    out = {}
    for r in table.select(names).to_pylist():
        k = _hashable(_normal(r["key"]))
        out[k if global_index else (k, _part_path(r.get("part")))] = _normal(r)
    return out


# -- checks -------------------------------------------------------------------------------------


def _snapshot_files(path: Path) -> dict[str, int]:
    """Data files and completed instants: what a failed write must not change."""
    out = {}
    for p in path.rglob("*"):
        rel = p.relative_to(path)
        if not p.is_file() or ".aux" in rel.parts or ".temp" in rel.parts:
            continue
        if rel.parts[0] == ".hoodie" and (
            p.name.endswith((".requested", ".inflight", ".tmp")) or ".rollback" in p.name
        ):
            continue  # a failed write may leave a rolled-back instant's record behind
        out[str(rel)] = p.stat().st_size
    return out


def _check_readers(path: Path, want: dict, names: list[str], global_index: bool = True) -> None:
    want_rows = {k: _normal(r) for k, r in want.items()}
    got = hr.read(str(path))
    assert _rows_by_key(got, names, global_index) == want_rows, "hr.read differs from the model"
    assert got.num_rows == len(want), "hr.read has duplicate keys"
    rs = hudi_rs_read(path)
    if rs.num_rows or want:
        assert _rows_by_key(rs, names, global_index) == want_rows, "hudi-rs differs from the model"
        assert rs.num_rows == len(want), "hudi-rs has duplicate keys"


def _opts(cols: list[tuple[str, str]]) -> dict[str, str]:
    names = [n for n, _ in cols]
    o = {
        "hoodie.table.name": "fuzz",
        "hoodie.datasource.write.recordkey.field": "key",
        "compaction.delta_commits": "1",  # every second commit compacts: base files too
    }
    if "part" in names:
        o["hoodie.datasource.write.partitionpath.field"] = "part"
    if "ts" in names:
        o["precombine.field"] = "ts"
    return o


OUTCOMES: dict[str, int] = {}


def _count(outcome: str) -> None:
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + 1


def _write(path: Path, options: dict[str, str], data: Any) -> str | None:
    """Write; ``None`` on success, the error class name on a HoodieError."""
    try:
        HoodieWriteClient(str(path), options).write(data)
    except hr.HoodieError as e:
        return type(e).__name__
    return None


def run_data_example(case: dict) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hr_fuzz_"))
    try:
        path = tmp / "t"
        cols = case["cols"]
        names = [n for n, _ in cols]
        has_ord, has_part = "ts" in names, "part" in names
        options = _opts(cols)
        try:
            t1 = _table(cols, case["b1"])
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            _count("unbuildable input (arrow)")
            return
        data1: Any = t1
        if case["pandas_mixed"] and t1.num_rows >= 2:
            # a pandas column of ints and strings: Arrow cannot type it
            df = t1.to_pandas()
            df["mixed"] = [1 if i % 2 else "one" for i in range(len(df))]
            data1 = df
        err = _write(path, options, data1)
        if err is not None:
            _count(f"write 1 refused: {err}")
            committed = (
                timeline(path).completed()
                if (path / ".hoodie" / "hoodie.properties").exists()
                else []
            )
            assert committed == [], "a refused first write committed something"
            return
        assert isinstance(data1, pa.Table), "a mixed-type column was accepted"
        _count("write 1 committed" if t1.num_rows else "write 1 empty")
        state = expected({}, t1.to_pylist(), has_ord, has_part)  # values as Arrow holds them
        _check_readers(path, state, names)
        before = _snapshot_files(path)
        cols2 = [(n, case["types2"][n]) for n, _ in cols]
        try:
            t2 = _table(cols2, case["b2"])
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            _count("unbuildable input (arrow)")
            return
        err = _write(path, options, t2)
        if err is not None:
            _count(f"write 2 refused: {err}")
            assert _snapshot_files(path) == before, "a refused write changed the table"
            _check_readers(path, state, names)
            return
        _count("write 2 committed" if t2.num_rows else "write 2 empty")
        state = expected(state, t2.to_pylist(), has_ord, has_part)
        _check_readers(path, state, names)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fuzz_settings(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=not FULL,
        database=None if not FULL else settings.default.database,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def test_fuzz_schemas_and_values():
    OUTCOMES.clear()

    @fuzz_settings(DATA_EXAMPLES)
    @given(batches())
    def check(case: dict) -> None:
        run_data_example(case)

    check()
    record("fuzz_schemas_and_values", examples=DATA_EXAMPLES, outcomes=dict(OUTCOMES), lost=0)


# -- options ------------------------------------------------------------------------------------

BASE_COLS = [("key", "string"), ("part", "string"), ("ts", "int64"), ("v", "float64")]
_OPTION_WORDS = [
    "true",
    "false",
    "yes",
    "0",
    "1",
    "2",
    "-1",
    "7",
    "99999999999999999999",
    "1.5",
    "64MB",
    "1KB",
    "abc",
    "MERGE_ON_READ",
    "COPY_ON_WRITE",
    "cow",
    "upsert",
    "insert",
    "bulk_insert",
    "delete",
    "BUCKET",
    "FLINK_STATE",
    "SIMPLE",
    "avro",
    "parquet",
    "hfile",
    "snappy",
    "gzip",
    "zstd",
    "none",
    "lzo",
    "6",
    "8",
    "9",
    "num_commits",
    "time_elapsed",
    "num_and_time",
    "num_or_time",
    "key",
    "part",
    "ts",
    "v",
    "key,part",
    "nope",
    "COMPLEX",
    "NON_PARTITION",
    "TIMESTAMP",
    "yyyy/MM/dd",
    "EPOCHMILLISECONDS",
    "UNIX_TIMESTAMP",
    "org.apache.hudi.keygen.SimpleKeyGenerator",
]
OPTION_VALUES = st.one_of(st.sampled_from([*_OPTION_WORDS, "", " "]), st.text(max_size=8))


def _option_keys() -> list[str]:
    from hoodie_ray.config.options import OPTIONS

    keys = [o.key for o in OPTIONS]
    for o in OPTIONS:
        keys += list(o.aliases)
    return [*keys, "hoodie.datasource.write.recordkey.feild", "write.taskz", "HOODIE.TABLE.NAME"]


#: What the options example's table was created with: these values do not conflict.
SAME_AS_TABLE = {
    "table_name": ["fuzzopts"] * 8,
    "record_key_field": ["key"] * 8,
    "partition_path_field": ["part"] * 8,
    "precombine_field": ["ts"] * 8,
    "table_type": ["MERGE_ON_READ"] * 8,
}


def _valid_values() -> dict[str, list[str]]:
    """Per option key, the candidate words its parser accepts."""
    from hoodie_ray.config.options import lookup

    out: dict[str, list[str]] = {}
    for key in _option_keys():
        try:
            opt = lookup(key)
        except hr.HoodieOptionError:
            continue
        ok = list(SAME_AS_TABLE.get(opt.attr, ()))
        for w in _OPTION_WORDS:
            try:
                opt.parse(key, w)
            except hr.HoodieError:
                continue
            ok.append(w)
        out[key] = ok
    return out


VALID_VALUES = _valid_values()


@st.composite
def option_sets(draw: Any) -> dict[str, str]:
    chosen = draw(st.lists(st.sampled_from(_option_keys()), min_size=1, max_size=4, unique=True))
    out = {}
    for k in chosen:
        valid = VALID_VALUES.get(k)
        if valid and draw(st.integers(0, 9)) < 7:
            out[k] = draw(st.sampled_from(valid))
        else:
            out[k] = draw(OPTION_VALUES)
    return out


def run_options_example(extra: dict[str, str]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hr_fuzz_opts_"))
    try:
        path = tmp / "t"
        base = {
            "hoodie.table.name": "fuzzopts",
            "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part",
            "precombine.field": "ts",
        }
        good = [{"key": f"k{i}", "part": "p" + str(i % 2), "ts": i, "v": i / 3} for i in range(12)]
        HoodieWriteClient(str(path), base).write(_table(BASE_COLS, good))
        state = expected({}, good, True, True)
        names = [n for n, _ in BASE_COLS]
        before = _snapshot_files(path)
        upd = [{"key": f"k{i}", "part": "p" + str(i % 3), "ts": 100 + i, "v": -i} for i in range(8)]
        options = {**base, **extra}
        try:
            HoodieWriteClient(str(path), options).write(_table(BASE_COLS, upd))
        except hr.HoodieError as e:
            _count(f"refused: {type(e).__name__}")
            assert _snapshot_files(path) == before, "a refused write changed the table"
            _check_readers(path, state, names)
            return
        from hoodie_ray.config.options import resolve_options

        wc = resolve_options(options)
        glob = wc.index_global and wc.index_type != "BUCKET"
        if not glob:  # keys are unique per partition only
            state = {(k, _part_path(r.get("part"))): r for k, r in state.items()}
        if (
            not wc.index_bootstrap
            and wc.index_type != "BUCKET"
            and wc.operation not in ("insert", "bulk_insert")
        ):
            # The writer did not load the table's keys (Flink without restored state): an
            # upsert of an older key may land in another file group (a duplicate), a delete of
            # one does nothing. Every new row must be there, every old key still readable.
            if wc.operation == "delete":
                _count("committed (index not bootstrapped: deletes of older keys do nothing)")
                _check_readers(path, state, names, glob)
                return
            _count("committed (index not bootstrapped: duplicates allowed)")
            new_rows = {(r["key"], r["ts"], r["v"]) for r in upd}
            for t in (hr.read(str(path)), hudi_rs_read(path)):
                got = {
                    (r["key"], r["ts"], r["v"]) for r in t.select(["key", "ts", "v"]).to_pylist()
                }
                assert new_rows <= got, "an upsert is missing"
                assert {r["key"] for r in t.select(["key"]).to_pylist()} >= {
                    k if glob else k[0] for k in state
                }, "a key was lost"
            return
        if wc.operation == "delete":
            for r in upd:
                state.pop(r["key"] if glob else (r["key"], _part_path(r["part"])), None)
        elif wc.operation in ("insert", "bulk_insert"):
            _count("committed (insert: duplicates allowed)")
            t = hr.read(str(path))
            assert t.num_rows >= len(state)
            return
        else:
            state = expected(state, upd, True, True, glob)
        _count("committed")
        _check_readers(path, state, names, glob)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_fuzz_options():
    OUTCOMES.clear()

    @fuzz_settings(OPTION_EXAMPLES)
    @given(option_sets())
    def check(extra: dict[str, str]) -> None:
        run_options_example(extra)

    check()
    record("fuzz_options", examples=OPTION_EXAMPLES, outcomes=dict(OUTCOMES), lost=0)


@pytest.mark.parametrize(
    "partition", ["a/b", "x=1", "é/日本", "..", ".", "", "p" * 300, "a%2Fb", "/", "=", "a//b"]
)
def test_partition_values_with_path_characters(tmp_path, partition):
    """The partition values a user can send, one at a time: committed and read back exactly,
    or refused with a HoodieError before anything is committed."""
    path = tmp_path / "t"
    rows = [
        {"key": "k1", "part": partition, "ts": 1, "v": 1.0},
        {"key": "k2", "part": "plain", "ts": 1, "v": 2.0},
    ]
    options = {
        "hoodie.table.name": "parts",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "part",
        "precombine.field": "ts",
    }
    err = _write(path, options, _table(BASE_COLS, rows))
    names = [n for n, _ in BASE_COLS]
    if err is None:
        _check_readers(path, expected({}, rows, True, True), names)
    else:
        assert not list(path.rglob("*.parquet")), f"{err}: data files left behind"
