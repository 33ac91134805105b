"""The coordinator's core (hoodie_ray/job/coordinator.py): what it hands each writer task."""

from __future__ import annotations

import dataclasses

import pytest

from hoodie_ray.config.options import resolve_options
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.coordinator import Coordinator
from hoodie_ray.write.bucket_assigner import writer_of_groups
from tests.write.model import OPTIONS, SMALL_FILES, Workload, to_arrow


@pytest.mark.parametrize("bucket", [False, True], ids=["simple", "bucket"])
def test_each_writer_gets_the_slices_of_the_groups_routed_to_it(tmp_path, bucket):
    """Split by the same rule the assigners route by (home writers, or the checkpoint's writer
    plan where it names a group): every slice goes to exactly one writer, the one its rows go
    to, so a writer never meets rows of a group whose slice it was not given."""
    extra = (
        {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "8"} if bucket else {}
    )
    options = {**OPTIONS, **SMALL_FILES, **extra}
    wl = Workload(seed=5)
    HoodieWriteClient(str(tmp_path), options).write(to_arrow(wl.rows_for(wl.keys[:200]), True))
    coord = Coordinator(str(tmp_path), resolve_options(options), None)
    coord.open(None)
    try:
        slices = coord.latest_slices()
        assert len(slices) > 3
        profile = coord.profile(slices)
        groups = [s.file_group_id for s in slices]
        plans = [profile.writer_plan, {groups[0]: 2, groups[1]: 2}]  # home split; a plan
        for plan in plans:
            prof = dataclasses.replace(profile, writer_plan=plan)
            split = coord.slices_by_writer(slices, prof, 3)
            want = writer_of_groups(groups, 3, plan, bucket)
            assert sorted(s.file_group_id for part in split for s in part) == sorted(groups)
            for j, part in enumerate(split):
                assert all(want[groups.index(s.file_group_id)] == j for s in part)
        assert coord.slices_by_writer(slices, profile, 1) == [slices]
    finally:
        coord.close()


def test_a_running_coordinator_switches_between_upsert_and_delete_only(tmp_path):
    """``switch_operation``: upsert <-> delete changes the setup the tasks get (its write
    config's operation); any other operation is refused, naming both, the setup unchanged."""
    from hoodie_ray.exceptions import HoodieOptionError

    wl = Workload(seed=3)
    HoodieWriteClient(str(tmp_path), OPTIONS).write(to_arrow(wl.rows_for(wl.keys[:20]), True))
    coord = Coordinator(str(tmp_path), resolve_options(OPTIONS), None)
    coord.open(None)
    try:
        setup = coord.switch_operation("delete")
        assert setup.context.write_config.operation == coord.wc.operation == "delete"
        with pytest.raises(HoodieOptionError, match="from write.operation delete to insert"):
            coord.switch_operation("insert")
        assert coord.setup is setup
        assert coord.switch_operation("upsert").context.write_config.operation == "upsert"
    finally:
        coord.close()
