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
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import ray
from ray.exceptions import RayTaskError

from hoodie_ray.exceptions import HoodieError, HoodieInputError, HoodieUnsupportedError
from hoodie_ray.ray.calls import unwrap
from hoodie_ray.write.records import (
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
_SQL_CTX_WARNING = r"DataFrame\.sql_ctx is an internal property"


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
    it is not there yet. A Spark DataFrame is converted (and appended to ``spark_frames``:
    its cache is released once its commit is known); an Arrow table is put in slices of
    ``batch_rows`` rows where that is given (each slice then routes as its own input)."""
    if isinstance(data, list):
        for part in data:
            yield from input_blocks(part, spark_frames, batch_rows)
        return
    if is_spark_dataframe(data):
        spark_frames.append(data)
        data = spark_to_ray(data)
    if is_ray_dataset(data):
        yield from dataset_items(data)
        return
    if is_pandas(data):
        schema = pandas_schema(data)
        if len(data):
            yield schema, Input(ray.put(data), None, len(data))
        return
    table = to_arrow(data)
    step = batch_rows or table.num_rows
    for off in range(0, table.num_rows, max(1, step)):
        part = table.slice(off, step) if step < table.num_rows else table
        yield table.schema, Input(ray.put(part), None, part.num_rows)


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
            if n is None or n > 0:
                yield _arrow_schema(schema, entry.ref, resolved), Input(entry.ref, rows, n)


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


def spark_to_ray(df: DataFrame, *, num_blocks: int | None = None) -> ray.data.Dataset:
    """A Spark DataFrame of a RayDP session as a Ray Dataset (one block per Spark partition).

    The same path as ``ray.data.from_spark`` (RayDP's recoverable conversion: Arrow blocks are
    fetched from the Spark executors by Ray tasks with lineage), without its deprecation
    warning. Spark keeps the converted partitions cached until :func:`release_spark_df` or the
    session stops; call it once the dataset is consumed (for a write: after the commit).

    Args:
        df: a DataFrame of the RayDP session (see :func:`hoodie_ray.spark.init_spark`).
        num_blocks: repartition the DataFrame to this many blocks first.
    """
    if not is_spark_dataframe(df):
        raise HoodieInputError(f"expected a Spark DataFrame, got {type(df).__name__}")
    if "pyspark.sql.connect.dataframe" in sys.modules and not _is_classic(df):
        raise HoodieUnsupportedError("Spark Connect DataFrames cannot go through RayDP")
    import_spark()
    from raydp.spark import dataset as raydp_dataset

    with no_sql_ctx_warning():
        return raydp_dataset.spark_dataframe_to_ray_dataset(df, num_blocks)


def release_spark_df(df: DataFrame) -> None:
    """Unpersist the Spark-side cache :func:`spark_to_ray` pinned for ``df`` (idempotent)."""
    import_spark()
    from raydp.spark import dataset as raydp_dataset

    with no_sql_ctx_warning():
        raydp_dataset.release_spark_recoverable(df)


def release_spark_frames(frames: list[Any]) -> None:
    """The Spark DataFrames of a committed (or dropped) checkpoint: their caches go."""
    for df in frames:
        with contextlib.suppress(Exception):
            release_spark_df(df)


@contextlib.contextmanager
def no_sql_ctx_warning() -> Iterator[None]:
    """RayDP 1.6.5 reads ``DataFrame.sql_ctx``, which pyspark 3.5 flags with a UserWarning
    (nothing the caller can act on); that one warning is dropped, others are kept."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SQL_CTX_WARNING, category=UserWarning)
        yield


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
