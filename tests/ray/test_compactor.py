"""Table services whose work runs as Ray tasks (``ray/compactor.py``): a secondary index or
the record index built with ``engine="ray"`` is the index ``engine="local"`` builds, byte for
byte, and a task's error reaches the caller as itself."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import hoodie_ray as hr
from hoodie_ray.hfile import writer as hfile_writer
from hoodie_ray.job import maintenance
from hoodie_ray.metadata.layout import RECORD_INDEX
from hoodie_ray.ray import compactor
from hoodie_ray.ray.compactor import ray_task_map
from hoodie_ray.table import HoodieTable
from tests.conftest import extract_sample_table

JAVA = "sample_mor_avro_v9_txns_complex_meta"


def _index_files(root: Path, part: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (root / ".hoodie/metadata" / part).glob("*.hfile")}


def test_create_index_on_ray_writes_what_the_local_build_writes(
    ray_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hfile_writer.time, "time", lambda: 1_700_000_000.0)
    local = extract_sample_table(JAVA, tmp_path / "local")
    on_ray = tmp_path / "ray" / local.name
    shutil.copytree(local, on_ray)
    calls: list[tuple[int, int]] = []
    part = hr.create_index(str(local), "currency_idx", "currency")
    assert part == hr.create_index(
        str(on_ray),
        "currency_idx",
        "currency",
        engine="ray",
        on_progress=lambda d, t: calls.append((d, t)),
    )
    total = len(HoodieTable.load(str(on_ray)).view().latest_file_slices())
    assert calls and calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    got, want = _index_files(on_ray, part), _index_files(local, part)
    assert got and {n.split("_")[0]: b for n, b in got.items()} == {
        n.split("_")[0]: b for n, b in want.items()
    }
    assert not [d for d in maintenance.validate_metadata(str(on_ray)) if "secondary" in d.partition]
    with pytest.raises(hr.HoodieOptionError, match="engine"):
        hr.create_index(str(on_ray), "x_idx", "currency", engine="spark")


def test_record_index_built_on_ray_locates_every_key_as_javas(
    ray_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java's record index of the sample dropped and built again from the file slices with
    ``engine="ray"``: every key where Java's located it, the bytes of the local build, progress
    in order up to every slice, the validator clean."""
    monkeypatch.setattr(hfile_writer.time, "time", lambda: 1_700_000_000.0)
    local = extract_sample_table(JAVA, tmp_path / "local")
    java = HoodieTable.load(str(local)).metadata_table.record_index_by_file_group()
    assert sum(map(len, java.values())) > 0
    hr.drop_metadata(str(local), partition=RECORD_INDEX)
    on_ray = tmp_path / "ray" / local.name
    shutil.copytree(local, on_ray)
    key = HoodieTable.load(str(local)).table_config.record_key_fields
    calls: list[tuple[int, int]] = []
    hr.create_index(str(local), RECORD_INDEX, ",".join(key), kind=RECORD_INDEX)
    part = hr.create_index(
        str(on_ray),
        RECORD_INDEX,
        ",".join(key),
        kind=RECORD_INDEX,
        engine="ray",
        on_progress=lambda d, t: calls.append((d, t)),
    )
    assert part == RECORD_INDEX
    total = len(HoodieTable.load(str(on_ray)).view().latest_file_slices())
    assert calls and calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    got = HoodieTable.load(str(on_ray)).metadata_table.record_index_by_file_group()
    assert {g: sorted(k) for g, k in got.items() if len(k)} == {
        g: sorted(k) for g, k in java.items() if len(k)
    }
    assert _index_files(on_ray, part) == _index_files(local, part)
    assert not maintenance.validate_metadata(str(on_ray))


def _pid() -> int:
    return os.getpid()


def test_ray_task_map_when_free_spreads_only_over_free_cpus(
    ray_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator's map: Ray tasks when a node has a whole CPU free, else the calls in
    turn here (half a CPU free on each of two nodes is none); a task that does not finish in
    time leaves the rest to run here."""
    from hoodie_ray.ray import runtime

    free = [{"CPU": 1.0}]
    monkeypatch.setattr(runtime, "_nodes_available", lambda ray: free)
    assert os.getpid() not in set(compactor.ray_task_map_when_free(_pid, [(), (), ()]))
    assert list(compactor.ray_task_map_when_free(_pid, [()])) == [os.getpid()]
    free[:] = [{"CPU": 0.5}, {"CPU": 0.5}]
    assert list(compactor.ray_task_map_when_free(_pid, [(), ()])) == [os.getpid()] * 2
    free[:] = [{"CPU": 1.0}]
    here = compactor.ray_task_map_when_free(_pid, [(), ()], patience_s=0.0)
    assert list(here) == [os.getpid()] * 2


def test_record_index_turned_on_for_a_large_table_is_built_by_the_stream_writer(
    ray_session: Any, tmp_path: Path
) -> None:
    """``hoodie.metadata.record.index.enable=true`` on a table of more file slices than
    ``SPREAD_INDEX_BUILD_SLICES`` written without it: the coordinator builds the index from
    every slice (spread over Ray tasks), the write goes through it, the index holds every
    key, the validator is clean and hudi-rs reads the model."""
    from hoodie_ray.job.coordinator import SPREAD_INDEX_BUILD_SLICES
    from tests.conftest import hudi_rs_read
    from tests.write.model import TableModel, Workload, model_options, to_arrow

    path = str(tmp_path / "t")
    opts = model_options(table_type="MERGE_ON_READ", version="8")
    wl, model = Workload(3, keys=400), TableModel()
    rows = [
        {**r, "p": f"p{i % (SPREAD_INDEX_BUILD_SLICES + 2)}"}
        for i, r in enumerate(wl.rows_for(wl.keys[:300]))
    ]
    hr.write(to_arrow(rows, True), path, opts, engine="local")
    model.upsert(rows)
    assert len(HoodieTable.load(path).view().latest_file_slices()) > SPREAD_INDEX_BUILD_SLICES
    more = [
        {**r, "p": model.rows[r["key"]]["p"] if r["key"] in model.rows else "p0"}
        for r in wl.rows_for(wl.keys[250:400])
    ]
    hr.write(to_arrow(more, True), path, {**opts, "hoodie.metadata.record.index.enable": "true"})
    model.upsert(more)
    table = HoodieTable.load(path)
    assert RECORD_INDEX in table.metadata_partitions
    located = table.metadata_table.record_index_by_file_group()
    assert sorted(k for ks in located.values() for k in ks) == sorted(model.rows)
    assert not maintenance.validate_metadata(path)
    assert sorted(hudi_rs_read(path).column("key").to_pylist()) == sorted(model.rows)


def _refuse(n: int) -> int:
    if n == 2:
        raise hr.HoodieInputError(f"value {n} refused")
    return n * 10


def test_task_errors_reach_the_caller_as_themselves(ray_session: Any) -> None:
    assert list(ray_task_map(_refuse, [(0,), (1,)])) == [0, 10]
    with pytest.raises(hr.HoodieInputError, match="value 2 refused"):
        list(ray_task_map(_refuse, [(1,), (2,)]))
