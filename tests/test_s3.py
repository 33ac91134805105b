"""Object storage: the write core's model test on ``s3://`` against a local S3 server (moto).

One moto server per test session, bound to 127.0.0.1 on a free port, with dummy credentials
(nothing here can reach a real account). Tables are written through ``ArrowStorage``
(``pyarrow.fs.S3FileSystem(**storage_options)``), where appends do not exist: every log
append rolls a new log file version. After each commit, hudi-rs (the oracle) reads the table
from the same server and must see exactly the model's rows.
"""

from __future__ import annotations

import json
import logging
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from tests.write.model import (
    OPTIONS,
    SCHEMA,
    TableModel,
    Workload,
    model_options,
    run_random_commits,
    to_arrow,
)

BUCKET = "hoodie-ray-tests"
ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key-never-printed"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 for the session, with the test bucket; yields its URL."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as e:  # pragma: no cover - moto[server] is a dev dependency
        pytest.skip(f"the S3 tests need moto[server]: {e}")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(**_arrow_options(endpoint), allow_bucket_creation=True)
        fs.create_dir(BUCKET)
        yield endpoint
    finally:
        server.stop()


def _arrow_options(endpoint: str) -> dict[str, str]:
    return {
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
        "endpoint_override": endpoint,
        "scheme": "http",
        "region": REGION,
    }


@pytest.fixture
def storage_options(s3_endpoint: str) -> dict[str, str]:
    """``storage_options`` for ``hr.write`` / ``HoodieWriteClient`` / ``hr.read``."""
    return _arrow_options(s3_endpoint)


@pytest.fixture
def s3_path(s3_endpoint: str, request: pytest.FixtureRequest) -> str:
    """A fresh table path in the bucket, named after the test."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"


def hudi_rs_options(endpoint: str) -> dict[str, str]:
    """hudi-rs (object_store) options for the moto server."""
    return {
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
        "aws_endpoint_url": endpoint,
        "aws_allow_http": "true",
        "aws_region": REGION,
    }


def hudi_rs_s3_snapshot(path: str, endpoint: str) -> pa.Table:
    """The snapshot hudi-rs reads from S3, in the model's shape (data columns, sorted by key)."""
    from hudi import HudiTable

    t = HudiTable(path, hudi_rs_options(endpoint))
    batches = t.read()
    if not batches or sum(b.num_rows for b in batches) == 0:
        return SCHEMA.empty_table()
    return pa.Table.from_batches(batches).select(SCHEMA.names).sort_by("key").cast(SCHEMA)


def _has_compaction() -> bool:
    try:
        import hoodie_ray.compaction  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize(
    ("table_type", "block_format", "commits"),
    [
        # 3 delta commits: the writer's compaction (every 2 delta commits) runs on S3 too
        # suite time: slow too; writes read back by hudi-rs from S3 run in CI in
        # test_log_appends_roll_versions_on_s3 (S3 also in tests/security/test_secrets.py and
        # tests/write/test_lock_providers.py); the random model with its compactions in
        # tests/write/test_write_model.py
        pytest.param("MERGE_ON_READ", "avro", 3, marks=pytest.mark.slow),
        pytest.param("MERGE_ON_READ", "parquet", 7, marks=pytest.mark.slow),  # suite time
        pytest.param("COPY_ON_WRITE", "avro", 5, marks=pytest.mark.slow),  # suite time
    ],
)
def test_model_random_commits_s3(
    s3_path: str,
    s3_endpoint: str,
    storage_options: dict[str, str],
    table_type: str,
    block_format: str,
    commits: int,
) -> None:
    """Random commits (upserts with deletes and late records, deletes, inserts) on S3; after
    each, hudi-rs must read exactly the model."""
    opts = model_options(
        {"hoodie.logfile.data.block.format": block_format, "compaction.delta_commits": "2"},
        table_type=table_type,
        small_files=True,
    )
    model = run_random_commits(
        s3_path,
        opts,
        commits=commits,
        seed=len(table_type + block_format),
        snapshot=lambda: hudi_rs_s3_snapshot(s3_path, s3_endpoint),
        storage_options=storage_options,
    )
    # the table on S3 is a well-formed Hudi table for hoodie_ray's own reader and views too
    t = hr.HoodieTable.load(s3_path, storage_options)
    assert all(i.is_completed for i in t.timeline)
    # the writes (and, on MOR, the compaction the writer schedules after 2 delta commits)
    assert len(t.active_timeline.completed_commits()) >= commits
    if table_type == "MERGE_ON_READ" and _has_compaction():
        assert any(i.action == "commit" for i in t.timeline), "no compaction ran on S3"
    assert t.latest_file_slices()
    snap = hr.read(s3_path, storage_options=storage_options, columns=SCHEMA.names)
    assert snap.sort_by("key").cast(SCHEMA).to_pylist() == model.as_table().to_pylist()


def test_log_appends_roll_versions_on_s3(
    s3_path: str, s3_endpoint: str, storage_options: dict[str, str]
) -> None:
    """No appends on object stores: a second delta commit to a file group writes a new log
    version, never rewrites the first one."""
    wl = Workload(3, keys=10, partitions=("a",))
    model = TableModel()
    batches = [wl.rows_for(wl.keys) for _ in range(3)]
    for rows in batches:
        model.write(s3_path, OPTIONS, "upsert", rows, storage_options=storage_options)
    (fs,) = hr.HoodieTable.load(s3_path, storage_options).latest_file_slices()
    assert fs.base_file is not None
    assert len(fs.log_files) == 2
    assert [n.rsplit(".log.", 1)[1].split("_")[0] for n in fs.log_files] == ["1", "2"]
    assert hudi_rs_s3_snapshot(s3_path, s3_endpoint).to_pylist() == model.as_table().to_pylist()


def test_missing_table_and_bad_credentials_on_s3(
    s3_endpoint: str, storage_options: dict[str, str]
) -> None:
    from hoodie_ray.exceptions import HoodieError, HoodieTableNotFoundError

    with pytest.raises(HoodieTableNotFoundError):
        hr.HoodieTable.load(f"s3://{BUCKET}/no-such-table", storage_options)
    bad = {**storage_options, "secret_key": "wrong-secret-value"}
    with pytest.raises(HoodieError) as ei:
        HoodieWriteClient(f"s3://no-such-bucket-{uuid.uuid4().hex[:6]}/t", OPTIONS, bad).write(
            to_arrow([Workload(1)._row("k1")], True)
        )
    assert "wrong-secret-value" not in str(ei.value)


def test_cli_on_s3_never_prints_credentials(
    s3_path: str,
    s3_endpoint: str,
    storage_options: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hoodie_ray.cli import main

    wl = Workload(5)
    rows = wl.rows_for(wl.keys[:20])
    res = HoodieWriteClient(s3_path, OPTIONS, storage_options).write(to_arrow(rows, True))
    args = [a for k, v in storage_options.items() for a in ("--storage-option", f"{k}={v}")]

    capsys.readouterr()
    assert main(["timeline", s3_path, *args, "--output", "json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [i["instant"] for i in doc["instants"]] == [res.instant]
    assert SECRET_KEY not in out + err and ACCESS_KEY not in out + err

    # the same through the environment variable, as a table
    monkeypatch.setenv("HOODIE_RAY_STORAGE_OPTIONS", json.dumps(storage_options))
    assert main(["fsview", s3_path]) == 0
    out, err = capsys.readouterr()
    assert "3 file slices in 3 partitions" in out
    assert SECRET_KEY not in out + err

    # no table there: one line, no secret
    assert main(["commits", "show", f"s3://{BUCKET}/nothing-here"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "not a Hudi table" in err
    assert SECRET_KEY not in err and ACCESS_KEY not in err


@pytest.mark.ray
# suite time: storage_options reach the actors of a Ray write to S3 in CI in
# tests/security/test_secrets.py::test_ray_actors_never_leak
@pytest.mark.slow
def test_hr_write_ray_engine_on_s3(
    ray_session: Any, s3_path: str, s3_endpoint: str, storage_options: dict[str, str]
) -> None:
    """``storage_options`` reach the writer actors (other processes) through hr.write."""
    wl = Workload(9)
    model = TableModel()
    first = wl.rows_for(wl.keys[:30])
    second = wl.rows_for(wl.keys[20:40])  # updates, new keys, a delete
    second[0]["_hoodie_is_deleted"] = True
    for n, rows in enumerate((first, second)):
        hr.write(
            to_arrow(rows, True),
            s3_path,
            {**OPTIONS, "write.tasks": "1"},
            storage_options=storage_options,
        )
        model.upsert(rows)
        got = hudi_rs_s3_snapshot(s3_path, s3_endpoint)
        assert got.to_pylist() == model.as_table().to_pylist(), f"commit {n}"


def test_base_file_footers_are_kept_lean_on_s3(
    s3_path: str,
    s3_endpoint: str,
    storage_options: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A base file read from an object store keeps its footer without the bloom filter, by
    URI and size: a second read parses no footer, and a file of another size under the same
    name is read as it now is. A small file is read whole at first, a large one in ranges."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from hoodie_ray.index.bloom_filter import BLOOM_FILTER_FOOTER_KEY
    from hoodie_ray.reader.file_slice_reader import PARQUET_FOOTERS

    wl = Workload(2, keys=40, partitions=("a",))
    model = TableModel()
    model.write(s3_path, OPTIONS, "insert", wl.rows_for(wl.keys), storage_options=storage_options)
    PARQUET_FOOTERS.clear()
    first = hr.read(s3_path, storage_options=storage_options)
    assert len(PARQUET_FOOTERS) == 1
    (fs,) = hr.HoodieTable.load(s3_path, storage_options).latest_file_slices()
    assert fs.base_file is not None
    uri = f"{s3_path}/a/{fs.base_file}"
    s3 = pafs.S3FileSystem(**storage_options)
    obj = uri.removeprefix("s3://")
    size = s3.get_file_info(obj).size
    kept = PARQUET_FOOTERS.get((uri, size))
    assert kept is not None and kept.metadata.metadata[BLOOM_FILTER_FOOTER_KEY.encode()] == b""
    # read again through the kept footer: none is read or parsed
    from hoodie_ray.reader import file_slice_reader

    def no_footer_read(read_at: object, size: int) -> None:
        raise AssertionError("the kept footer was not used")

    monkeypatch.setattr(file_slice_reader, "read_footer", no_footer_read)
    assert hr.read(s3_path, storage_options=storage_options).equals(first)
    assert len(PARQUET_FOOTERS) == 1 and PARQUET_FOOTERS.get((uri, size)) is kept
    monkeypatch.undo()

    # read in ranges (the footer's end, its start), as a file over the whole-read bound is
    monkeypatch.setattr(file_slice_reader, "WHOLE_READ_MAX_BYTES", 0)
    PARQUET_FOOTERS.clear()
    assert hr.read(s3_path, storage_options=storage_options).equals(first)
    ranged = PARQUET_FOOTERS.get((uri, size))
    assert ranged is not None and ranged.metadata.metadata == kept.metadata.metadata
    monkeypatch.undo()

    # rewritten by hand with fewer rows: another size, another footer
    with s3.open_input_file(obj) as f:
        rows = pq.read_table(f)
    with s3.open_output_stream(obj) as out:
        pq.write_table(rows.slice(5), out)
    again = hr.read(s3_path, storage_options=storage_options)
    assert again.num_rows == first.num_rows - 5
    assert len(PARQUET_FOOTERS) == 2
    PARQUET_FOOTERS.clear()
