"""Spark interop through RayDP (Spark on Ray): sessions, Spark <-> Ray Data <-> Arrow.

pyspark and raydp are imported inside the functions only: ``import hoodie_ray`` never needs them.

* :func:`init_spark` starts a RayDP Spark session with the Java 17 recipe of the project
  (``--add-opens`` flags for the driver, the executors and the RayDP app master, and
  ``PYSPARK_PYTHON`` set to this interpreter), checks Java and Ray resources first, and waits
  for the executors to register, so a Spark executor Ray cannot place is an error, not a hang.
* :func:`spark_to_ray` / :func:`spark_to_arrow`: Spark DataFrame -> Ray Dataset / Arrow table,
  distributed (blocks go from the Spark executors to the Ray object store).
* :func:`arrow_to_spark`: Arrow table -> Spark DataFrame, exact (Arrow IPC batches straight into
  the JVM through the driver: int widths, decimals, NaN vs null and timestamps are kept).
  :func:`ray_to_spark` is the distributed path (``Dataset.to_spark``), which goes through pandas
  in Spark's Python workers: NaN becomes null and small int columns stay exact only when null-free.

Console output of a healthy start is kept to what matters (see :func:`init_spark`): the Spark
driver JVM gets a real log4j2 configuration (:data:`LOG4J2_PROPERTIES`; RayDP's default names a
file that does not exist, and Ray's Java runtime then prints ``ERROR StatusConsoleListener
Reconfiguration failed``) and ``SPARK_LOCAL_IP`` (the address RayDP binds it to), and the INFO
line Ray's C++ GCS client prints when each RayDP JVM (driver, app master, executors) connects to
Ray is dropped; every other line is left as it is.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from hoodie_ray.exceptions import HoodieError, HoodieInputError, HoodieUnsupportedError
from hoodie_ray.ray.inputs import SPARK_INSTALL_HINT as SPARK_INSTALL_HINT
from hoodie_ray.ray.inputs import import_spark
from hoodie_ray.ray.inputs import release_spark_df as release_spark_df
from hoodie_ray.ray.inputs import spark_to_ray as spark_to_ray
from hoodie_ray.ray.runtime import JVM_OPTIONS, ensure_ray
from hoodie_ray.write.records import is_spark_dataframe as is_spark_dataframe

if TYPE_CHECKING:
    import pyarrow as pa
    import ray.data
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("hoodie_ray")

JAVA_INSTALL_HINT = (
    "install Java 17 (Debian/Ubuntu: `sudo apt-get install -y openjdk-17-jre-headless`; "
    "elsewhere any OpenJDK 17 distribution) and make sure `java` is on PATH or JAVA_HOME is set"
)

_JAVA_OPTION_KEYS = (
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
    "spark.ray.raydp_app_master.extraJavaOptions",
)
DEFAULT_SPARK_CONFIGS: Mapping[str, str] = {
    # Hudi instants and timestamp columns are UTC; no shift by the machine's time zone.
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # The RayDP master actor mostly waits; without this it needs a whole free CPU to be
    # scheduled, which a 2-CPU Ray running hoodie_ray actors may not have.
    "spark.ray.raydp_spark_master.actor.resource.CPU": "0",
}
_MAX_BATCH_BYTES = 64 * 2**20

# RayDP's key for the driver JVM's -Dlog4j2.configurationFile (raydp.spark.ray_cluster_master.
# SPARK_LOG4J_CONFIG_FILE_NAME); the environment variable of the same meaning wins over ours.
_SPARK_LOG4J_CONF = "spark.log4j.config.file.name"
_SPARK_LOG4J_ENV = "SPARK_LOG4J_CONFIG_FILE_NAME"

LOG4J2_PROPERTIES = """\
# hoodie_ray: log4j2 configuration of the RayDP Spark driver JVM (see hoodie_ray.spark).
# Spark's own defaults (org/apache/spark/log4j2-defaults.properties) at the level pyspark uses
# (WARN), plus the Hadoop native-library notice, which every start on a plain JVM prints.
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console

appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
# The file descriptor, not System.err: RayDP's Java agent points System.err at a log file (closed
# after) while this configuration loads, and an appender on System.err would keep that stream.
appender.console.direct = true
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex

logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.jetty2.name = org.sparkproject.jetty.util.component.AbstractLifeCycle
logger.jetty2.level = error
logger.metastore.name = org.apache.hadoop.hive.metastore.RetryingHMSHandler
logger.metastore.level = fatal
logger.hive_functionregistry.name = org.apache.hadoop.hive.ql.exec.FunctionRegistry
logger.hive_functionregistry.level = error
logger.parquet.name = org.apache.parquet.CorruptStatistics
logger.parquet.level = error
logger.parquet2.name = parquet.CorruptStatistics
logger.parquet2.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""
"""The Spark driver JVM's log4j2 configuration (``spark.log4j.config.file.name``).

RayDP 1.6.5 starts the driver JVM with ``-Dlog4j2.configurationFile=log4j2-default.properties``
(appended after any ``spark.driver.extraJavaOptions``, so it wins over one given there), a file
that exists nowhere; when the driver JVM then connects to Ray, Ray's Java runtime reconfigures
log4j2 from that property and log4j prints ``ERROR StatusConsoleListener Reconfiguration failed:
No configuration found for 'Default' at 'null' in 'null'`` to stdout."""

# Ray's C++ GCS client, at INFO, when a JVM (RayDP's driver, app master and executors) connects
# to Ray: printed to the JVM's stderr before Ray's logging of that process is set up, so no Ray
# log level reaches it.
_GCS_CLIENT_INFO = (
    r"^\[[^\]]* I \d+ \d+\] gcs_client\.cc:\d+: "
    r"GcsClient has no Cluster ID set, and won't fetch from GCS\.\s*$"
)
_GCS_CLIENT_INFO_RE = re.compile(_GCS_CLIENT_INFO.encode())
_log4j_file: str | None = None
_log4j_lock = threading.Lock()


# ---------------------------------------------------------------------------------------------
# Environment checks
# ---------------------------------------------------------------------------------------------


def java_version(java: str | None = None) -> int:
    """The major version of the ``java`` Spark will start (``JAVA_HOME/bin/java``, else PATH).

    Raises:
        HoodieError: no Java found, or ``java -version`` failed (with what to install).
    """
    if java is None:
        home = os.environ.get("JAVA_HOME")
        cand = os.path.join(home, "bin", "java") if home else None
        java = cand if cand and os.access(cand, os.X_OK) else shutil.which("java")
    if not java:
        raise HoodieError(f"Spark needs Java and none was found: {JAVA_INSTALL_HINT}")
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise HoodieError(f"`{java} -version` failed ({e}): {JAVA_INSTALL_HINT}") from None
    text = (out.stderr or "") + (out.stdout or "")
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if out.returncode != 0 or not m:
        raise HoodieError(
            f"cannot tell the Java version from `{java} -version`: {JAVA_INSTALL_HINT}"
        )
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_292"
        major = int(m.group(2))
    return major


def check_java(java: str | None = None) -> int:
    """Check Java for RayDP; return its major version.

    Java 17 is what the project tests. Java 11-16 accept the ``--add-opens`` flags (a warning is
    logged); Java 8 cannot start with them (an error). Newer than 17 is logged as untested
    (Spark 3.5 supports 8/11/17).
    """
    major = java_version(java)
    if major < 11:
        raise HoodieError(
            f"Java {major} is too old for hoodie_ray's Spark setup (needs 17): {JAVA_INSTALL_HINT}"
        )
    if major != 17:
        log.warning("Java %d found; hoodie_ray's Spark setup is tested with Java 17", major)
    return major


def _parse_memory(v: str | int) -> int:
    if isinstance(v, int):
        return v
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(v).lower())
    if not m:
        raise HoodieError(f"cannot parse executor_memory {v!r} (use e.g. '1g', '512m')")
    scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[m.group(2)]
    return int(float(m.group(1)) * scale)


def _check_spark_resources(num_executors: int, executor_cores: int, executor_memory: int) -> None:
    import ray

    from hoodie_ray.ray.runtime import _nodes_available

    avail = ray.available_resources()
    cpus = float(avail.get("CPU", 0.0))
    mem = float(avail.get("memory", 0.0))
    need_cpus = num_executors * executor_cores
    nodes = _nodes_available(ray)
    fit = sum(int(n.get("CPU", 0.0) + 1e-6) // executor_cores for n in nodes)
    if need_cpus > cpus + 1e-6 or fit < num_executors:
        raise HoodieError(
            f"cannot place {num_executors} Spark executor(s) x {executor_cores} cores on this Ray "
            f"cluster: {cpus:g} CPUs are available (whole CPUs per executor, on one node). "
            "RayDP would wait for them without end. Lower num_executors/executor_cores, stop "
            "other actors, or add nodes."
        )
    if num_executors * executor_memory > mem:
        raise HoodieError(
            f"cannot place {num_executors} Spark executor(s) x {executor_memory / 2**30:.2f} GiB: "
            f"{mem / 2**30:.2f} GiB of Ray memory is available. Lower executor_memory."
        )


def _registered_executors(spark: SparkSession) -> int:
    jsc = spark.sparkContext._jsc.sc()  # type: ignore[union-attr]
    return int(jsc.getExecutorMemoryStatus().size()) - 1  # minus the driver


# ---------------------------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------------------------


def _log4j2_config_file() -> str:
    """The absolute path of a file holding :data:`LOG4J2_PROPERTIES` (written once a process,
    removed at exit)."""
    global _log4j_file
    with _log4j_lock:
        if _log4j_file is None or not os.path.isfile(_log4j_file):
            fd, path = tempfile.mkstemp(prefix="hoodie_ray-log4j2-", suffix=".properties")
            with os.fdopen(fd, "w") as f:
                f.write(LOG4J2_PROPERTIES)
            atexit.register(_remove_quietly, path)
            _log4j_file = path
        return _log4j_file


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _pump_stderr(read_fd: int, out_fd: int) -> None:
    """Copy the driver JVM's stderr to ours as it comes, minus Ray's GCS-client INFO lines.

    Lines are filtered only when whole in one read (Ray writes each log line in one call);
    anything else passes unchanged and at once (Spark's ``\\r`` progress bar included). Reading
    goes on when writing fails, so the JVM never blocks on a full pipe.
    """
    writable = True
    try:
        while True:
            try:
                chunk = os.read(read_fd, 65536)
            except InterruptedError:
                continue
            except OSError:
                break
            if not chunk:
                break
            if b"GcsClient" in chunk:
                chunk = b"".join(
                    line
                    for line in chunk.splitlines(keepends=True)
                    if not _GCS_CLIENT_INFO_RE.match(line)
                )
            while writable and chunk:
                try:
                    chunk = chunk[os.write(out_fd, chunk) :]
                except InterruptedError:
                    continue
                except OSError:
                    writable = False
    finally:
        os.close(read_fd)
        os.close(out_fd)


@contextmanager
def _filtered_driver_stderr() -> Iterator[None]:
    """While RayDP starts the Spark session: the driver JVM pyspark launches writes its stderr
    through :func:`_pump_stderr` (pyspark's ``launch_gateway(popen_kwargs=...)``, which RayDP
    does not expose), to this process's stderr as before."""
    import pyspark.context as pyspark_context

    launch = pyspark_context.launch_gateway

    def launch_filtered(conf: Any = None, popen_kwargs: dict[str, Any] | None = None) -> Any:
        if popen_kwargs and "stderr" in popen_kwargs:
            return launch(conf, popen_kwargs)
        try:
            out_fd = os.dup(2)
        except OSError:  # no stderr to copy to: leave the JVM's as it is
            return launch(conf, popen_kwargs)
        read_fd, write_fd = os.pipe()
        pump = threading.Thread(
            target=_pump_stderr,
            args=(read_fd, out_fd),
            name="hoodie_ray-spark-driver-stderr",
            daemon=True,
        )
        pump.start()
        try:
            return launch(conf, {**(popen_kwargs or {}), "stderr": write_fd})
        except BaseException:
            os.close(write_fd)
            write_fd = -1
            pump.join(5.0)  # the JVM's last words before the error is raised
            raise
        finally:
            if write_fd >= 0:
                os.close(write_fd)  # the JVM holds its own end

    pyspark_context.launch_gateway = launch_filtered  # type: ignore[attr-defined]
    try:
        yield
    finally:
        pyspark_context.launch_gateway = launch  # type: ignore[attr-defined]


@contextmanager
def _driver_local_ip(host: str | None) -> Iterator[None]:
    """``SPARK_LOCAL_IP`` (unless set) for the driver JVM launched meanwhile: the address RayDP
    binds the driver to (``spark.driver.host``, by default Ray's node IP). Without it, Spark warns
    "Your hostname ... resolves to a loopback address" on machines where the hostname resolves to
    127.0.0.1, though the driver uses the configured address anyway."""
    if os.environ.get("SPARK_LOCAL_IP"):
        yield
        return
    if not host:
        import ray

        host = ray.util.get_node_ip_address()
    os.environ["SPARK_LOCAL_IP"] = host
    try:
        yield
    finally:
        os.environ.pop("SPARK_LOCAL_IP", None)


def _skip_forwarded_gcs_client_info() -> None:
    """Drop Ray's GCS-client INFO line from the worker output Ray forwards to this driver (RayDP's
    app master JVM prints it on its actor's stderr, each executor JVM on the raylet's): Ray's
    ``RAY_DEDUP_LOGS_SKIP_REGEX``, which Ray reads once at import, extended in place."""
    try:
        from ray._private import ray_logging
    except ImportError:
        return
    for name in ("stdout_deduplicator", "stderr_deduplicator"):
        dedup = getattr(ray_logging, name, None)
        if dedup is None or not hasattr(dedup, "skip_re"):
            continue
        current = dedup.skip_re
        if current is not None and _GCS_CLIENT_INFO in current.pattern:
            continue
        pattern = (
            _GCS_CLIENT_INFO if current is None else f"(?:{current.pattern})|(?:{_GCS_CLIENT_INFO})"
        )
        dedup.skip_re = re.compile(pattern)


def init_spark(
    app_name: str = "hoodie_ray",
    num_executors: int = 1,
    executor_cores: int = 1,
    executor_memory: str | int = "1g",
    configs: Mapping[str, str] | None = None,
    *,
    executor_timeout_s: float = 120.0,
    check_resources: bool = True,
    ray_address: str | None = None,
    **raydp_kwargs: Any,
) -> SparkSession:
    """Start (or return the running) RayDP Spark session on Ray, with the Java 17 recipe.

    Args:
        app_name: the Spark application name.
        num_executors: Spark executors; each is a Ray actor holding ``executor_cores`` whole CPUs.
        executor_cores: cores (Ray CPUs) per executor.
        executor_memory: per executor, ``"1g"``/``"512m"`` or bytes (Ray ``memory`` resource).
        configs: extra Spark configs. ``*.extraJavaOptions`` given here are kept and the
            ``--add-opens`` flags appended; :data:`DEFAULT_SPARK_CONFIGS` apply unless set.
            A session that mostly hands DataFrames to hoodie_ray on few cores may give the
            driver ``"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"``: its JIT
            compiler's threads are most of its CPU per hand-off, which that halves (2 cores,
            one executor: 0.15 -> 0.07-0.08 CPU-s a 100K-row DataFrame), at the cost of
            slower driver-side work of the user's own Spark jobs.
            The driver JVM's log4j2 file is :data:`LOG4J2_PROPERTIES` (WARN and up, on stderr)
            unless ``spark.log4j.config.file.name`` (an absolute path; a ``log4j2.configurationFile``
            in ``spark.driver.extraJavaOptions`` is overridden by RayDP) or the
            ``SPARK_LOG4J_CONFIG_FILE_NAME`` environment variable names another.
        executor_timeout_s: how long to wait for the executors to register before failing.
        check_resources: refuse up front when Ray has not the CPUs/memory for the executors
            (turn off on an autoscaling cluster that grows on demand).
        ray_address: passed to :func:`~hoodie_ray.ray.runtime.ensure_ray` when Ray is not up.
        **raydp_kwargs: more ``raydp.init_spark`` arguments (``placement_group_strategy``, ...).

    Returns:
        The ``SparkSession``. When a RayDP session already runs in this process, that one is
        returned as it is (a process has one RayDP session).

    Raises:
        HoodieError: Java, raydp or pyspark missing (naming what to install), not enough Ray
            resources for the executors, or executors that did not register in time.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    _, raydp = import_spark()
    check_java()
    ensure_ray(ray_address)
    existing = _running_session()
    if existing is not None:
        return existing
    conf = _spark_configs(configs)
    mem = _parse_memory(executor_memory)
    if check_resources:
        _check_spark_resources(num_executors, executor_cores, mem)
    _before_new_session(app_name)
    t0 = time.monotonic()
    with _filtered_driver_stderr(), _driver_local_ip(conf.get("spark.driver.host")):
        spark = raydp.init_spark(
            app_name, num_executors, executor_cores, executor_memory, configs=conf, **raydp_kwargs
        )
    _wait_for_executors(spark, num_executors, executor_cores, mem, executor_timeout_s)
    log.info("RayDP Spark session %r up in %.1fs", app_name, time.monotonic() - t0)
    return spark


def _before_new_session(app_name: str) -> None:
    # A master of a session stopped a moment ago may still hold the name.
    _wait_actor_gone(app_name + _MASTER_SUFFIX, 30.0)
    _skip_forwarded_gcs_client_info()


def _spark_configs(configs: Mapping[str, str] | None) -> dict[str, str]:
    """The session's Spark configs: the defaults, ``configs`` over them, the Java 17 flags
    appended to every ``*.extraJavaOptions``, and our log4j2 file unless one is named."""
    opts = " ".join(JVM_OPTIONS)
    conf: dict[str, str] = dict(DEFAULT_SPARK_CONFIGS)
    conf.update({k: str(v) for k, v in (configs or {}).items()})
    for key in _JAVA_OPTION_KEYS:
        have = conf.get(key, "").strip()
        conf[key] = f"{have} {opts}".strip()
    if _SPARK_LOG4J_CONF not in conf and not os.environ.get(_SPARK_LOG4J_ENV):
        conf[_SPARK_LOG4J_CONF] = _log4j2_config_file()
    logs = _ray_logs_dir()
    driver = "spark.driver.extraJavaOptions"
    if logs and "-Dray.logging.dir=" not in conf.get(driver, ""):
        # RayDP's agent in the driver JVM logs under ray.logging.dir, by default
        # /tmp/ray/session_latest/logs: a link a removed or other Ray session may have left
        # dangling, and the JVM then dies at start ("Error create log dir"). RayDP sets it for
        # its app master only; the driver gets this Ray session's logs folder too.
        conf[driver] = f"{conf.get(driver, '')} -Dray.logging.dir={logs}".strip()
    return conf


def _ray_logs_dir() -> str | None:
    """The logs folder of the Ray session this process is connected to, if any."""
    try:
        import ray

        node = ray._private.worker._global_node
        return str(node.get_logs_dir_path()) if node is not None else None
    except Exception:  # no Ray, or not this process's node
        return None


def _wait_for_executors(
    spark: SparkSession, num_executors: int, executor_cores: int, mem: int, timeout_s: float
) -> None:
    """Wait until ``num_executors`` executors registered; past ``timeout_s`` stop the session
    and fail, saying what each executor needs."""
    deadline = time.monotonic() + timeout_s
    while _registered_executors(spark) < num_executors:
        if time.monotonic() > deadline:
            got = _registered_executors(spark)
            stop_spark()
            raise HoodieError(
                f"only {got} of {num_executors} Spark executors registered within "
                f"{timeout_s:.0f}s; Ray could not place them (each needs "
                f"{executor_cores} whole CPUs and {mem / 2**30:.2f} GiB on one node)"
            )
        time.sleep(0.1)


def _running_session() -> SparkSession | None:
    """The session of RayDP's process-global Spark context, if one is running."""
    try:
        from raydp import context as raydp_context
    except ImportError:
        return None
    ctx = getattr(raydp_context, "_global_spark_context", None)
    if ctx is None:
        return None
    return ctx.get_or_create_session()


_MASTER_SUFFIX = "_SPARK_MASTER"  # raydp.spark.ray_cluster_master.RAYDP_SPARK_MASTER_SUFFIX


def _wait_actor_gone(name: str, timeout_s: float) -> bool:
    """Wait until the named actor (in the job's namespace) no longer exists."""
    import ray

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            handle = ray.get_actor(name)
        except ValueError:
            return True
        if time.monotonic() > deadline:
            ray.kill(handle)
            return False
        time.sleep(0.1)


def stop_spark(timeout_s: float = 30.0) -> None:
    """Stop the RayDP Spark session of this process (its executor actors and JVMs); idempotent.

    Waits until RayDP's master actor is gone (killing it after ``timeout_s``), so that a new
    :func:`init_spark` right after does not fail with ``ActorAlreadyExistsError``.
    """
    if "raydp" not in sys.modules:
        return
    import ray
    import raydp
    from raydp import context as raydp_context

    ctx = getattr(raydp_context, "_global_spark_context", None)
    app_name = getattr(ctx, "_app_name", None)
    raydp.stop_spark()
    if app_name and ray.is_initialized():
        _wait_actor_gone(app_name + _MASTER_SUFFIX, timeout_s)


# ---------------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------------


def spark_to_arrow(df: DataFrame) -> pa.Table:
    """A Spark DataFrame as one Arrow table in this process (through Ray: :func:`spark_to_ray`)."""
    import pyarrow as pa
    import ray

    ds = spark_to_ray(df)
    try:
        tables = ray.get(ds.to_arrow_refs())
    finally:
        release_spark_df(df)
    tables = [t for t in tables if t is not None]
    if not tables:
        schema = ds.schema()
        if schema is None:  # no partition at all (an empty RDD's): Spark's schema says it
            from pyspark.sql.pandas.types import to_arrow_schema

            return to_arrow_schema(df.schema).empty_table()
        return pa.schema(schema.base_schema).empty_table()
    return pa.concat_tables(tables, promote_options="permissive")


def _spark_arrow_type(t: pa.DataType, column: str) -> pa.DataType:
    """The Arrow type Spark's JVM reads for ``t`` (what a cast must produce), recursively."""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_dictionary(t):
        return _spark_arrow_type(t.value_type, column)
    if pt.is_uint8(t):
        return pa.int16()
    if pt.is_uint16(t):
        return pa.int32()
    if pt.is_uint32(t):
        return pa.int64()
    if pt.is_uint64(t):
        return pa.decimal128(20, 0)
    if pt.is_float16(t):
        return pa.float32()
    if pt.is_large_string(t) or (hasattr(pt, "is_string_view") and pt.is_string_view(t)):
        return pa.string()
    if pt.is_large_binary(t) or pt.is_fixed_size_binary(t):
        return pa.binary()
    if hasattr(pt, "is_binary_view") and pt.is_binary_view(t):
        return pa.binary()
    if pt.is_date64(t):
        return pa.date32()
    if pt.is_timestamp(t):
        # Spark TimestampType: microseconds since the epoch (UTC); naive values are read as UTC.
        return pa.timestamp("us", tz="UTC")
    if pt.is_duration(t):
        return pa.duration("us")
    if pt.is_decimal(t):
        if t.precision > 38:
            raise HoodieUnsupportedError(
                f"column {column!r}: decimal precision {t.precision} > 38 does not fit Spark"
            )
        return pa.decimal128(t.precision, t.scale)
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        f = t.value_field
        return pa.list_(pa.field("element", _spark_arrow_type(f.type, column), f.nullable))
    if pt.is_map(t):
        return pa.map_(
            pa.field("key", _spark_arrow_type(t.key_type, column), False),
            pa.field("value", _spark_arrow_type(t.item_type, column), t.item_field.nullable),
        )
    if pt.is_struct(t):
        return pa.struct(
            [pa.field(f.name, _spark_arrow_type(f.type, column), f.nullable) for f in t]
        )
    if (
        pt.is_boolean(t)
        or pt.is_signed_integer(t)
        or pt.is_float32(t)
        or pt.is_float64(t)
        or pt.is_string(t)
        or pt.is_binary(t)
        or pt.is_date32(t)
        or pt.is_null(t)
    ):
        return t
    raise HoodieUnsupportedError(f"column {column!r}: Arrow type {t} has no Spark equivalent")


def to_spark_compatible(table: pa.Table) -> pa.Table:
    """Cast ``table`` to the Arrow types Spark's JVM reads (uint -> wider int, large_string ->
    string, any timestamp -> ``timestamp[us, UTC]``, dictionary -> values, ...).

    Raises:
        HoodieUnsupportedError: a type Spark cannot hold (time of day, decimal256 > 38 digits).
        HoodieInputError: a value the cast would change (e.g. nanoseconds below a microsecond).
    """
    import pyarrow as pa

    fields = [pa.field(f.name, _spark_arrow_type(f.type, f.name), f.nullable) for f in table.schema]
    target = pa.schema(fields)
    if target.equals(table.schema.remove_metadata()):
        return table.replace_schema_metadata()
    cols = []
    for f, col in zip(fields, table.columns, strict=True):
        if col.type == f.type:
            cols.append(col)
            continue
        try:
            cols.append(col.cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise HoodieInputError(
                f"column {f.name!r}: cannot convert {col.type} to Spark's {f.type}: {e}"
            ) from None
    return pa.Table.from_arrays(cols, schema=target)


def arrow_to_spark(
    spark: SparkSession, table: pa.Table | pa.RecordBatch, *, num_partitions: int | None = None
) -> DataFrame:
    """An Arrow table as a Spark DataFrame, exactly (types, nulls, NaN, decimals, timestamps).

    The Arrow batches are streamed into the Spark driver JVM (as ``createDataFrame`` from pandas
    does, minus pandas) and parallelized from there, one partition per batch. Timestamps become
    Spark ``TimestampType`` (naive ones are taken as UTC); see :func:`to_spark_compatible` for
    the other casts. All batches pass through the Spark driver JVM (``spark.driver.memory``,
    1 GiB by default): for more than a few hundred MB use :func:`ray_to_spark`.

    Args:
        spark: the session (from :func:`init_spark`).
        table: the rows.
        num_partitions: Spark partitions; default ``spark.sparkContext.defaultParallelism``,
            with at most 64 MiB per partition.
    """
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise HoodieInputError(f"expected a pyarrow Table, got {type(table).__name__}")
    table = to_spark_compatible(table)
    schema = StructType(
        [StructField(f.name, from_arrow_type(f.type), f.nullable) for f in table.schema]
    )
    n = table.num_rows
    if n == 0:
        return spark.createDataFrame([], schema)
    parts = num_partitions or max(1, int(spark.sparkContext.defaultParallelism))
    parts = max(parts, math.ceil(table.nbytes / _MAX_BATCH_BYTES))
    rows_per = max(1, math.ceil(n / parts))

    def batches() -> Iterator[pa.RecordBatch]:  # one batch per partition, copied lazily
        for start in range(0, n, rows_per):
            yield from table.slice(start, rows_per).combine_chunks().to_batches()

    sc = spark.sparkContext
    jvm = sc._jvm
    assert jvm is not None
    jiter = sc._serialize_to_jvm(  # type: ignore[attr-defined]
        batches(),
        ArrowStreamSerializer(),
        lambda path: jvm.PythonSQLUtils.readArrowStreamFromFile(path),
        lambda: jvm.ArrowIteratorServer(),
    )
    jdf = jvm.PythonSQLUtils.toDataFrame(jiter, schema.json(), spark._jsparkSession)
    return DataFrame(jdf, spark)


def ray_to_spark(spark: SparkSession, ds: ray.data.Dataset) -> DataFrame:
    """A Ray Dataset as a Spark DataFrame, distributed (``Dataset.to_spark`` of RayDP).

    Blocks go from the Ray object store to Spark's Python workers, which rebuild rows through
    pandas: NaN in float columns comes back as null, and timestamps are read in the session
    time zone (UTC with :func:`init_spark`). Use :func:`arrow_to_spark` when the data fits the
    driver and must be exact.
    """
    import_spark()
    return ds.to_spark(spark)


#: ``read_spark`` reads in Spark's tasks past this many bytes of files (a Spark session's
#: first Python-worker task costs seconds; a small table is read sooner in the driver).
READ_SPARK_DISTRIBUTED_BYTES = 4 << 20


def read_spark(
    spark: SparkSession, path: str, *, distributed: bool | None = None, **kwargs: Any
) -> DataFrame:
    """Read a Hudi table (``hr.read`` arguments) as a Spark DataFrame of ``spark``, exactly.

    ``distributed`` (default: when the files to read exceed
    :data:`READ_SPARK_DISTRIBUTED_BYTES`): the plan's file slices go to Spark tasks (a few
    hundred bytes each), whose Python workers read and merge them with hoodie_ray's reader and
    hand Arrow batches to Spark (``mapInArrow``), so no row passes through the Spark driver.
    Otherwise the rows are read here and handed over with :func:`arrow_to_spark`, as is a CDC
    read (``incremental_format="cdc"``).
    """
    import pickle

    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    from hoodie_ray.reader.query import _incremental_format, plan_file_slices, read

    fmt = _incremental_format(kwargs.pop("incremental_format", "latest_state"))
    if fmt == "cdc":
        return arrow_to_spark(spark, read(path, incremental_format=fmt, **kwargs))
    kwargs.pop("cdc_image_format", None)
    plan = plan_file_slices(path, changelog=fmt == "changelog", **kwargs)
    if distributed is None:
        distributed = sum(s.size_bytes for s in plan.slices) > READ_SPARK_DISTRIBUTED_BYTES
    if not distributed:
        return arrow_to_spark(spark, plan.read_all())
    arrow_schema = to_spark_compatible(plan.schema.empty_table()).schema
    schema = StructType(
        [StructField(f.name, from_arrow_type(f.type), f.nullable) for f in arrow_schema]
    )
    units = [(pickle.dumps((plan.context, s)),) for s in plan.slices]
    if not units:
        return spark.createDataFrame([], schema)
    slices = spark.createDataFrame(units, "unit binary").repartition(
        min(len(units), max(1, int(spark.sparkContext.defaultParallelism) * 4))
    )
    return slices.mapInArrow(_read_slices, schema)


def _read_slices(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In a Spark Python worker: the rows of the pickled ``(ReadContext, slice)`` units."""
    import pickle

    from hoodie_ray.reader.file_slice_reader import iter_file_slice

    for batch in batches:
        for blob in batch.column(0).to_pylist():
            ctx, slc = pickle.loads(blob)
            for table in iter_file_slice(ctx, slc):
                if table.num_rows:
                    yield from to_spark_compatible(table).to_batches()
