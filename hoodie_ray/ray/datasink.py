"""``HoodieDatasink``: ``ds.write_datasink(hr.HoodieDatasink(path, options))``, one commit per write.

The driver opens the write topology in ``on_write_start``; Ray Data's write tasks, wherever they
run, compute record keys column-wise and send their blocks straight to the named assigner
actors (``<table>/assigner-<i>``), which route them on to the writers. ``on_write_complete``
commits the instant; ``on_write_failed`` rolls it back, so a failed write commits nothing.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import ray
from ray.data import Datasink
from ray.exceptions import RayTaskError

from hoodie_ray.config.options import resolve_options
from hoodie_ray.exceptions import HoodieSchemaError, HoodieTableNotFoundError, HoodieWriteError
from hoodie_ray.job.client import route_input
from hoodie_ray.job.coordinator import CommitResult
from hoodie_ray.ray.calls import unwrap
from hoodie_ray.ray.runtime import NAMESPACE, job_table, refuse_occ
from hoodie_ray.ray.stream import HoodieStreamWriter
from hoodie_ray.ray.topology import actor_name, assigner_role
from hoodie_ray.storage import qualified_path
from hoodie_ray.table import HoodieTable
from hoodie_ray.write.lock import new_owner_id
from hoodie_ray.write.records import to_arrow


class HoodieDatasink(Datasink):  # type: ignore[type-arg]
    """Write a Ray Dataset to a Hudi table as one commit.

    Example::

        ds.write_datasink(hr.HoodieDatasink("/data/trips", {"hoodie.table.name": "trips",
            "hoodie.datasource.write.recordkey.field": "uuid", "precombine.field": "ts"}))
    """

    def __init__(
        self,
        path: str,
        options: dict[str, Any] | None = None,
        storage_options: dict[str, Any] | None = None,
        schema: Any = None,
    ) -> None:
        # Ray passes on_write_start the schema from before any fused map_batches: for a new
        # table, pass the dataset's own schema (hr.write does: ds.schema().base_schema).
        self._schema = schema
        self.path = qualified_path(path)
        # one task an actor: the write tasks find each task's actor by its name (a copy of
        # this object reaches them before on_write_start has started any: no handles to give)
        self.options = {**(options or {}), "taskmanager.numberOfTaskSlots": "1"}
        self.storage_options = storage_options
        self.wc = resolve_options(self.options)
        refuse_occ(self.wc)
        # this job's id, made here so that the write tasks (which get a copy of this object
        # made before on_write_start may run) name the same actors the driver starts
        self._owner = new_owner_id()
        self.table = ""
        self.result: CommitResult | None = None
        self._writer: Any = None  # driver only

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_writer"] = None
        return state

    @property
    def supports_distributed_writes(self) -> bool:
        return True

    def on_write_start(self, schema: Any = None) -> None:
        w = HoodieStreamWriter(self.path, self.options, storage_options=self.storage_options)
        w.owner = self._owner
        # Ray Data gives the schema of the input before the maps fused into the write (a
        # read_parquet's is its file listing's, a map's None): trusted where it has the
        # record key, else the table's own is written (a new table then needs ``schema=``)
        given = self._schema is not None
        schema = self._schema if given else schema
        try:
            try:
                w._start(schema)
            except (HoodieSchemaError, HoodieTableNotFoundError) as e:
                if given:
                    raise
                raise HoodieSchemaError(
                    f"{e} (Ray Data gave the sink the schema of its input before the maps "
                    f"fused into the write: {_names(schema)}): pass schema=ds.schema() to "
                    "HoodieDatasink, or write with hr.write(ds)"
                ) from None
            assert w._setup is not None
            keys = w._setup.table_config.record_key_fields
            if given or (isinstance(schema, pa.Schema) and all(k in schema.names for k in keys)):
                w._evolve_to(schema)  # new columns evolve the table schema, up front
            w._begin_instant()
        except BaseException:
            w.abort()
            raise
        self._writer = w
        self.table = job_table(w._setup.table_config.name, self.path) if w._setup else ""

    def write(self, blocks: Any, ctx: Any) -> list[Any]:
        """Route this write task's blocks to the assigners; their calls' results (chained: the
        rows each tagged for another task's writer, which the commit's barrier sends on)."""
        table = self.table or self._table_name()
        coord = ray.get_actor(
            actor_name(self.wc, self._owner, table, "coordinator"), namespace=NAMESPACE
        )
        setup = ray.get(coord.setup.remote())
        if setup is None:
            raise HoodieWriteError(f"the write topology of {self.path} is not open")
        try:  # a retried task is refused: its first attempt's rows may be in the instant
            ray.get(coord.claim_input_task.remote(ctx.task_idx))
        except RayTaskError as e:
            raise unwrap(e) from None
        na = self.wc.assign_tasks
        assigners = [
            ray.get_actor(
                actor_name(self.wc, self._owner, table, assigner_role(self.wc, i)),
                namespace=NAMESPACE,
            )
            for i in range(na)
        ]
        refs: list[Any] = []
        for block in blocks:
            t = to_arrow(block)
            if t.num_rows == 0:
                continue
            # The dataset's schema decided the table schema when the write started (a new
            # table's, or the one it evolved the table's to): every block is written with it.
            # The assigners send the tagged rows on to the writers.
            for i, part in enumerate(route_input(setup, t, na)):
                if part.num_rows:
                    refs.append(assigners[i].assign.remote(part))
        return list(ray.get(refs))

    def on_write_complete(self, write_result: Any) -> None:
        w = self._writer
        if w is None:
            return
        if write_result.num_rows == 0 and self.wc.operation != "insert_overwrite_table":
            # no rows: no commit, as hr.write and checkpoint() make none (an overwrite of
            # the table with nothing still truncates it); a table this write made is removed
            w.abort()
            return
        try:
            for results in write_result.write_returns:
                w._note_assigned(list(results or []))  # rows held for a peer: take the barrier
            w._inputs = [None]  # the input came from write tasks; the instant is open
            self.result = w._run(w._checkpoint_once)
            w._inputs = []
        finally:
            w.close()

    def on_write_failed(self, error: Exception) -> None:
        """Roll the instant back; a write task's HoodieError is raised as itself (Ray Data
        raises what this raises in place of its ``RayTaskError``)."""
        if self._writer is not None:
            self._writer.abort()
        inner = unwrap(error)
        if inner is not error:
            raise inner from None

    def _table_name(self) -> str:
        return job_table(HoodieTable.load(self.path, self.storage_options).name, self.path)

    def get_name(self) -> str:
        return "Hudi"


def _names(schema: Any) -> str:
    names = getattr(schema, "names", None)
    return "no schema" if names is None else "columns " + ", ".join(map(str, names))
