"""Any input, once, at the boundary: what :meth:`HoodieStreamWriter.write` and ``hr.write`` take
(a pyarrow Table or RecordBatch, a pandas DataFrame, any Ray Dataset, a Spark DataFrame of a
RayDP session, or a list of these) as a stream of blocks in Ray's object store, each with its
Arrow schema (:func:`input_blocks`).

The schema of a block is known without its rows coming to the driver: an Arrow block's own, a
pandas block's from its dtypes (or, for ``object`` columns, from one small task beside the
block). A Spark DataFrame goes through RayDP's recoverable conversion (its executors convert
their partitions; Ray tasks fetch them with lineage); its Spark-side cache is kept until the
commit that holds its rows is known (:func:`release_spark_frames`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import ray
from ray.exceptions import RayTaskError

from hoodie_ray.exceptions import HoodieError, HoodieInputError, HoodieUnsupportedError
from hoodie_ray.ray.calls import unwrap
from hoodie_ray.write.records import (
    check_unique_names,
    dtypes_schema,
    is_pandas,
    is_ray_dataset,
    is_spark_dataframe,
    pandas_schema,
    to_arrow,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SPARK_INSTALL_HINT = 'pip install "raydp==1.6.5" "pyspark==3.5.7" "pandas>=2.2,<3"'


@dataclass(frozen=True)
class Input:
    """One input block of the open checkpoint, kept (by reference) until its commit."""

    ref: Any  # ObjectRef of an Arrow table, a pandas DataFrame or a Ray Data block
    rows: tuple[int, int] | None  # the [start, stop) slice of the block that is input
    num_rows: int | None = None  # None: unknown (Ray Data may not say)


def input_blocks(
    data: Any, spark_frames: list[Any], batch_rows: int | None = None
) -> Iterator[tuple[pa.Schema, Input]]:
    """(schema, input) of each non-empty block of ``data``, put into the object store where
    it is not there yet. A Spark DataFrame is converted (its :class:`SparkConversion` appended
    to ``spark_frames``: its cache is released once its commit is known); an Arrow table is put in slices of
    ``batch_rows`` rows where that is given (each slice then routes as its own input)."""
    if isinstance(data, list):
        for part in data:
            yield from input_blocks(part, spark_frames, batch_rows)
        return
    if is_spark_dataframe(data):
        conversion = convert_spark(data)
        spark_frames.append(conversion)
        yield from spark_items(conversion)
        return
    if is_ray_dataset(data):
        yield from dataset_items(data)
        return
    if is_pandas(data):
        check_unique_names([str(c) for c in data.columns])
        schema = pandas_schema(data)
        if len(data):
            yield schema, Input(ray.put(data), None, len(data))
        return
    table = to_arrow(data)
    check_unique_names(table.schema.names)  # before the put: Ray cannot carry such a table
    step = batch_rows or table.num_rows
    for off in range(0, table.num_rows, max(1, step)):
        part = table.slice(off, step) if step < table.num_rows else table
        yield table.schema, put_table(part)


#: Chunks per column above which :func:`put_table` joins them before the put, and the
#: largest table it joins (the join is a copy).
PUT_MAX_CHUNKS = 2
PUT_JOIN_MAX_BYTES = 64 << 20


def put_table(table: pa.Table) -> Input:
    """An Arrow table put into the object store as one input. Ray serialises a table chunk by
    chunk in Python, on the way in and out: a 65K-row table of 13 columns in 42 chunks (small
    batches held together) cost 38 ms of CPU to put against 13 ms joined, the copy included;
    so a table of more than :data:`PUT_MAX_CHUNKS` chunks a column, up to
    :data:`PUT_JOIN_MAX_BYTES`, is joined first."""
    if (
        any(c.num_chunks > PUT_MAX_CHUNKS for c in table.columns)
        and table.nbytes <= PUT_JOIN_MAX_BYTES
    ):
        with contextlib.suppress(pa.ArrowException):  # (a type Arrow cannot join: as it is)
            table = table.combine_chunks()
    return Input(ray.put(table), None, table.num_rows)


def dataset_items(ds: Any) -> Iterator[tuple[pa.Schema, Input]]:
    """(schema, input) of each non-empty block of a Ray Dataset, as Ray Data produces them
    (streaming: the dataset executes while its first blocks are written; Ray Data's progress
    lines stay in its log file)."""
    with quiet_ray_data_console():
        yield from _bundle_items(ds)


def _bundle_items(ds: Any) -> Iterator[tuple[pa.Schema, Input]]:
    resolved: dict[Any, pa.Schema] = {}  # a pandas block schema -> its Arrow schema
    for bundle in ds.iter_internal_ref_bundles():
        schema = getattr(bundle.schema, "base_schema", bundle.schema)
        if schema is None:
            schema = getattr(ds.schema(), "base_schema", None)
        slices = bundle.slices or [None] * len(bundle.blocks)
        for entry, sl in zip(bundle.blocks, slices, strict=True):
            rows = None if sl is None else (sl.start_offset, sl.end_offset)
            n = entry.metadata.num_rows if sl is None else sl.num_rows
            # a block's own schema where Ray Data kept it (from_pandas, from_items: the
            # bundle's is the first block's, a later frame's NaN or extra column not in it)
            own = getattr(entry.metadata, "schema", None)
            own = schema if own is None else getattr(own, "base_schema", own)
            if n is None or n > 0:
                yield _arrow_schema(own, entry.ref, resolved), Input(entry.ref, rows, n)


def dataset_table(ds: Any) -> pa.Table | None:
    """A Ray Dataset as one Arrow table in this process (the single-process engine's input),
    each block converted as :func:`to_arrow` converts input (a column of mixed values is a
    ``HoodieInputError`` naming it), their schemas unified; None when it has no rows."""
    tables = []
    with quiet_ray_data_console():
        for bundle in ds.iter_internal_ref_bundles():
            for entry in bundle.blocks:
                table = to_arrow(ray.get(entry.ref))
                if table.num_rows:
                    tables.append(table)
    if not tables:
        return None
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise HoodieInputError(
            f"the Ray Dataset's blocks have schemas that do not unify: {e}"
        ) from None


def _arrow_schema(schema: Any, ref: Any, resolved: dict[Any, pa.Schema]) -> pa.Schema:
    """The Arrow schema of a Ray Data block of ``schema``: an Arrow block's own, or what
    :func:`to_arrow` makes of a pandas block (Ray Data's ``PandasBlockSchema``, from
    ``from_pandas``, ``map_batches(batch_format="pandas")``...). Its dtypes decide it, but an
    ``object`` column's values do: then one block of that schema is asked, where it lies
    (one small task per distinct schema of a write; the block never comes to the driver)."""
    if isinstance(schema, pa.Schema):
        return schema
    names, dtypes = getattr(schema, "names", None), getattr(schema, "types", None)
    if names is None or dtypes is None:
        raise HoodieInputError(
            f"a Ray Dataset block has a schema hoodie_ray cannot read: {schema!r}"
        )
    if schema not in resolved:
        try:
            arrow: pa.Schema | None = dtypes_schema(names, dtypes)
        except Exception:  # a dtype an empty frame cannot be made of: ask the block
            arrow = None
        if arrow is None or any(pa.types.is_null(f.type) for f in arrow):
            try:
                arrow = ray.get(_block_schema.remote(ref))
            except RayTaskError as e:  # a column of mixed values: HoodieInputError, as itself
                raise unwrap(e) from None
        resolved[schema] = arrow
    return resolved[schema]


def block_schemas(items: list[Input]) -> list[pa.Schema]:
    """The Arrow schema :func:`to_arrow` gives each block of ``items``, asked where the block
    lies (a small task each: only the schema moves). Ray Data's own per-block schema is the
    first block's wherever they differ."""
    try:
        return ray.get([_block_schema.remote(item.ref) for item in items])
    except RayTaskError as e:
        raise unwrap(e) from None


@ray.remote(num_cpus=0)
def _block_schema(block: Any) -> pa.Schema:
    """The Arrow schema :func:`to_arrow` gives a block (run beside it: only the schema moves)."""
    return pandas_schema(block) if is_pandas(block) else to_arrow(block).schema


# -- Spark DataFrames (RayDP) ------------------------------------------------------------------


def import_spark() -> tuple[Any, Any]:
    """pyspark and raydp, or a HoodieError that says what to install."""
    try:
        import pyspark
        import raydp
    except ImportError as e:
        raise HoodieError(
            f"Spark interop needs raydp and pyspark ({e.name or e} is missing): {SPARK_INSTALL_HINT}"
        ) from None
    return pyspark, raydp


@dataclass(frozen=True)
class SparkConversion:
    """One conversion of a Spark DataFrame (:func:`convert_spark`): the Spark RDD it pinned
    (Arrow bytes cached by the executors until :meth:`release`) and one ``(block, meta)`` pair
    of references per Spark partition, ``meta`` holding the block's ``(rows, Arrow schema)``.
    Each conversion is released on its own: a DataFrame written into two checkpoints keeps
    the second one's cache when the first commits."""

    df: Any
    rdd_id: int
    parts: tuple[tuple[Any, Any], ...]

    def release(self) -> None:
        """Unpersist this conversion's cache (idempotent)."""
        _raydp_writer(self.df.sparkSession.sparkContext).releaseRecoverableRDD(self.rdd_id)


def convert_spark(df: DataFrame) -> SparkConversion:
    """A Spark DataFrame of a RayDP session converted by its executors, all at once.

    RayDP's recoverable conversion (what ``ray.data.from_spark`` does): a Spark job has every
    executor convert its partitions to Arrow and cache the bytes (in memory, spilling to disk);
    then each partition is fetched from the executor that holds it into Ray's object store by
    :class:`SparkFetcher` calls (a lost block is fetched again, by lineage). The blocks go to
    the writer as they are, with no Ray Dataset between (whose per-block metadata tasks would
    cost more than the fetches). Spark keeps the cache until the conversion is released."""
    _check_spark_dataframe(df)
    check_unique_names(df.columns)  # a join's: the executors' Arrow could not be carried
    pyspark, _ = import_spark()
    sc = df.sparkSession.sparkContext
    try:
        writer = _raydp_writer(sc)
        level = sc._getJavaStorageLevel(pyspark.StorageLevel.MEMORY_AND_DISK)
        info = writer.prepareRecoverableRDD(df._jdf, level)
    except Exception as e:
        if type(e).__name__ != "Py4JJavaError":
            raise
        # the DataFrame's Spark job failed (a raise_error, a bad cast), or its session is gone
        raise HoodieInputError(
            f"the Spark DataFrame could not be computed: {_java_message(e)}"
        ) from None
    rdd_id, schema_json, agent = info.rddId(), info.schemaJson(), info.driverAgentUrl()
    fetcher = spark_fetcher(sc.getConf())
    parts = []
    for i, loc in enumerate(info.locations()):
        block, meta = fetcher.fetch.remote(f"raydp-executor-{loc}", rdd_id, i, schema_json, agent)
        parts.append((block, meta))
    return SparkConversion(df, rdd_id, tuple(parts))


def _java_message(e: Exception) -> str:
    """A Py4J error's Java exception as its first lines (the root cause's where it has one):
    the stack traces stay in Spark's log."""
    try:
        java = e.java_exception  # type: ignore[attr-defined]
        root = java
        while root.getCause() is not None:
            root = root.getCause()
        text = str(root.toString())
    except Exception:
        text = str(e)
    return text.strip().splitlines()[0][:500] if text.strip() else type(e).__name__


def spark_items(conversion: SparkConversion) -> Iterator[tuple[pa.Schema, Input]]:
    """(schema, input) of each non-empty partition of a converted DataFrame, once every
    partition is fetched (their row counts decide how the rows are cut between the routers)."""
    try:
        metas = ray.get([meta for _, meta in conversion.parts])
    except RayTaskError as e:
        raise unwrap(e) from None
    for (block, _), (rows, schema) in zip(conversion.parts, metas, strict=True):
        if rows:
            yield schema, Input(block, None, rows)


class SparkFetcher:
    """Fetches converted Spark partitions from RayDP's executor actors into the object store.

    One long-lived worker per driver: a Ray task per partition (RayDP's way) would start a
    worker for most fetches on a busy node (Ray ends idle workers beyond one per CPU within a
    second), which cost more CPU than the fetch. Threaded, so the partitions of a DataFrame
    come in parallel; restartable with its calls retried, so a lost block is fetched again as
    a task's would be: Ray re-runs a retryable actor call to recover an object it returned,
    restarting the actor if need be (ray-project/ray#9557, #47396), and the executors keep
    the bytes until the commit."""

    def __init__(self) -> None:
        from ray._private.worker import global_worker

        global_worker.set_load_code_from_local(True)  # calls into the executors' JVM actors

    @ray.method(num_returns=2)
    def fetch(
        self, executor: str, rdd_id: int, partition: int, schema_json: str, agent_url: str
    ) -> tuple[pa.Table, tuple[int, pa.Schema]]:
        """One partition's Arrow bytes from the executor caching them, as a table without
        Spark's schema metadata; and its ``(rows, schema)``."""
        actor = ray.get_actor(executor)
        data = ray.get(actor.getRDDPartition.remote(rdd_id, partition, schema_json, agent_url))
        table = pa.ipc.open_stream(pa.BufferReader(data)).read_all().replace_schema_metadata()
        return table, (table.num_rows, table.schema)


_fetchers: dict[tuple[str, str], Any] = {}  # this driver's fetcher, by (Ray job, driver worker)
_fetchers_lock = threading.Lock()


def spark_fetcher(conf: Any = None) -> Any:
    """This driver's :class:`SparkFetcher`, started on first use in this Ray session (a new
    ``ray.init`` in the same process gets a new one). RayDP's fetch resources
    (``spark.ray.raydp_recoverable_fetch.task.resource.CPU`` / ``.memory`` of the Spark
    ``conf``) are the actor's."""
    ctx = ray.get_runtime_context()
    key = (ctx.get_job_id(), ctx.get_worker_id())
    with _fetchers_lock:
        if key not in _fetchers:
            _fetchers.clear()
            get = conf.get if conf is not None else (lambda _k, d: d)
            from raydp.utils import parse_memory_size

            cpus = float(get("spark.ray.raydp_recoverable_fetch.task.resource.CPU", "0") or 0)
            memory = parse_memory_size(
                get("spark.ray.raydp_recoverable_fetch.task.resource.memory", "0") or "0"
            )
            actor = ray.remote(SparkFetcher).options(
                num_cpus=cpus,
                memory=float(memory),
                max_concurrency=8,
                max_restarts=-1,
                max_task_retries=-1,
            )
            _fetchers[key] = actor.remote()
        return _fetchers[key]


#: The conversions :func:`spark_to_ray` made, by DataFrame, until :func:`release_spark_df`.
_pinned: dict[Any, list[SparkConversion]] = {}


def spark_to_ray(df: DataFrame, *, num_blocks: int | None = None) -> ray.data.Dataset:
    """A Spark DataFrame of a RayDP session as a Ray Dataset (one block per Spark partition).

    The conversion of :func:`convert_spark` (what ``ray.data.from_spark`` does, without its
    deprecation warning). Spark keeps the converted partitions cached until
    :func:`release_spark_df` or the session stops; call it once the dataset is consumed.

    Args:
        df: a DataFrame of the RayDP session (see :func:`hoodie_ray.spark.init_spark`).
        num_blocks: repartition the DataFrame to this many blocks first.
    """
    _check_spark_dataframe(df)
    source = df
    if num_blocks is not None and num_blocks != df.rdd.getNumPartitions():
        source = df.repartition(num_blocks)
    conversion = convert_spark(source)
    _pinned.setdefault(df, []).append(conversion)
    return ray.data.from_arrow_refs([block for block, _ in conversion.parts])


def release_spark_df(df: DataFrame) -> None:
    """Unpersist the Spark-side caches :func:`spark_to_ray` pinned for ``df`` (idempotent;
    a write's own conversions are released by the write)."""
    for conversion in _pinned.pop(df, []):
        conversion.release()


def release_spark_frames(frames: list[Any]) -> None:
    """The Spark conversions of a committed (or dropped) checkpoint: their caches go."""
    for conversion in frames:
        with contextlib.suppress(Exception):
            conversion.release()


def _raydp_writer(sc: Any) -> Any:
    """RayDP's JVM side of its recoverable conversion (raydp 1.6.5's ``ObjectStoreWriter``)."""
    return sc._jvm.org.apache.spark.sql.raydp.ObjectStoreWriter


def _check_spark_dataframe(df: Any) -> None:
    if not is_spark_dataframe(df):
        raise HoodieInputError(f"expected a Spark DataFrame, got {type(df).__name__}")
    if "pyspark.sql.connect.dataframe" in sys.modules and not _is_classic(df):
        raise HoodieUnsupportedError("Spark Connect DataFrames cannot go through RayDP")


def _is_classic(df: Any) -> bool:
    mod = sys.modules.get("pyspark.sql.dataframe")
    return mod is not None and isinstance(df, mod.DataFrame)


# -- Ray Data's console ------------------------------------------------------------------------


class _RayDataConsoleFilter(logging.Filter):
    """Ray Data console records hoodie_ray's write keeps off the console (the log file keeps them):

    * INFO chatter ("Dataset ... execution finished", "Data sink Hudi finished. N rows"): the
      commit result says it;
    * "The Ray cluster currently does not have any available CPUs. The Dataset job will hang":
      wrong here, the write's actors hold the CPUs on purpose and the write tasks run beside them;
    * "Progress bars disabled. To enable, ...": a hint about the caller's own setting.

    Every other warning and error passes.
    """

    _DROPPED = ("does not have any available CPUs", "Progress bars disabled.")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return False
        msg = record.msg if isinstance(record.msg, str) else ""
        return not any(d in msg for d in self._DROPPED)


@contextlib.contextmanager
def quiet_ray_data_console() -> Iterator[None]:
    """:class:`_RayDataConsoleFilter` on the console handlers of Ray Data's ``ray.data`` logger
    (not its ``ray-data.log`` file handler) for the duration of one write."""
    handlers = [
        h
        for h in logging.getLogger("ray.data").handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]
    flt = _RayDataConsoleFilter()
    for h in handlers:
        h.addFilter(flt)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(flt)
