from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from hoodie_ray.exceptions import HoodieInputError, HoodieOptionError, HoodieSchemaError
from hoodie_ray.keygen import (
    DEFAULT_PARTITION_PATH,
    TimestampFormat,
    choose_key_generator,
    java_date_format_to_strftime,
    stringify_column,
)


def _t(**cols):
    return pa.table(cols)


def test_choice_follows_flink_rules():
    t = _t(id=[1], a=[1], p=["x"], q=["y"], ts=pa.array([0], pa.timestamp("us")))
    assert choose_key_generator(t.schema, ["id"], []).keygen_type == "NON_PARTITION"
    assert choose_key_generator(t.schema, ["id"], ["p"]).keygen_type == "SIMPLE"
    assert choose_key_generator(t.schema, ["id", "a"], ["p"]).keygen_type == "COMPLEX"
    assert choose_key_generator(t.schema, ["id"], ["p", "q"]).keygen_type == "COMPLEX"
    tsf = TimestampFormat("yyyyMMdd")
    assert choose_key_generator(t.schema, ["id"], ["ts"], timestamp=tsf).keygen_type == "TIMESTAMP"


def test_missing_field_message():
    t = _t(id=[1])
    with pytest.raises(HoodieSchemaError, match="Field nope does not exist"):
        choose_key_generator(t.schema, ["id"], ["nope"])
    with pytest.raises(HoodieSchemaError, match="Field key does not exist"):
        choose_key_generator(t.schema, ["key"], [])


def test_simple_and_hive_and_defaults():
    t = _t(id=[1, 2, 3], city=["sf", None, ""])
    kg = choose_key_generator(t.schema, ["id"], ["city"], hive_style=True)
    assert kg.record_keys(t).to_pylist() == ["1", "2", "3"]
    assert kg.partition_paths(t).to_pylist() == [
        "city=sf",
        f"city={DEFAULT_PARTITION_PATH}",
        f"city={DEFAULT_PARTITION_PATH}",
    ]


def test_complex_key_matches_java_sample_format():
    # sample_cow_v6_complexkeygen_hivestyle: keys like "id:2,name:Bob", partitions byteField=20/shortField=100
    t = _t(
        id=[2, 3],
        name=["Bob", None],
        byteField=pa.array([20, 10], pa.int8()),
        shortField=pa.array([100, 300], pa.int16()),
    )
    kg = choose_key_generator(
        t.schema, ["id", "name"], ["byteField", "shortField"], hive_style=True
    )
    assert kg.record_keys(t).to_pylist() == ["id:2,name:Bob", "id:3,name:__null__"]
    assert kg.partition_paths(t).to_pylist() == [
        "byteField=20/shortField=100",
        "byteField=10/shortField=300",
    ]


def test_null_key_is_an_error_naming_the_field():
    t = _t(id=pa.array([1, None]), p=["a", "b"])
    kg = choose_key_generator(t.schema, ["id"], ["p"])
    with pytest.raises(HoodieInputError, match="record key field id"):
        kg.record_keys(t)
    t2 = _t(a=pa.array([None], pa.string()), b=pa.array([""]))
    kg2 = choose_key_generator(t2.schema, ["a", "b"], [])
    with pytest.raises(HoodieInputError, match="all null or empty"):
        kg2.record_keys(t2)


def test_empty_key_is_an_error_in_any_slice_of_the_batch():
    t = _t(id=pa.array(["a", "b", "", "c"]), p=["x"] * 4)
    kg = choose_key_generator(t.schema, ["id"], ["p"])
    with pytest.raises(HoodieInputError, match="1 row\\(s\\) \\(first at row 2\\)"):
        kg.record_keys(t)
    with pytest.raises(HoodieInputError, match="first at row 0"):
        kg.record_keys(t.slice(2, 2))  # a slice: its offsets start inside the buffer
    assert kg.record_keys(t.slice(3, 1)).to_pylist() == ["c"]
    assert kg.record_keys(t.slice(0, 2)).to_pylist() == ["a", "b"]
    assert kg.record_keys(t.slice(0, 0)).to_pylist() == []


def test_partition_paths_of_repeated_null_and_empty_values_in_a_chunked_column():
    """Each distinct value becomes a segment once and is spread to its rows: nulls and empty
    values take the default partition, every row keeps its own value, in order."""
    col = pa.chunked_array([pa.array(["b", None, "a/b", "b"]), pa.array(["", "a/b", None])])
    t = pa.table({"id": pa.array(range(7)), "p": col, "q": pa.array([1, 2, 1, 2, 1, 2, 1])})
    d = DEFAULT_PARTITION_PATH
    kg = choose_key_generator(t.schema, ["id"], ["p", "q"], hive_style=True, url_encode=True)
    assert kg.partition_paths(t).to_pylist() == [
        "p=b/q=1", f"p={d}/q=2", "p=a%2Fb/q=1", "p=b/q=2", f"p={d}/q=1", "p=a%2Fb/q=2",
        f"p={d}/q=1",
    ]  # fmt: skip
    plain = choose_key_generator(t.schema, ["id"], ["q"])
    assert plain.partition_paths(t.slice(5, 2)).to_pylist() == ["2", "1"]
    assert plain.partition_paths(t.slice(0, 0)).to_pylist() == []
    with pytest.raises(HoodieInputError, match="has the value 'a/b'"):
        choose_key_generator(t.schema, ["id"], ["p"]).partition_paths(t)


def test_java_string_values():
    assert stringify_column(
        pa.array([1.0, 1e10, 0.001, 1.5e-5, -0.0, 123456.789]), "f"
    ).to_pylist() == ["1.0", "1.0E10", "0.001", "1.5E-5", "-0.0", "123456.789"]
    assert stringify_column(pa.array([True, False]), "b").to_pylist() == ["true", "false"]
    assert stringify_column(pa.array([dt.date(2023, 4, 1)]), "d").to_pylist() == ["2023-04-01"]
    assert stringify_column(
        pa.array([decimal.Decimal("1.50000")], pa.decimal128(10, 5)), "d"
    ).to_pylist() == ["1.50000"]


@pytest.mark.parametrize(
    "value", ["../../outside", "/abs", "a/b", "x\x00y", "..", ".", "a\\b", "c\nd"]
)
def test_unsafe_partition_values_refused_without_encoding(value):
    t = _t(id=[1], p=[value])
    kg = choose_key_generator(t.schema, ["id"], ["p"])
    with pytest.raises(HoodieInputError, match="partition field p"):
        kg.partition_paths(t)


@pytest.mark.parametrize(
    "value,encoded",
    [
        ("a/b", "a%2Fb"),
        ("/abs", "%2Fabs"),
        ("x\x00y", "x%00y"),
        ("k=v", "k%3Dv"),
        ("50%", "50%25"),
        ("a\\b", "a%5Cb"),
    ],
)
def test_url_encoding_matches_hive_escaping(value, encoded):
    t = _t(id=[1], p=[value])
    kg = choose_key_generator(t.schema, ["id"], ["p"], url_encode=True)
    assert kg.partition_paths(t).to_pylist() == [encoded]


def test_dotdot_refused_even_when_encoded():
    t = _t(id=[1], p=[".."])
    kg = choose_key_generator(t.schema, ["id"], ["p"], url_encode=True)
    with pytest.raises(HoodieInputError, match=r"'\.\.'"):
        kg.partition_paths(t)


def test_timestamp_partitions():
    t = _t(
        id=[1, 2],
        ts=pa.array(
            [dt.datetime(2023, 4, 1, 12, 30), dt.datetime(2023, 4, 2, 13)], pa.timestamp("us")
        ),
    )
    kg = choose_key_generator(t.schema, ["id"], ["ts"], timestamp=TimestampFormat("yyyy/MM/dd/HH"))
    assert kg.partition_paths(t).to_pylist() == ["2023/04/01/12", "2023/04/02/13"]
    t2 = _t(id=[1], ms=[1680352200000])
    kg2 = choose_key_generator(
        t2.schema, ["id"], ["ms"], timestamp=TimestampFormat("yyyyMMdd", "EPOCHMILLISECONDS")
    )
    assert kg2.partition_paths(t2).to_pylist() == ["20230401"]
    assert java_date_format_to_strftime("yyyy-MM-dd'T'HH") == "%Y-%m-%dT%H"
    with pytest.raises(HoodieOptionError):
        java_date_format_to_strftime("EEE")


def test_date_strings_in_the_input_timezone_and_a_list_of_formats():
    """DATE_STRING values without an offset are wall-clock times of the input timezone (Java's
    ``hoodie.keygen.timebased.timezone`` is both zones; they were read as UTC, so Tokyo's
    23:00 on Jan 1 went to Jan 2); values with one keep their instant; the input format may
    be a comma-separated list, each value parsed by the first that matches."""
    t = _t(id=[1, 2, 3], d=["2024-01-01 23:00:00", "2024-01-01T20:00:00Z", "2024/03/05"])
    fmt = "yyyy-MM-dd HH:mm:ss,yyyy-MM-dd'T'HH:mm:ssZ,yyyy/MM/dd"
    tokyo = TimestampFormat(
        "yyyy-MM-dd", "DATE_STRING", fmt, timezone="Asia/Tokyo", input_timezone="Asia/Tokyo"
    )
    kg = choose_key_generator(t.schema, ["id"], ["d"], timestamp=tokyo)
    assert kg.partition_paths(t).to_pylist() == ["2024-01-01", "2024-01-02", "2024-03-05"]
    utc = TimestampFormat("yyyy-MM-dd", "DATE_STRING", fmt)
    kg = choose_key_generator(t.schema, ["id"], ["d"], timestamp=utc)
    assert kg.partition_paths(t).to_pylist() == ["2024-01-01", "2024-01-01", "2024-03-05"]
    bad = _t(id=[1], d=["01.02.2024"])
    kg = choose_key_generator(bad.schema, ["id"], ["d"], timestamp=utc)
    with pytest.raises(HoodieInputError, match="field d: value '01.02.2024'"):
        kg.partition_paths(bad)


def test_a_wall_clock_time_the_input_zone_skips_is_refused():
    """02:30 on the day New York's clocks jump from 02:00 to 03:00 is no instant: Joda's
    parser throws, so Java's write fails; it was taken as 01:59:59.999999 silently. An
    hour that happens twice (the fall back) is its earlier instant, as Joda reads it."""
    fmt = "yyyy-MM-dd HH:mm:ss"
    ny = TimestampFormat("yyyy-MM-dd-HH", "DATE_STRING", fmt, input_timezone="America/New_York")
    gap = _t(id=[1, 2], d=["2024-03-10 01:30:00", "2024-03-10 02:30:00"])
    kg = choose_key_generator(gap.schema, ["id"], ["d"], timestamp=ny)
    with pytest.raises(HoodieInputError, match="field d: value '2024-03-10 02:30:00'.*New_York"):
        kg.partition_paths(gap)
    twice = _t(id=[1], d=["2024-11-03 01:30:00"])
    utc_out = TimestampFormat(
        "yyyy-MM-dd-HH", "DATE_STRING", fmt, timezone="UTC", input_timezone="America/New_York"
    )
    kg = choose_key_generator(twice.schema, ["id"], ["d"], timestamp=utc_out)
    assert kg.partition_paths(twice).to_pylist() == ["2024-11-03-05"]  # EDT, UTC-4


def test_nested_key_type_refused():
    t = _t(id=[[1]], p=["a"])
    with pytest.raises(HoodieSchemaError, match="field id"):
        choose_key_generator(t.schema, ["id"], ["p"])


def test_the_timebased_timezone_option_is_both_zones_of_a_table(tmp_path):
    """``hoodie.keygen.timebased.timezone`` sets the input and the output zone (it was the
    output zone's alias only); a new table keeps it in its properties, as Java keeps the zone
    properties that were set, so the next writer reads its values the same way."""
    import hoodie_ray as hr
    from hoodie_ray.table import HoodieTable

    opts = {
        "hoodie.table.name": "tz",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "d",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
        "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd HH:mm:ss",
        "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd",
        "hoodie.keygen.timebased.timezone": "Asia/Tokyo",
    }
    path = str(tmp_path / "t")
    hr.write(_t(id=["a"], d=["2024-01-01 23:00:00"]), path, opts, engine="local")
    props = HoodieTable.load(path).table_config.props
    assert props["hoodie.keygen.timebased.timezone"] == "Asia/Tokyo"
    without = {k: v for k, v in opts.items() if "timezone" not in k}
    hr.write(_t(id=["b"], d=["2024-01-01 23:30:00"]), path, without, engine="local")
    parts = hr.read(path).column("_hoodie_partition_path").to_pylist()
    assert parts == ["2024-01-01", "2024-01-01"]


def _tz_options(**zones):
    return {
        "hoodie.table.name": "tz",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "d",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
        "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd HH:mm:ss,yyyy-MM-dd'T'HH:mm:ssXXX",
        "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd",
        "index.global.enabled": "false",
        **{f"hoodie.keygen.timebased.{k.replace('_', '.')}": v for k, v in zones.items()},
    }


def test_without_an_output_zone_a_date_string_keeps_its_own_zone():
    """Java's HoodieDateTimeParser has no output zone unless ``timezone`` or
    ``output.timezone`` is set; TimestampBasedAvroKeyGenerator then prints a DATE_STRING value
    in the zone it was parsed in: the input zone, else the offset it carries, else UTC (the JVM
    default). Tokyo's 2024-01-02 05:00 is partition 2024-01-02, not UTC's 2024-01-01."""
    t = _t(
        id=[1, 2, 3],
        d=["2024-01-02 05:00:00", "2024-01-02T05:00:00+09:00", "2024-01-01T20:00:00Z"],
    )
    fmt = "yyyy-MM-dd HH:mm:ss,yyyy-MM-dd'T'HH:mm:ssXXX"
    tokyo_in = TimestampFormat("yyyy-MM-dd", "DATE_STRING", fmt, input_timezone="Asia/Tokyo")
    kg = choose_key_generator(t.schema, ["id"], ["d"], timestamp=tokyo_in)
    assert kg.partition_paths(t).to_pylist() == ["2024-01-02", "2024-01-02", "2024-01-02"]
    no_zone = TimestampFormat("yyyy-MM-dd", "DATE_STRING", fmt)
    kg = choose_key_generator(t.schema, ["id"], ["d"], timestamp=no_zone)
    # the first in UTC, the second in its +09:00, the third in its Z
    assert kg.partition_paths(t).to_pylist() == ["2024-01-02", "2024-01-02", "2024-01-01"]
    utc_out = TimestampFormat("yyyy-MM-dd", "DATE_STRING", fmt, timezone="UTC")
    kg = choose_key_generator(t.schema, ["id"], ["d"], timestamp=utc_out)
    assert kg.partition_paths(t).to_pylist() == ["2024-01-02", "2024-01-01", "2024-01-01"]
    # numbers have no zone of their own: with no output zone they print in UTC
    ms = _t(id=[1], d=[1704146400000])  # 2024-01-01T22:00:00Z
    tokyo_ms = TimestampFormat("yyyy-MM-dd", "EPOCHMILLISECONDS", input_timezone="Asia/Tokyo")
    kg = choose_key_generator(ms.schema, ["id"], ["d"], timestamp=tokyo_ms)
    assert kg.partition_paths(ms).to_pylist() == ["2024-01-01"]


def test_a_table_with_only_the_input_zone_partitions_in_it(tmp_path):
    """``hoodie.keygen.timebased.input.timezone`` alone: the table keeps that key only (no
    output zone, as Java persists what was set), and its values print in the input zone."""
    import hoodie_ray as hr
    from hoodie_ray.table import HoodieTable

    path = str(tmp_path / "t")
    opts = _tz_options(input_timezone="Asia/Tokyo")
    hr.write(_t(id=["a"], d=["2024-01-02 05:00:00"]), path, opts, engine="local")
    props = HoodieTable.load(path).table_config.props
    zones = {k: v for k, v in props.items() if k.startswith("hoodie.keygen.timebased.")}
    assert {k: v for k, v in zones.items() if "timezone" in k} == {
        "hoodie.keygen.timebased.input.timezone": "Asia/Tokyo"
    }
    assert hr.read(path).column("_hoodie_partition_path").to_pylist() == ["2024-01-02"]


def test_a_later_writer_cannot_change_the_zones_of_a_table(tmp_path):
    """A table made without any zone option partitions in UTC (its values carry no offset);
    a later writer's ``timezone=Asia/Tokyo`` would put the same value in another partition
    (it read the input as Tokyo but kept the table's output zone), so two rows for one key
    under a non-global index: such an option is refused; one that leaves the zones as they
    are (``input.timezone`` beside the table's ``timezone``, which Java reads over it) is not."""
    import hoodie_ray as hr

    path = str(tmp_path / "t")
    hr.write(_t(id=["a"], d=["2024-01-02 05:00:00"]), path, _tz_options(), engine="local")
    with pytest.raises(HoodieOptionError, match="hoodie.keygen.timebased.timezone=Asia/Tokyo"):
        hr.write(
            _t(id=["a"], d=["2024-01-02 05:00:00"]),
            path,
            _tz_options(timezone="Asia/Tokyo"),
            engine="local",
        )
    hr.write(_t(id=["a"], d=["2024-01-02 05:00:00"]), path, _tz_options(), engine="local")
    assert hr.read(path).column("_hoodie_partition_path").to_pylist() == ["2024-01-02"]

    tokyo = str(tmp_path / "tokyo")
    hr.write(
        _t(id=["a"], d=["2024-01-01 20:00:00"]),
        tokyo,
        _tz_options(timezone="Asia/Tokyo"),
        engine="local",
    )
    hr.write(
        _t(id=["a"], d=["2024-01-01 20:00:00"]),
        tokyo,
        _tz_options(input_timezone="UTC"),
        engine="local",
    )
    # were the second writer's input zone taken (UTC in, Tokyo out) it would be 2024-01-02
    assert hr.read(tokyo).column("_hoodie_partition_path").to_pylist() == ["2024-01-01"]
    with pytest.raises(HoodieOptionError, match="zone"):
        hr.write(
            _t(id=["a"], d=["2024-01-01 20:00:00"]),
            tokyo,
            _tz_options(output_timezone="UTC", timezone="UTC"),
            engine="local",
        )


def test_utc_options_on_a_table_that_keeps_only_a_utc_output_zone(tmp_path):
    """A table earlier hoodie_ray versions made keeps ``output.timezone=UTC`` only; its unset
    input zone reads values as UTC, so a later write naming UTC (as input, or as both zones)
    partitions alike and is taken (it was refused as a change of zones); Tokyo is not."""
    import hoodie_ray as hr

    path = str(tmp_path / "t")
    opts = _tz_options(output_timezone="UTC")
    hr.write(_t(id=["a"], d=["2024-01-02 05:00:00"]), path, opts, engine="local")
    for zones in ({"input_timezone": "UTC"}, {"timezone": "UTC"}, {"timezone": "GMT"}):
        row = _t(id=["a"], d=["2024-01-02 06:00:00"])
        hr.write(row, path, _tz_options(**zones), engine="local")
    with pytest.raises(hr.HoodieOptionError, match="another partition"):
        hr.write(row, path, _tz_options(input_timezone="Asia/Tokyo"), engine="local")
    assert hr.read(path).column("_hoodie_partition_path").to_pylist() == ["2024-01-02"]
