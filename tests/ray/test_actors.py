"""The write topology's actors (hoodie_ray/ray/actors.py): chained assigner + writer tasks."""

from __future__ import annotations

import pytest

import hoodie_ray as hr
from tests.write.model import OPTIONS, SMALL_FILES, TableModel, Workload, to_arrow

pytestmark = pytest.mark.ray


def test_chained_tasks_send_other_tasks_rows_to_their_peers(ray_session, tmp_path):
    """A table one task wrote, upserted by three chained tasks: most found keys sit in file
    groups whose home writer is another task's, so those rows go to a peer by remote call
    (while the peer sends to this one) and the checkpoint barrier waits for them in the
    driver. hudi-rs reads the model after each checkpoint; the same writes unchained give the
    same table."""
    model, wl = TableModel(), Workload(seed=23)
    first = wl.rows_for(wl.keys[:60])
    commits = [wl.upserts(40) for _ in range(3)]
    tables = {}
    for chained in ("true", "false"):
        path = tmp_path / f"chain_{chained}"
        one = {**OPTIONS, **SMALL_FILES, "write.tasks": "1", "pipeline.operator-chaining": chained}
        hr.write(to_arrow(first, True), str(path), one)
        three = {**one, "write.tasks": "3"}
        with hr.HoodieStreamWriter(str(path), three) as w:
            w.start()
            names = set(w.actor_pids())
            if chained == "true":
                assert names == {"coordinator", *(f"assign-write-{i}" for i in range(3))}
                assert w.actors["assigner-2"] == w.actors["writer-2"]
            else:
                assert {"assigner-0", "writer-0"} <= names
            for rows in commits:
                w.write(to_arrow(rows, True))
                assert w.checkpoint() is not None
        tables[chained] = path
    model.upsert(first)
    for rows in commits:
        model.upsert(rows)
    for path in tables.values():
        model.assert_hudi_rs_reads(path, path.name)
    hr.HoodieTable.load(str(tables["true"]))  # loads: a table, not a half-written one
    stats = {k: len(hr.HoodieTable.load(str(p)).latest_file_slices()) for k, p in tables.items()}
    assert stats["true"] == stats["false"], stats
