"""Smoke tests of the in-process micro benchmarks at a tiny size: each runs and reports its
figures (no timing assertions), so a change of the package's internals cannot leave one broken."""

from __future__ import annotations

import json

import pytest

from benchmarks import assign_ordering, avro_encode


def test_assign_ordering_reports_both_variants(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--keys", "2000", "--rows", "500", "--batches", "2", "--repeat", "1", "--json"]
    assert assign_ordering.main(argv) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for variant in ("compared", "not_compared"):
        assert doc[f"{variant}_index_bytes_per_key"] > 0
        assert doc[f"{variant}_rows_routed"] > 0


def test_avro_encode_reports_its_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    res = avro_encode.run(2000, 1)
    assert res["rows"] == 2000 and res["encode_rows_per_s"] > 0
    assert res["bytes_per_row_block"] > 0


# suite time: the record index's build, upkeep and lookups run in CI in
# tests/metadata_writer/test_record_index.py and tests/reader/test_record_index_lookup.py; this
# benchmark's HBase HFile and MDT compaction sections are smoked in CI below
@pytest.mark.slow
def test_record_index_reports_init_commit_and_lookup(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import record_index

    argv = ["--init-keys", "30000", "--commit-base", "3000", "--commits", "2"]
    argv += ["--commit-rows", "400", "--lookup-keys", "3000", "--repeats", "1", "--json"]
    res = record_index.main(argv)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == res
    assert res["init"][0]["keys"] == 30000 and res["init"][0]["file_groups"] == 10
    assert res["commit"]["record_index_on"]["median_s"] > 0
    assert res["lookup"]["eq_1_key"]["rows"] == 1
    assert res["lookup"]["full_scan_rows"] == 3000


def test_record_index_reports_the_v6_hbase_hfile() -> None:
    from benchmarks import record_index

    res = record_index.main(["--only", "hbase", "--hbase-keys", "3000", "--repeats", "1"])
    assert res["hbase"]["keys"] == 3000 and res["hbase"]["hfile_bytes"] > 0
    assert res["hbase"]["crc32c_numpy_s"] >= 0


def test_record_index_reports_the_mdt_compaction() -> None:
    from benchmarks import record_index

    res = record_index.main(["--only", "compact", "--compact-keys", "3000", "--repeats", "1"])
    assert res["compact"]["keys"] == 3060 and res["compact"]["file_groups"] == 10
    assert res["compact"]["cpu_s"] >= 0


# suite time (and the session's Ray start): the record index built on Ray runs in CI in
# tests/ray/test_compactor.py; this benchmark's other sections are smoked above
@pytest.mark.slow
def test_record_index_reports_the_build_here_and_on_ray(ray_session: object) -> None:
    from benchmarks import record_index

    argv = ["--only", "build", "--build-keys", "3000", "--build-files", "3"]
    res = record_index.main(argv)["build"]
    assert res["keys"] == 3000 and res["files"] >= 2 and res["write_s"] > 0
    for engine in ("local", "ray"):
        assert res[engine]["keys_per_cpu_s"] > 0 and res[engine]["vs_write"] > 0


# suite time: the deferred index compaction runs in CI in tests/metadata_writer/test_record_index.py
# (test_scheduled_compaction_leaves_index_groups_with_small_logs); this benchmark's other
# sections are smoked above
@pytest.mark.slow
def test_record_index_reports_the_upkeep_under_both_schedules() -> None:
    from benchmarks import record_index

    argv = ["--only", "upkeep", "--upkeep-keys", "2000,4000", "--upkeep-commits", "2"]
    res = record_index.main([*argv, "--upkeep-rows", "300", "--repeats", "1"])["upkeep"]
    for label in ("java", "deferred"):
        assert [r["keys"] for r in res[label]["runs"]] == [2000, 4000]
        assert res[label]["scale_ratio"] > 0 and len(res[label]["runs"][0]["commit_cpu_s"]) == 1


def test_lookup_reports_each_goal(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import lookup

    argv = ["--keys", "3000", "--riders", "60", "--files", "4", "--repeats", "1", "--json"]
    res = lookup.main(argv)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == res
    # at this size a rider's rows are in every file: the planner may take either side
    assert res["rider_eq"]["rows"] > 0 and res["rider_eq"]["planner"]
    assert res["key_in_100"]["rows"] == 100
    assert set(res["goals"]) == {"rider_eq", "key_in_100", "si_build_le_write"}


@pytest.mark.slow  # Ray topologies: ~15 s
def test_clustering_beside_reports_its_ratios(ray_session) -> None:
    from benchmarks import clustering_beside

    argv = ["--checkpoints", "5", "--rows", "200", "--delta-commits", "2", "--reps", "1"]
    doc = clustering_beside.main([*argv, "--json"])
    assert doc["writer_ratio"] > 0 and doc["groups_ratio"] > 0
    beside = [r for r in doc["runs"] if r["beside"]]
    assert beside and all(r["clusterings"] >= 1 for r in beside)
