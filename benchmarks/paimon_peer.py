"""Benchmark peer: Apache Paimon's Python writer (pypaimon ``write_ray``) fed the same commits.

The peer writes a primary-key Paimon table with fixed buckets from Ray Data, one Paimon commit
per input commit file, and reports the same figures our writer does (wall seconds, CPU seconds,
rows per second, rows per CPU second) plus a correctness gate on the table it wrote.

Why a child process in its own virtual environment: pypaimon 2.1 needs ``pyarrow<20`` while
hoodie_ray pins a newer pyarrow, so the two cannot share an interpreter. The benchmark makes a
venv once (:func:`ensure_paimon_venv`, cached under ``~/.cache/hoodie_ray/bench-venvs``) and
runs this very file there as a script (``python -I paimon_peer.py --child SPEC.json``). For that
reason the module imports only the standard library at top level: the child side needs
pypaimon, Ray, pyarrow and psutil from the venv, the parent side needs pyarrow and psutil from
the project's environment, each imported inside the functions that use them.

Ray: the child starts its **own local Ray** (``ray.init(address="local", num_cpus=writers)``)
rather than joining the parent's cluster. The parent's workers import a different pyarrow, so
sharing workers is impossible anyway, and a private cluster sized to the writer count gives the
peer exactly the CPU budget our writer gets, with no one else's tasks on it.

What is timed: per commit, only ``write_ray`` (the bucket shuffle, the writes and the Paimon
commit). Reading the commit's Parquet file into a materialised Ray Dataset happens before the
clock starts, as the input of our Dataset path is given too. One setting is changed from Ray
Data's defaults: the hash shuffle that groups rows by bucket uses one partition per bucket
(``DataContext.default_hash_shuffle_parallelism = buckets``) instead of 200, which at a few
buckets is nearly all per-task overhead. CPU seconds are user + system time
of the child driver and of its Ray worker processes over the same sections (Ray's system
processes, raylet and GCS, are reported apart as ``ray_system_cpu_s`` and not counted, as
:class:`benchmarks.common.CpuMeter` does for our writer).

Correctness gate: after the last commit the child reads the whole table back and the parent
checks that it holds one row per distinct input key, no key twice, and that the sum of ``ts``
over the rows equals the sum over keys of the largest input ``ts`` (``sequence.field = ts``:
the newest ``ts`` wins a key, like our last-writer-wins precombine).

Manual run (q1-shaped rows, see :func:`benchmarks.common.generate_workload`)::

    python -m benchmarks.paimon_peer --rows 100000 --commits 3 --writers 2

Environment: ``HOODIE_RAY_PAIMON_VENV`` names the Python interpreter of an existing venv to
use instead of making one (for offline machines); ``HOODIE_RAY_PAIMON_VENV=off`` disables the
peer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The pypaimon release the peer runs (the newest on PyPI when the peer was written).
PYPAIMON_VERSION = "2.1.0"
#: What the venv installs: pypaimon, the pyarrow it supports, the parent's Ray, psutil.
VENV_REQUIREMENTS = (
    f"pypaimon=={PYPAIMON_VERSION}",
    "pyarrow<20",
    "ray[data]==2.60.0",
    "psutil>=5.9",
)
#: Environment variable naming an existing venv's python (or ``off`` to disable the peer).
VENV_ENV = "HOODIE_RAY_PAIMON_VENV"
#: Seconds the one-time ``pip install`` may take.
INSTALL_TIMEOUT_S = 1200.0
#: Marks a finished venv; holds the requirements it was made with.
_READY_MARKER = ".hoodie_ray_ready"
#: Prefix of the child's result line on stdout (Ray may print other lines).
_RESULT_PREFIX = "PAIMON_PEER_RESULT "
#: The peer's name in reports.
PEER_NAME = "pypaimon write_ray"

_DB = "bench"
_TABLE = "peer"


# ---------------------------------------------------------------------------------------------
# The virtual environment
# ---------------------------------------------------------------------------------------------


def default_venv_root() -> Path:
    """Folder holding the benchmark venvs (``~/.cache/hoodie_ray/bench-venvs``)."""
    return Path.home() / ".cache" / "hoodie_ray" / "bench-venvs"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _check_python(python: Path, timeout_s: float = 120.0) -> str | None:
    """None when ``python`` imports everything the child needs, else the reason it does not."""
    if not python.exists():
        return f"{python} does not exist"
    code = "import pypaimon, ray, ray.data, pyarrow, psutil"
    try:
        proc = subprocess.run(
            [str(python), "-I", "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=_child_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{python} could not be run: {e}"
    if proc.returncode != 0:
        return f"{python} cannot import the peer's packages: {_tail(proc.stderr)}"
    return None


def ensure_paimon_venv(cache_dir: Path | None = None) -> Path | None:
    """Make (once) the peer's venv and return its python; None, with a logged reason, if it can't.

    The venv lives in ``<cache_dir>/paimon-<pypaimon version>`` (``cache_dir`` defaults to
    :func:`default_venv_root`) and holds :data:`VENV_REQUIREMENTS`. It is made with this
    interpreter's ``venv`` module (so the same Python version) and ``pip``, under a file lock,
    and marked ready only once everything installed; later calls just find the marker. A venv
    without the marker (an interrupted install) is made again.

    ``HOODIE_RAY_PAIMON_VENV`` overrides all that: the path of an existing python to use as it
    is (checked by importing pypaimon, Ray and pyarrow with it), or ``off`` for no peer.

    Never raises: the peer is optional and its absence must not fail a benchmark.
    """
    try:
        return _ensure_paimon_venv(cache_dir)
    except Exception as e:  # the peer is optional, whatever went wrong
        log.warning("paimon peer disabled: making its venv failed: %r", e)
        return None


def _ensure_paimon_venv(cache_dir: Path | None) -> Path | None:
    override = os.environ.get(VENV_ENV, "").strip()
    if override.lower() in ("off", "0", "none", "false"):
        log.warning("paimon peer disabled: %s=%s", VENV_ENV, override)
        return None
    if override:
        python = Path(override).expanduser()
        reason = _check_python(python)
        if reason is not None:
            log.warning("paimon peer disabled: %s=%s: %s", VENV_ENV, override, reason)
            return None
        return python

    root = Path(cache_dir) if cache_dir is not None else default_venv_root()
    venv = root / f"paimon-{PYPAIMON_VERSION}"
    python = _venv_python(venv)
    wanted = "\n".join(VENV_REQUIREMENTS)
    marker = venv / _READY_MARKER
    if _marker_matches(marker, wanted) and python.exists():
        return python

    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".paimon-{PYPAIMON_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be making it right now
        if _marker_matches(marker, wanted) and python.exists():
            return python
        if venv.exists():
            shutil.rmtree(venv)  # an interrupted or outdated install
        log.info("making the paimon peer's venv in %s (one time, about a minute)", venv)
        t0 = time.perf_counter()
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--retries",
                "2",
                *VENV_REQUIREMENTS,
            ],
        ]
        for cmd in steps:
            try:
                proc = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                log.warning("paimon peer disabled: %s failed: %s", " ".join(cmd[:4]), e)
                shutil.rmtree(venv, ignore_errors=True)
                return None
            if proc.returncode != 0:
                log.warning(
                    "paimon peer disabled: %s failed (offline?): %s",
                    " ".join(cmd[:4]),
                    _tail(proc.stderr),
                )
                shutil.rmtree(venv, ignore_errors=True)
                return None
        reason = _check_python(python)
        if reason is not None:
            log.warning("paimon peer disabled: %s", reason)
            shutil.rmtree(venv, ignore_errors=True)
            return None
        marker.write_text(wanted + "\n")
        log.info("paimon peer venv ready in %.0f s", time.perf_counter() - t0)
    return python


def _marker_matches(marker: Path, wanted: str) -> bool:
    try:
        return marker.read_text().strip() == wanted
    except OSError:
        return False


def _tail(text: str | None, chars: int = 2000) -> str:
    text = (text or "").strip()
    return text if len(text) <= chars else "..." + text[-chars:]


def _child_env() -> dict[str, str]:
    """The parent's environment less what would tie the child to the parent's Python or Ray."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "RAY_ADDRESS", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


# ---------------------------------------------------------------------------------------------
# Parent side: run the child, check its table
# ---------------------------------------------------------------------------------------------


def _expected_from_files(files: list[Path], key: str, order: str) -> dict[str, int]:
    """Input rows, distinct keys and the sum over keys of the largest ``order`` value."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    parts = [pq.read_table(f, columns=[key, order]) for f in files]
    rows = sum(p.num_rows for p in parts)
    both = pa.concat_tables(parts)
    newest = both.group_by(key).aggregate([(order, "max")])
    total = pc.sum(newest.column(f"{order}_max")).as_py() or 0
    return {"rows": rows, "keys": newest.num_rows, "order_sum": int(total)}


def _failed(rows: int, error: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": PEER_NAME,
        "rows": rows,
        "wall_s": None,
        "cpu_s": None,
        "rows_per_s": None,
        "rows_per_cpu_s": None,
        "commit_s": [],
        "final_rows": None,
        "gate": "fail",
        "error": error,
    }
    out.update(extra)
    return out


def _kill_tree(proc: subprocess.Popen[str]) -> None:
    """Kill the child and every process below it (its Ray node), by id."""
    import psutil

    try:
        below = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        below = []
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: start_new_session=True
    for p in below:
        with contextlib.suppress(psutil.Error):
            p.kill()
    with contextlib.suppress(Exception):
        proc.wait(timeout=30)


def run_paimon_peer(
    commit_files: list[Path],
    workdir: Path,
    *,
    writers: int,
    buckets: int,
    key: str = "key",
    order: str = "ts",
    timeout_s: float = 1800,
    python: Path | None = None,
) -> dict[str, Any]:
    """Write ``commit_files`` (one Parquet file per commit) with pypaimon ``write_ray``; figures.

    Runs the child in the peer's venv (``python``, else :func:`ensure_paimon_venv`), which
    starts a local Ray with ``num_cpus=writers``, creates a primary-key table (primary key
    ``key``, ``bucket = buckets``, ``sequence.field = order``) under ``workdir/warehouse`` with
    the first file's schema, and for each file materialises it as a Ray Dataset (untimed) and
    writes it with ``write_ray(concurrency=writers)``, one Paimon commit per file (timed).

    Returns ``{"name", "rows", "wall_s", "cpu_s", "rows_per_s", "rows_per_cpu_s", "commit_s",
    "final_rows", "gate", "error"}`` plus details (``writers``, ``buckets``, ``expected_keys``,
    ``ray_system_cpu_s``, ``driver_cpu_s``, ``worker_cpu_s``, ``cpu_by_title``: the timed CPU
    of the child's processes by their Ray title, ``python``). ``wall_s`` and
    ``cpu_s`` cover the timed writes only. Never raises: a missing venv, a child error or a
    timeout (the child and its Ray processes are killed) comes back as ``error`` text with
    ``gate = "fail"``.
    """
    files = [Path(f).resolve() for f in commit_files]
    rows = 0
    try:
        if not files:
            return _failed(0, "no commit files")
        if writers < 1 or buckets < 1:
            return _failed(0, f"writers ({writers}) and buckets ({buckets}) must be >= 1")
        expected = _expected_from_files(files, key, order)
        rows = expected["rows"]
        if python is None:
            python = ensure_paimon_venv()
        if python is None:
            return _failed(rows, "pypaimon venv unavailable (see the log for why)")
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        warehouse = workdir / "warehouse"
        if warehouse.exists():
            shutil.rmtree(warehouse)
        spec = {
            "files": [str(f) for f in files],
            "warehouse": str(warehouse),
            "writers": writers,
            "buckets": buckets,
            "key": key,
            "order": order,
        }
        spec_path = workdir / "paimon_peer_spec.json"
        # The child's Ray keeps its session (logs, sockets) in a private, short temp dir (socket
        # paths are limited to about 100 bytes), removed here even when the child was killed.
        ray_tmp = tempfile.mkdtemp(prefix="hrpaimon_")
        spec["ray_temp_dir"] = ray_tmp
        spec_path.write_text(json.dumps(spec))
        try:
            child, err = _run_child(Path(python), spec_path, workdir, timeout_s)
        finally:
            shutil.rmtree(ray_tmp, ignore_errors=True)
        extra = {"writers": writers, "buckets": buckets, "expected_keys": expected["keys"]}
        if child is None:
            return _failed(rows, err, **extra)
        return _result_from_child(child, expected, extra, python)
    except Exception as e:  # the peer never fails the benchmark
        return _failed(rows, f"{type(e).__name__}: {e}")


def _run_child(
    python: Path, spec_path: Path, workdir: Path, timeout_s: float
) -> tuple[dict[str, Any] | None, str]:
    """Run the child; its parsed result line, or None and why not."""
    stderr_path = workdir / "paimon_peer_child.log"
    cmd = [str(python), "-I", str(Path(__file__).resolve()), "--child", str(spec_path)]
    with open(stderr_path, "w") as err_file:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
            env=_child_env(),
            cwd=workdir,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            return None, f"timed out after {timeout_s:.0f} s (child and its Ray killed)"
    lines = [ln for ln in (out or "").splitlines() if ln.startswith(_RESULT_PREFIX)]
    if not lines:
        log_tail = _tail(stderr_path.read_text(errors="replace"))
        return None, f"child exited {proc.returncode} without a result: {log_tail}"
    result: dict[str, Any] = json.loads(lines[-1][len(_RESULT_PREFIX) :])
    if result.get("error"):
        return None, str(result["error"])
    return result, ""


def _result_from_child(
    child: dict[str, Any], expected: dict[str, int], extra: dict[str, Any], python: Path
) -> dict[str, Any]:
    rows = expected["rows"]
    wall = float(child["wall_s"])
    cpu = float(child["driver_cpu_s"]) + float(child["worker_cpu_s"])
    problems = []
    if child["final_rows"] != expected["keys"]:
        problems.append(f"{child['final_rows']} rows, expected {expected['keys']} distinct keys")
    if child["final_keys"] != child["final_rows"]:
        problems.append(f"{child['final_rows'] - child['final_keys']} duplicate keys")
    if child["order_sum"] != expected["order_sum"]:
        problems.append("the newest ts did not win every key (ts checksum differs)")
    return {
        "name": PEER_NAME,
        "rows": rows,
        "wall_s": wall,
        "cpu_s": cpu,
        "rows_per_s": rows / wall if wall > 0 else None,
        "rows_per_cpu_s": rows / cpu if cpu > 0 else None,
        "commit_s": child["commit_s"],
        "final_rows": child["final_rows"],
        "gate": "fail" if problems else "pass",
        "error": "; ".join(problems) or None,
        **extra,
        "driver_cpu_s": child["driver_cpu_s"],
        "worker_cpu_s": child["worker_cpu_s"],
        "ray_system_cpu_s": child["ray_system_cpu_s"],
        "cpu_by_title": child.get("cpu_by_title"),
        "pypaimon": child.get("pypaimon"),
        "python": str(python),
    }


# ---------------------------------------------------------------------------------------------
# Child side (runs in the peer's venv; pypaimon, Ray, pyarrow<20, psutil)
# ---------------------------------------------------------------------------------------------


class _TreeCpu:
    """CPU seconds of the processes below this one, split into Ray workers and Ray's system.

    A background thread lists the descendants every ``poll_s`` seconds and keeps each one's
    latest cumulative user + system time, keyed by (pid, create time), so a worker that exits
    keeps its last sample. :meth:`mark` returns the totals so far; a section's CPU is the
    difference of two marks. The driver (this process) is measured with ``process_time``.
    """

    def __init__(self, poll_s: float = 0.2) -> None:
        import psutil

        self._me = psutil.Process()
        self._poll_s = poll_s
        self._seen: dict[tuple[int, float], tuple[bool, float]] = {}
        self._titles: dict[tuple[int, float], str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sampler_cpu = 0.0
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _is_worker(cmdline: list[str]) -> bool:
        if not cmdline:
            return False
        first = cmdline[0]
        if first.startswith("ray::"):
            return not first.startswith(("ray::DashboardAgent", "ray::RuntimeEnvAgent"))
        return any(a.endswith("default_worker.py") for a in cmdline)

    def _sample(self) -> None:
        import psutil

        try:
            procs = self._me.children(recursive=True)
        except psutil.Error:
            return
        with self._lock:
            for p in procs:
                try:
                    ident = (p.pid, p.create_time())
                    t = p.cpu_times()
                    cpu = t.user + t.system
                    known = self._seen.get(ident)
                    worker = known[0] if known else self._is_worker(p.cmdline())
                    # a worker renames itself after start (ray::IDLE, ray::<task>): recheck
                    cmdline = p.cmdline()
                    if known and not worker:
                        worker = self._is_worker(cmdline)
                except psutil.Error:
                    continue
                self._seen[ident] = (worker, cpu)
                if cmdline:
                    title = cmdline[0] if cmdline[0].startswith("ray::") else Path(cmdline[0]).name
                    if title != "ray::IDLE" or ident not in self._titles:
                        self._titles[ident] = title[:60]

    def _loop(self) -> None:
        while not self._stop.wait(self._poll_s):
            t0 = time.thread_time()
            self._sample()
            self._sampler_cpu += time.thread_time() - t0

    def start(self) -> _TreeCpu:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def per_process(self) -> dict[tuple[int, float], float]:
        """CPU seconds so far of every process seen, by (pid, create time)."""
        with self._lock:
            return {ident: cpu for ident, (_, cpu) in self._seen.items()}

    def title(self, ident: tuple[int, float]) -> str:
        """The last busy process title seen for ``ident`` (``ray::<task or actor>``)."""
        with self._lock:
            return self._titles.get(ident, "?")

    def mark(self) -> dict[str, float]:
        """Totals so far: ``driver`` (less the sampler), ``workers``, ``system``."""
        t0 = time.thread_time()
        self._sample()
        self._sampler_cpu += time.thread_time() - t0
        with self._lock:
            workers = sum(c for w, c in self._seen.values() if w)
            system = sum(c for w, c in self._seen.values() if not w)
            return {
                "driver": time.process_time() - self._sampler_cpu,
                "workers": workers,
                "system": system,
            }


def _child(spec_path: Path) -> dict[str, Any]:
    """Run the peer as the spec says; the figures as a dict (``error`` set on failure)."""
    spec = json.loads(spec_path.read_text())
    files: list[str] = spec["files"]
    writers: int = spec["writers"]
    key: str = spec["key"]
    order: str = spec["order"]

    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import pypaimon
    import ray
    from pypaimon import CatalogFactory, Schema

    ray.init(
        address="local",
        num_cpus=writers,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
        # a private temp dir: the parent's Ray session links (session_latest) stay its own
        _temp_dir=spec.get("ray_temp_dir") or tempfile.mkdtemp(prefix="hrpaimon_"),
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    # write_ray groups rows by bucket with a hash shuffle; Ray Data's default of 200 shuffle
    # partitions would make 200 reduce tasks for a handful of buckets. One per bucket is what
    # a user sizing the job would pick.
    ctx.default_hash_shuffle_parallelism = int(spec["buckets"])
    meter = _TreeCpu().start()
    try:
        catalog = CatalogFactory.create({"warehouse": spec["warehouse"]})
        catalog.create_database(_DB, True)
        schema = Schema.from_pyarrow_schema(
            pq.read_schema(files[0]),
            primary_keys=[key],
            options={"bucket": str(spec["buckets"]), "sequence.field": order},
        )
        catalog.create_table(f"{_DB}.{_TABLE}", schema, False)
        table = catalog.get_table(f"{_DB}.{_TABLE}")

        commit_s: list[float] = []
        spent = {"driver": 0.0, "workers": 0.0, "system": 0.0}
        by_process: dict[tuple[int, float], float] = {}
        for f in files:
            ds = ray.data.read_parquet(f).materialize()  # the input, given: not timed
            before = meter.mark()
            procs_before = meter.per_process()
            t0 = time.perf_counter()
            table_write = table.new_batch_write_builder().new_write()
            try:
                # PK tables with fixed buckets need "map_groups": one Ray task per bucket.
                table_write.write_ray(ds, concurrency=writers, hash_fixed_precluster="map_groups")
            finally:
                table_write.close()
            commit_s.append(time.perf_counter() - t0)
            after = meter.mark()
            for ident, cpu in meter.per_process().items():
                by_process[ident] = by_process.get(ident, 0.0) + cpu - procs_before.get(ident, 0.0)
            for k in spent:
                spent[k] += after[k] - before[k]
            del ds

        titles: dict[str, float] = {}
        for ident, cpu in by_process.items():
            name = meter.title(ident)
            titles[name] = titles.get(name, 0.0) + cpu
        by_title = {k: round(v, 2) for k, v in sorted(titles.items(), key=lambda kv: -kv[1]) if v}

        read_builder = catalog.get_table(f"{_DB}.{_TABLE}").new_read_builder()
        splits = read_builder.new_scan().plan().splits()
        got = read_builder.new_read().to_arrow(splits)
        final_rows = 0 if got is None else got.num_rows
        final_keys = 0 if got is None else pc.count_distinct(got.column(key)).as_py()
        order_sum = 0 if got is None or final_rows == 0 else pc.sum(got.column(order)).as_py()
        return {
            "error": None,
            "pypaimon": getattr(pypaimon, "__version__", PYPAIMON_VERSION),
            "wall_s": sum(commit_s),
            "commit_s": commit_s,
            "driver_cpu_s": spent["driver"],
            "worker_cpu_s": spent["workers"],
            "ray_system_cpu_s": spent["system"],
            "cpu_by_title": by_title,
            "final_rows": final_rows,
            "final_keys": int(final_keys),
            "order_sum": int(order_sum),
        }
    finally:
        meter.stop()
        ray.shutdown()


def _child_main(spec_path: str) -> int:
    try:
        result = _child(Path(spec_path))
    except BaseException as e:  # reported to the parent, not raised
        import traceback

        traceback.print_exc()
        result = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(_RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if result.get("error") is None else 1


# ---------------------------------------------------------------------------------------------
# Manual runs
# ---------------------------------------------------------------------------------------------


def write_q1_commits(rows: int, commits: int, outdir: Path, seed: int = 20240601) -> list[Path]:
    """Write about ``rows`` q1-shaped records in ``commits`` Parquet files; their paths in order.

    The rows are mor-q1's ``base`` data: ``rows // 3`` keys, each three times, shuffled over
    the commits (so exactly ``3 * (rows // 3)`` records).
    """
    import pyarrow.parquet as pq

    from benchmarks.common import generate_workload

    workload = generate_workload("base", num_keys=max(rows // 3, 1), num_commits=commits, seed=seed)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, table in enumerate(workload.commits):
        path = outdir / f"commit_{i:04d}.parquet"
        pq.write_table(table, path)
        paths.append(path)
    return paths


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line of a manual run."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.paimon_peer",
        description="Run the pypaimon write_ray peer on q1-shaped rows and print its figures.",
    )
    p.add_argument("--rows", type=int, default=100_000, help="input records in all (N)")
    p.add_argument("--commits", type=int, default=3, help="commits (one Parquet file each)")
    p.add_argument("--writers", type=int, default=2, help="Ray CPUs and write concurrency")
    p.add_argument("--buckets", type=int, default=None, help="Paimon buckets (default: writers)")
    p.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds before the peer is killed"
    )
    p.add_argument(
        "--workdir", type=Path, default=None, help="keep files here (default: a temp dir)"
    )
    p.add_argument("--child", metavar="SPEC", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Manual run: make the data, run the peer, print the result as JSON."""
    args = parse_args(argv)
    if args.child:
        return _child_main(args.child)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="paimon_peer_")))
        else:
            workdir = args.workdir
        files = write_q1_commits(args.rows, args.commits, workdir / "input")
        result = run_paimon_peer(
            files,
            workdir / "peer",
            writers=args.writers,
            buckets=args.buckets or args.writers,
            timeout_s=args.timeout,
        )
    print(json.dumps(result, indent=2))
    return 0 if result["gate"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
