"""Bad input on the Ray engine, as a user's script meets it: our own error, raised as itself,
and nothing else on stderr (no "Unhandled error" traceback from Ray about a reference no one
fetched, also where an instant's start fails: the table's lock busy); a new table's refused first write leaves no ``.hoodie`` behind."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import hoodie_ray as hr

pytestmark = pytest.mark.ray

OPTIONS = {
    "hoodie.table.name": "bad",
    "hoodie.datasource.write.recordkey.field": "key",
    "precombine.field": "ts",
}

# Each case: a name, then the statements that write it into the table at ``path``.
_SCRIPT = textwrap.dedent(
    """
    import gc, sys
    import pyarrow as pa, ray
    import hoodie_ray as hr

    ray.init(address=sys.argv[1], namespace="hoodie_ray", log_to_driver=True)
    from hoodie_ray.storage import LocalStorage
    from hoodie_ray.write.lock import WriterLock

    EXISTING = ("stream", "locked")  # the others write into a new table
    root = sys.argv[2]
    opts = {
        "hoodie.table.name": "bad", "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts", "write.tasks": "2", "write.bucket_assign.tasks": "2",
    }
    good = pa.table({"key": ["a", "b"], "ts": [1, 2]})
    null_key = pa.table({"key": pa.array(["c", None]), "ts": [3, 4]})

    def stream(path, data):
        with hr.HoodieStreamWriter(path, opts) as w:
            w.write(data)
            w.checkpoint()

    def locked(path):
        # OCC: another process holds the table's lock past the wait as an instant starts
        occ = {**opts, "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
               "hoodie.write.lock.wait_time_ms": "1000"}
        with hr.HoodieStreamWriter(path, occ) as w:
            w.write(good)
            w.checkpoint()
            held = WriterLock(LocalStorage(path), heartbeat_ms=60_000).acquire()
            try:
                w.write(good)
            finally:
                held.release()

    # hr.write (every block routed before an instant opens), the stream writer (blocks
    # routed and assigned as they come), and a schema the coordinator refuses as it opens
    cases = {
        "locked": locked,  # first: Ray reports an unfetched error a while after it goes
        "dataset": lambda p: hr.write(ray.data.from_arrow([good, null_key]), p, opts),
        "stream": lambda p: stream(p, [good, null_key, good]),
        "schema": lambda p: hr.write(good.append_column("u", pa.array([1, 2], pa.uint64())), p, opts),
    }
    for name, case in cases.items():
        existing = name in EXISTING
        path = f"{root}/{name}-{existing}"
        if existing:
            hr.write(good, path, opts, engine="local")
        try:
            case(path)
        except hr.HoodieError as e:
            print(f"{name} {existing}: {type(e).__name__}: {e}", flush=True)
        else:
            print(f"{name} {existing}: not refused", flush=True)
    gc.collect()
    ray.shutdown()
    """
)


@pytest.mark.slow  # suite time: three subprocesses, each starting Ray (~16 s)
def test_bad_input_leaves_only_our_error(ray_session, tmp_path):
    address = ray_session.get_runtime_context().gcs_address
    script = tmp_path / "bad_input.py"
    script.write_text(_SCRIPT)
    run = subprocess.run(
        [sys.executable, str(script), address, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout.splitlines()
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(out) == 4, run.stdout
    kinds = {"schema": "HoodieSchemaError", "locked": "HoodieCommitConflictError"}
    for line in out:
        assert "not refused" not in line, line
        kind = kinds.get(line.split()[0], "HoodieInputError")
        assert f": {kind}: " in line, line
    noise = [
        line
        for line in run.stderr.splitlines()
        if "ERROR" in line or "Traceback" in line or "Unhandled" in line
    ]
    assert not noise, run.stderr[-3000:]
    for name in ("dataset", "schema"):  # refused before an instant: no table there
        assert not (tmp_path / f"{name}-False" / ".hoodie" / "hoodie.properties").exists(), name
    t = hr.read(str(tmp_path / "stream-True"))  # as it was before the refused checkpoint
    assert sorted(t.column("key").to_pylist()) == ["a", "b"]


def test_refused_first_write_leaves_no_table(tmp_path):
    """The local engine's too (the Ray engine's is above); a refusal after the first commit
    keeps the table as it was."""
    bad = pa.table({"key": pa.array([None], pa.string()), "ts": [1]})
    path = tmp_path / "t"
    with pytest.raises(hr.HoodieInputError, match="key"):
        hr.write(bad, str(path), OPTIONS, engine="local")
    assert not (path / ".hoodie").exists()
    hr.write(pa.table({"key": ["a"], "ts": [1]}), str(path), OPTIONS, engine="local")
    with pytest.raises(hr.HoodieInputError, match="key"):
        hr.write(bad, str(path), OPTIONS, engine="local")
    assert hr.read(str(path)).column("key").to_pylist() == ["a"]
