from __future__ import annotations

import pytest

from hoodie_ray.config.options import OPTIONS, resolve_options
from hoodie_ray.exceptions import HoodieOptionError


def test_defaults_and_aliases():
    cfg = resolve_options(
        {
            "precombine.field": "ts",
            "write.tasks": "3",
            "hoodie.datasource.write.recordkey.field": "id",
        }
    )
    assert cfg.precombine_field == "ts"
    assert cfg.write_tasks == 3 and cfg.assign_tasks == 3
    assert cfg.table_type == "MERGE_ON_READ"
    assert cfg.write_batch_size == 256 * 1024 * 1024
    assert cfg.record_key_fields == ["id"]
    assert cfg.is_set("write_tasks") and not cfg.is_set("table_type")


def test_sizes_accept_units():
    cfg = resolve_options(
        {"write.batch.size": "64", "write.task.max.size": "2GB", "hoodie.logfile.max.size": "1MB"}
    )
    assert cfg.write_batch_size == 64 * 1024 * 1024
    assert cfg.write_task_max_size == 2 * 1024**3
    assert cfg.logfile_max_size == 1024 * 1024


def test_unknown_option_names_key_and_suggests():
    with pytest.raises(
        HoodieOptionError, match=r"hoodie.datasource.write.recordkey.feild.*did you mean"
    ):
        resolve_options({"hoodie.datasource.write.recordkey.feild": "id"})


@pytest.mark.parametrize(
    "key,value",
    [
        ("write.tasks", "zero"),
        ("write.tasks", "0"),
        ("hoodie.datasource.write.operation", "merge"),
        ("index.type", "BLOOM"),
        ("hoodie.write.table.version", "7"),
        ("hoodie.metadata.enable", "sometimes"),
        ("compaction.async.enabled", "maybe"),
    ],
)
def test_invalid_values_name_the_option(key, value):
    with pytest.raises(HoodieOptionError, match=key.split(".")[0]):
        resolve_options({key: value})


def test_conflicting_spellings():
    with pytest.raises(HoodieOptionError, match="conflicts"):
        resolve_options({"precombine.field": "a", "hoodie.datasource.write.precombine.field": "b"})


def test_registry_is_documented():
    assert all(o.doc for o in OPTIONS)


def test_write_config_defaults_are_the_registrys():
    from hoodie_ray.config.options import WriteConfig

    wc = WriteConfig()
    for opt in OPTIONS:
        assert getattr(wc, opt.attr) == opt.default, opt.key


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"hoodie.keep.min.commits": "50", "hoodie.keep.max.commits": "50"}, "hoodie.keep.min"),
        ({"archive.min_commits": "60"}, "archive.min_commits=60 must be less than"),
        ({"hoodie.keep.min.commits": "20", "hoodie.keep.max.commits": "30"}, "clean.retain"),
        (
            {"hoodie.cleaner.commits.retained": "45", "archive.max_commits": "60"},
            "hoodie.cleaner.commits.retained=45",
        ),
    ],
)
def test_archival_retention_is_checked(options, named):
    with pytest.raises(HoodieOptionError, match=named.replace(".", r"\.")):
        resolve_options(options)


def test_archival_retention_valid_combinations():
    wc = resolve_options(
        {
            "hoodie.keep.min.commits": "20",
            "hoodie.keep.max.commits": "30",
            "clean.retain_commits": "10",
        }
    )
    assert (wc.keep_min_commits, wc.keep_max_commits, wc.clean_retain_commits) == (20, 30, 10)
    assert (
        resolve_options(
            {
                "hoodie.keep.min.commits": "5",
                "clean.async.enabled": "false",
                "hoodie.keep.max.commits": "8",
            }
        ).keep_max_commits
        == 8
    )


def test_concurrency_options_have_hudis_names_and_defaults():
    wc = resolve_options({})
    assert wc.concurrency_mode == "single_writer" and not wc.occ
    assert not wc.lazy_failed_writes
    assert (wc.heartbeat_interval_ms, wc.heartbeat_tolerable_misses) == (60000, 2)
    assert wc.num_retries_on_conflict == 0
    occ = resolve_options(
        {
            "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
            "hoodie.write.num.retries.on.conflict.failures": "3",
        }
    )
    assert occ.occ and occ.lazy_failed_writes and occ.num_retries_on_conflict == 3
    assert occ.as_options()["hoodie.write.concurrency.mode"] == "optimistic_concurrency_control"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            {
                "hoodie.write.concurrency.mode": "non_blocking_concurrency_control",
                "table.type": "COPY_ON_WRITE",
            },
            "concurrency.mode",
        ),
        ({"hoodie.write.concurrency.mode": "multi"}, "hoodie.write.concurrency.mode"),
        ({"hoodie.write.num.retries.on.conflict.failures": "-1"}, "retries.on.conflict"),
        ({"hoodie.client.heartbeat.interval_in_ms": "0"}, "heartbeat.interval_in_ms"),
        (
            {
                "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
                "hoodie.cleaner.policy.failed.writes": "EAGER",
            },
            "hoodie.cleaner.policy.failed.writes",
        ),
    ],
)
def test_concurrency_options_refused_name_the_option(options, named):
    with pytest.raises(HoodieOptionError, match=named):
        resolve_options(options)


def test_write_conflict_error_pickles_and_is_a_commit_conflict():
    import pickle

    from hoodie_ray.exceptions import HoodieCommitConflictError, HoodieWriteConflictError

    e = pickle.loads(pickle.dumps(HoodieWriteConflictError("instant 1 conflicts with 2")))
    assert isinstance(e, HoodieWriteConflictError) and isinstance(e, HoodieCommitConflictError)
    assert str(e) == "instant 1 conflicts with 2"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hoodie.index.bloom.fpp", "1"),
        ("hoodie.index.bloom.fpp", "1.5"),
        ("hoodie.index.bloom.fpp", "0"),
        ("hoodie.index.bloom.num_entries", "99999999999999999999"),
        ("hoodie.bloom.index.filter.dynamic.max.entries", "2147483648"),
        ("hoodie.bloom.index.filter.dynamic.max.entries", "0"),
    ],
)
def test_bloom_filter_options_are_checked_when_read(key, value):
    """A bloom filter option out of Java's range is refused when the options are read, before
    a write opens an instant (found by the options fuzz: they failed at the first flush)."""
    with pytest.raises(HoodieOptionError, match=key.replace(".", r"\.")):
        resolve_options({key: value})
