"""Planted credentials never leak: not in logs, exceptions, reprs, commit files or CLI output.

A local S3 (moto's server) holds the table; every call passes storage options whose access key,
secret key and session token contain the marker ``PLANTED``. The tests write, read, compact,
clean and roll back through those options, provoke errors (missing table and bucket, bad option
keys, unreachable endpoint, refused input, credentials in the URI), and then search for the
marker in: every log record and everything written to stdout/stderr, the text, repr and full
traceback of every exception, the repr of every object that holds the options (storage, table,
snapshot, read context, write context, coordinator, compaction service, write client...), every
file of the table, and the output of the CLI. The Ray test does the same for the actors.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieError, HoodiePathError
from hoodie_ray.storage import ArrowStorage, open_storage, redact_options
from tests.conftest import without_ray_log_lines
from tests.security import OPTIONS, rows

MARK = "PLANTED"
ACCESS_KEY = "AKIAPLANTEDACCESS0001"
SECRET_KEY = "hoodieRayPLANTEDsecretKey0123456789abcdef"
SESSION_TOKEN = "hoodieRayPLANTEDsessionToken9876543210"
BUCKET = "sec-bucket"
SERVER_LOGGERS = ("werkzeug", "moto", "botocore", "boto3", "urllib3", "s3transfer")


def _leaks(text: str) -> bool:
    return MARK in text or MARK.lower() in text.lower()


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    """A moto S3 server on localhost with one bucket; yields the storage options."""
    server_mod = pytest.importorskip("moto.server", reason="moto[server] is a dev dependency")
    import pyarrow.fs as pafs

    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {
            "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY,
            "session_token": SESSION_TOKEN,
            "endpoint_override": f"{host}:{port}",
            "scheme": "http",
            "region": "us-east-1",
        }
        pafs.S3FileSystem(**options, allow_bucket_creation=True).create_dir(BUCKET)
        yield options
    finally:
        server.stop()


class Evidence:
    """Every text a user or an operator could see."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def add(self, where: str, text: Any) -> None:
        self.texts.append((where, text if isinstance(text, str) else repr(text)))

    def error(self, where: str, e: BaseException) -> None:
        self.add(f"{where}: str", str(e))
        self.add(f"{where}: repr", repr(e))
        self.add(f"{where}: traceback", "".join(traceback.format_exception(e)))

    def call(self, where: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn``; keep the repr of its result or the text of its exception."""
        try:
            result = fn()
        except Exception as e:
            self.error(where, e)
            return e
        self.add(f"{where}: result", repr(result))
        return result

    def leaks(self) -> list[str]:
        return [where for where, text in self.texts if _leaks(text)]


@pytest.fixture
def evidence(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> Iterator[Evidence]:
    caplog.set_level(logging.DEBUG)
    ev = Evidence()
    yield ev
    out, err = capfd.readouterr()
    ev.add("stdout", out)
    ev.add("stderr", err)
    for rec in caplog.records:
        if not rec.name.startswith(SERVER_LOGGERS):
            ev.add(f"log {rec.name}", rec.getMessage())
            if rec.exc_info and rec.exc_info[1] is not None:
                ev.error(f"log {rec.name} exc", rec.exc_info[1])
    assert ev.leaks() == [], ev.leaks()


def _table_files(options: dict[str, Any], prefix: str) -> dict[str, bytes]:
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(**options)
    sel = pafs.FileSelector(f"{BUCKET}/{prefix}", recursive=True, allow_not_found=True)
    out = {}
    for info in fs.get_file_info(sel):
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as f:
                out[info.path] = f.read()
    return out


def test_s3_round_trip_never_leaks(s3: dict[str, Any], evidence: Evidence) -> None:
    from hoodie_ray.api import compact
    from hoodie_ray.compaction.api import CompactionService
    from hoodie_ray.config.options import resolve_options
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.job.coordinator import Coordinator
    from hoodie_ray.job.maintenance import clean
    from hoodie_ray.reader.query import plan_file_slices
    from hoodie_ray.table import HoodieTable

    uri = f"s3://{BUCKET}/trips"
    ev = evidence
    client = HoodieWriteClient(uri, dict(OPTIONS), s3)
    ev.add("client", client)
    ev.add("commit 1", client.write(rows(["a", "b", "c"], ["x", "x", "y"])))
    ev.add("commit 2", client.write(rows(["a", "d"], ["x", "y"], ts=2)))
    got = hr.read(uri, storage_options=s3)
    assert sorted(got.column("id").to_pylist()) == ["a", "b", "c", "d"]
    ev.call("incremental", lambda: hr.read(uri, "incremental", storage_options=s3))
    ev.call("compact", lambda: compact(uri, dict(OPTIONS), storage_options=s3))
    ev.call("clean", lambda: clean(uri, dict(OPTIONS), storage_options=s3))
    ev.call("rollback", lambda: hr.rollback(uri, "29990101000000000", storage_options=s3))

    # reprs of everything that holds the options
    storage = open_storage(uri, s3)
    assert isinstance(storage, ArrowStorage)
    ev.add("storage", storage)
    table = HoodieTable.load(uri, s3)
    ev.add("table", table)
    ev.add("slices", table.latest_file_slices())
    snap = HoodieTable.load(uri, s3)
    assert snap.schema is not None  # timeline, metadata and schema loaded
    ev.add("snapshot", snap)
    ev.add("snapshot timeline", snap.active_timeline)
    plan = plan_file_slices(uri, storage_options=s3)
    ev.add("plan", plan)
    ev.add("read context", plan.context)
    ev.add("options", resolve_options(dict(OPTIONS)))
    ev.add("compaction service", CompactionService.open(uri, dict(OPTIONS), s3))
    coord = Coordinator(uri, resolve_options(dict(OPTIONS)), s3)
    try:
        setup = coord.open(None)
        ev.add("coordinator", coord)
        ev.add("table setup", setup)
        ev.add("write context", setup.context)
        ev.add("coordinator storage", coord.storage)
        ev.add("coordinator compaction", coord.compaction_service())
    finally:
        coord.close()

    # errors on the way
    ev.call("missing table", lambda: hr.read(f"s3://{BUCKET}/none", storage_options=s3))
    ev.call("missing bucket", lambda: hr.read("s3://no-such-bucket/t", storage_options=s3))
    ev.call("bad option key", lambda: open_storage(uri, {**s3, "secret_key_typo": SECRET_KEY}))
    ev.call(
        "secret as an unknown write option",
        lambda: hr.write(
            rows(["z"], ["x"]),
            uri,
            {**OPTIONS, "fs.s3a.secret.key": SECRET_KEY},
            engine="local",
            storage_options=s3,
        ),
    )
    ev.call(
        "refused input",
        lambda: HoodieWriteClient(uri, dict(OPTIONS), s3).write(rows(["z"], ["../x"])),
    )

    # every file of the table (commit metadata, plans, properties, data)
    files = _table_files(s3, "trips")
    assert any(".deltacommit" in k for k in files) and any(k.endswith(".commit") for k in files)
    for key, data in files.items():
        for secret in (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, MARK):
            assert secret.encode() not in data, f"{secret} in {key}"


def test_unreachable_endpoint_never_leaks(evidence: Evidence) -> None:
    import pyarrow.fs as pafs

    options = {
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
        "session_token": SESSION_TOKEN,
        "endpoint_override": "127.0.0.1:1",
        "scheme": "http",
        "region": "us-east-1",
        "connect_timeout": 0.2,
        "request_timeout": 0.2,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    }
    e = evidence.call("unreachable", lambda: hr.read("s3://bucket/t", storage_options=options))
    assert isinstance(e, Exception)
    e = evidence.call(
        "unreachable write",
        lambda: hr.write(
            rows(["a"], ["x"]), "s3://bucket/t", OPTIONS, engine="local", storage_options=options
        ),
    )
    assert isinstance(e, Exception)


def test_credentials_in_the_uri_are_refused(evidence: Evidence) -> None:
    for uri in (
        f"s3://{ACCESS_KEY}:{SECRET_KEY}@{BUCKET}/t",
        f"s3://{SECRET_KEY}@{BUCKET}/t",
        f"gs://user:{SECRET_KEY}@bucket/t",
    ):
        e = evidence.call("uri", lambda u=uri: hr.read(u))
        assert isinstance(e, HoodiePathError), e
        assert "storage_options" in str(e)
        e = evidence.call(
            "uri write", lambda u=uri: hr.write(rows(["a"], ["x"]), u, OPTIONS, engine="local")
        )
        assert isinstance(e, HoodieError), e


def test_redaction_rules(evidence: Evidence) -> None:
    options = {
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
        "session_token": SESSION_TOKEN,
        "proxy_options": f"http://user:{SECRET_KEY}@proxy:3128",
        "account_key": SECRET_KEY,
        "sas_token": SESSION_TOKEN,
        "password": SECRET_KEY,
        "credentials": SECRET_KEY,
        "region": "us-east-1",
        "endpoint_override": "localhost:9000",
    }
    red = redact_options(options)
    evidence.add("redacted", red)
    assert red["region"] == "us-east-1" and red["endpoint_override"] == "localhost:9000"
    s3_options = {k: options[k] for k in ("access_key", "secret_key", "session_token")}
    s3_options["proxy_options"] = options["proxy_options"]
    storage = ArrowStorage(f"s3://{BUCKET}/t", s3_options)  # nothing is contacted yet
    evidence.add("storage", storage)
    evidence.add("storage str", str(storage))


def test_metrics_tags_are_table_and_role_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics carry the table name, the actor role and the actor (role and task index),
    nothing taken from options."""
    from hoodie_ray.ray import metrics

    seen: list[dict[str, str]] = []

    class Recorder:
        def inc(self, value: float, tags: dict[str, str]) -> None:
            seen.append(tags)

        set = observe = inc

    monkeypatch.setattr(metrics, "_get", lambda *a, **k: Recorder())
    stat = type("Stat", (), {"total_write_bytes": 10, "num_writes": 1, "num_deletes": 0})()
    metrics.count_records("trips", "assigner", 3, 3)
    metrics.gauge_buffered("trips", 0, 100)
    metrics.gauge_index_size("trips", 0, 5)
    metrics.record_flush("trips", 0, [stat])
    metrics.record_commit("trips", 0.5)
    metrics.gauge_pending_compactions("trips", 1)
    assert seen and all(set(t) == {"table", "role", "actor"} for t in seen)
    assert all(t["table"] == "trips" and t["actor"].startswith(t["role"]) for t in seen)


# -- the CLI ---------------------------------------------------------------------------------------


def test_cli_output_never_leaks(
    s3: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    cli = pytest.importorskip("hoodie_ray.cli")
    caplog.set_level(logging.DEBUG)
    evidence = Evidence()
    import json

    from hoodie_ray.job.client import HoodieWriteClient

    uri = f"s3://{BUCKET}/cli"
    HoodieWriteClient(uri, dict(OPTIONS), s3).write(rows(["a", "b"], ["x", "y"]))
    flags = [f"--storage-option={k}={v}" for k, v in s3.items()]
    env = json.dumps(s3)
    commands = [
        ["timeline", uri],
        ["commits", "show", uri],
        ["compactions", "show", uri],
        ["fsview", uri],
        ["timeline", f"s3://{BUCKET}/missing"],
        ["fsview", uri, "--partition", "../../etc"],
        ["timeline", f"s3://{ACCESS_KEY}:{SECRET_KEY}@{BUCKET}/cli"],
    ]
    ran = 0
    for i, argv in enumerate(commands):
        for output in ("table", "json"):
            for use_env in (False, True):
                if use_env:
                    monkeypatch.setenv("HOODIE_RAY_STORAGE_OPTIONS", env)
                    args = [*argv, "--output", output]
                else:
                    monkeypatch.delenv("HOODIE_RAY_STORAGE_OPTIONS", raising=False)
                    args = [*argv, *flags, "--output", output]
                capsys.readouterr()
                try:
                    rc = cli.main(args)
                except SystemExit as e:  # click's own usage errors
                    rc = e.code
                out, err = capsys.readouterr()
                evidence.add(f"cli {argv[:2]} rc={rc} stdout", out)
                evidence.add(f"cli {argv[:2]} rc={rc} stderr", err)
                if i < 4:  # the table is read through the planted options
                    assert rc == 0 and "s3://sec-bucket/cli" in out, (argv, err)
                else:
                    prefix = '{"error": ' if output == "json" else "hoodie-ray: error: "
                    said = without_ray_log_lines(err)
                    assert rc != 0 and said.startswith(prefix), (argv, out, err)
                ran += 1
    assert ran == len(commands) * 4
    for rec in caplog.records:
        if not rec.name.startswith(SERVER_LOGGERS):
            evidence.add(f"log {rec.name}", rec.getMessage())
    assert evidence.leaks() == [], evidence.leaks()


def test_pickled_exceptions_carry_no_secret(s3: dict[str, Any], evidence: Evidence) -> None:
    """Errors cross Ray as pickles: their pickled form must be as clean as their text."""
    import pickle

    errors = []
    for fn in (
        lambda: hr.read(f"s3://{BUCKET}/none", storage_options=s3),
        lambda: open_storage(f"s3://{BUCKET}/t", {**s3, "bogus": SECRET_KEY}),
        lambda: hr.read(f"s3://{ACCESS_KEY}:{SECRET_KEY}@{BUCKET}/t"),
    ):
        e = evidence.call("error", fn)
        assert isinstance(e, HoodieError), e
        errors.append(e)
    for e in errors:
        data = pickle.dumps(e)
        assert MARK.encode() not in data
        back = pickle.loads(data)
        evidence.error("unpickled", back)


# -- Ray -----------------------------------------------------------------------------------------


@pytest.mark.ray
def test_ray_actors_never_leak(s3: dict[str, Any], ray_session: Any, evidence: Evidence) -> None:
    """One small streaming write to S3 on Ray: the writer, actor handles and their core objects,
    the named actors, and every log file of the Ray session."""
    import glob
    import os

    import ray

    from hoodie_ray.ray import actors

    uri = f"s3://{BUCKET}/ray"
    opts = {**OPTIONS, "write.tasks": "1", "write.bucket_assign.tasks": "1"}
    with hr.HoodieStreamWriter(uri, opts, storage_options=s3) as w:
        w.write(rows(["a", "b"], ["x", "y"]))
        evidence.add("stream writer", w)
        handles = [w._coord, *w._assigners, *w._writers]
        assert len(handles) == 3 and all(h is not None for h in handles)
        for h in handles:
            evidence.add("handle", h)
        evidence.add("named actors", ray.util.list_named_actors(all_namespaces=True))
        evidence.add("instant", w.checkpoint())
    got = hr.read(uri, storage_options=s3)
    assert sorted(got.column("id").to_pylist()) == ["a", "b"]
    # the actor classes keep object's repr (Ray prints it in log prefixes and the dashboard)
    for cls in (actors.CoordinatorActor, actors.AssignerActor, actors.WriterActor):
        target = getattr(cls, "__ray_actor_class__", cls)
        assert target.__repr__ is object.__repr__, cls

    # everything the workers printed or logged in this Ray session
    node = ray._private.worker._global_node
    logs = glob.glob(os.path.join(node.get_session_dir_path(), "logs", "*"))
    assert logs
    for path in logs:
        if os.path.isfile(path) and os.path.getsize(path) < 64 << 20:
            with open(path, errors="replace") as f:
                evidence.add(f"ray log {os.path.basename(path)}", f.read())


def test_evidence_catches_a_leak() -> None:
    """The search itself works: a planted secret in an exception is found."""
    ev = Evidence()
    ev.error("probe", ValueError(f"boom {SECRET_KEY}"))
    ev.add("probe repr", {"secret_key": SECRET_KEY})
    ev.add("probe table", pa.table({"x": [1]}))
    assert len(ev.leaks()) == 4
