"""``hr.read_ray``: a Ray Data Datasource with one read task per file slice (small ones packed).

Unlike Ray's built-in ``read_hudi`` (base files only), each task merges its slices' log blocks:
the merge-on-read view. The query is planned once on the driver; tasks get the picklable
read context and their slices.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import ray.data
from ray.data import Datasource, ReadTask
from ray.data.block import BlockMetadata

from hoodie_ray.exceptions import HoodieQueryError
from hoodie_ray.reader.cdc import ChangeReader, GroupSteps
from hoodie_ray.reader.file_slice_reader import ReadContext, SliceSpec, iter_file_slice
from hoodie_ray.reader.query import ReadPlan, _incremental_format, cdc_range, plan_file_slices
from hoodie_ray.reader.streaming import HoodieStreamReader
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Instant

#: Slices smaller than this are packed together into one read task.
TARGET_TASK_BYTES = 128 * 1024 * 1024


def _slice_bytes(s: Any) -> int:
    sizes = getattr(s, "file_sizes", None) or {}
    names = ([s.base_file] if s.base_file else []) + list(s.log_files or ())
    return int(sum(sizes.get(n, 0) for n in names)) or 1


def pack_slices(
    slices: list[Any], parallelism: int, target_bytes: int = TARGET_TASK_BYTES
) -> list[list[Any]]:
    """Group slices into at most ``parallelism`` tasks of about ``target_bytes``, largest first."""
    if not slices:
        return []
    ordered = sorted(slices, key=_slice_bytes, reverse=True)
    if parallelism <= 0:  # no hint from Ray Data: size the tasks by bytes
        total = sum(_slice_bytes(s) for s in ordered)
        parallelism = max(1, -(-total // target_bytes))
    n = min(len(ordered), parallelism)
    bins: list[list[Any]] = [[] for _ in range(n)]
    loads = [0] * n
    for s in ordered:  # greedy: next slice to the lightest task
        i = loads.index(min(loads))
        bins[i].append(s)
        loads[i] += _slice_bytes(s)
    return [b for b in bins if b]


def _read(ctx: ReadContext, slices: list[SliceSpec]) -> Iterator[pa.Table]:
    storage = ctx.storage()
    for s in slices:
        yield from (t for t in iter_file_slice(ctx, s, storage) if t.num_rows)


class HoodieDatasource(Datasource):
    """Merge-on-read Hudi reads for Ray Data (``ray.data.read_datasource``)."""

    def __init__(
        self, path: str, storage_options: dict[str, Any] | None = None, **query: Any
    ) -> None:
        self.path = path
        self.plan: ReadPlan = plan_file_slices(path, storage_options=storage_options, **query)

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(_slice_bytes(s) for s in self.plan.slices) * 3

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        ctx = self.plan.context
        tasks = []
        for group in pack_slices(list(self.plan.slices), parallelism):
            specs = [SliceSpec.of(s) for s in group]
            meta = BlockMetadata(
                num_rows=None,
                size_bytes=sum(_slice_bytes(s) for s in group),
                exec_stats=None,
                input_files=None,
            )
            tasks.append(
                ReadTask(functools.partial(_read, ctx, specs), meta, schema=self.plan.schema)
            )
        return tasks

    def get_name(self) -> str:
        return "Hudi"


def _read_changes(
    path: str, storage_options: dict[str, Any] | None, image_format: str, units: list[GroupSteps]
) -> Iterator[pa.Table]:
    reader = ChangeReader(HoodieTable.load(path, storage_options), image_format)
    for unit in units:
        t = reader.group_changes(unit)
        if t.num_rows:
            yield t


class HoodieCdcDatasource(Datasource):
    """A CDC read for Ray Data: file groups are independent, so each read task reads the
    changes of some of the range's file groups, each group's commits in order (a task's rows
    come by file group, in commit order within one; there is no order across tasks)."""

    def __init__(
        self,
        path: str,
        storage_options: dict[str, Any] | None,
        units: list[GroupSteps],
        schema: pa.Schema,
        image_format: str = "struct",
    ) -> None:
        self.path, self.storage_options, self.image_format = path, storage_options, image_format
        self.units, self.schema = units, schema

    @classmethod
    def of_range(
        cls,
        path: str,
        storage_options: dict[str, Any] | None,
        begin: Any,
        end: Any,
        image_format: str = "struct",
    ) -> HoodieCdcDatasource:
        """The CDC read of the commits requested in ``(begin, end]``."""
        tbl = HoodieTable.load(path, storage_options)
        start, stop = cdc_range(tbl, begin, end)
        reader = ChangeReader(tbl, image_format)
        units = reader.plan(reader.commits_in(start, stop))
        return cls(tbl.base_uri, storage_options, units, reader.schema, image_format)

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        n = max(1, min(len(self.units), parallelism if parallelism > 0 else len(self.units)))
        tasks = []
        for i in range(n):
            chunk = self.units[i::n]
            meta = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None, input_files=None)
            read = functools.partial(
                _read_changes, self.path, self.storage_options, self.image_format, chunk
            )
            tasks.append(ReadTask(read, meta, schema=self.schema))
        return tasks

    def get_name(self) -> str:
        return "HudiCDC"


def read_ray(
    path: str,
    query_type: str = "snapshot",
    as_of: Any = None,
    begin: Any = None,
    end: Any = None,
    columns: Iterable[str] | None = None,
    filters: Any = None,
    *,
    storage_options: dict[str, Any] | None = None,
    override_num_blocks: int | None = None,
    incremental_format: str = "latest_state",
    cdc_image_format: str = "struct",
) -> Any:
    """Read a Hudi table into a ``ray.data.Dataset`` (the merge-on-read view).

    Same query arguments as :func:`hoodie_ray.read`. Each read task merges whole file slices;
    a CDC read (``incremental_format="cdc"``) reads the changes of some of the range's file
    groups per task.

    Example::

        ds = hr.read_ray("/data/trips", columns=["uuid", "fare"])
        ds.count()
    """
    from hoodie_ray.ray.runtime import ensure_ray

    ensure_ray()
    if _incremental_format(incremental_format) == "cdc":
        if query_type != "incremental" or as_of is not None or columns is not None or filters:
            raise HoodieQueryError(
                'incremental_format="cdc" is an incremental query of whole change rows: '
                "no as_of, columns or filters"
            )
        cdc = HoodieCdcDatasource.of_range(path, storage_options, begin, end, cdc_image_format)
        if not cdc.units:
            return ray.data.from_arrow(cdc.schema.empty_table())
        return ray.data.read_datasource(cdc, override_num_blocks=override_num_blocks)
    src = HoodieDatasource(
        path,
        storage_options=storage_options,
        query_type=query_type,
        as_of=as_of,
        begin=begin,
        end=end,
        columns=list(columns) if columns is not None else None,
        filters=filters,
        changelog=_incremental_format(incremental_format) == "changelog",
    )
    if not src.plan.slices:
        return ray.data.from_arrow(src.plan.schema.empty_table())
    return ray.data.read_datasource(src, override_num_blocks=override_num_blocks)


class RayStreamReader(HoodieStreamReader):
    """``hr.read_stream(..., engine="ray")``: each commit's batch a ``ray.data.Dataset`` whose
    read tasks read its file slices (or, for ``cdc``, its file groups' changes) across the
    cluster; the commits are chosen in the driver as for the local reader."""

    def _read(self, inst: Instant, cdc: ChangeReader | None, begin: str | None, end: str) -> Any:
        from hoodie_ray.ray.runtime import ensure_ray

        ensure_ray()
        path, so = self.tbl.base_uri, dict(self.tbl.storage_options or {}) or None
        if cdc is not None:
            src: Datasource = HoodieCdcDatasource(
                path, so, cdc.plan([inst]), cdc.schema, self.image_format
            )
            empty = not src.units  # type: ignore[attr-defined]
            schema = cdc.schema
        else:
            query = HoodieDatasource(
                path,
                so,
                query_type="incremental",
                begin=begin,
                end=end,
                columns=self.columns,
                changelog=self.format == "changelog",
            )
            src, empty, schema = query, not query.plan.slices, query.plan.schema
        if empty:
            return ray.data.from_arrow(schema.empty_table())
        return ray.data.read_datasource(src)
