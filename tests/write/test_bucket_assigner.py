from __future__ import annotations

import numpy as np
import pyarrow as pa

from hoodie_ray.config.options import WriteConfig
from hoodie_ray.keygen import choose_key_generator
from hoodie_ray.write.bucket_assigner import (
    BUCKET_TYPE,
    FILE_ID,
    FILE_ID_TYPE,
    AssignerConfig,
    BucketAssigner,
    SmallFile,
    WriteProfile,
    file_id_task,
    key_task,
    new_file_id_for_task,
    plan_writers,
    writer_of_groups,
)
from hoodie_ray.write.records import IS_DELETED, PARTITION_PATH, prepare_batch


def _batch(ids, parts, deleted=None):
    t = pa.table({"id": ids, "p": parts, "ts": list(range(len(ids)))})
    if deleted is not None:
        t = t.append_column(IS_DELETED, pa.array(deleted))
    kg = choose_key_generator(t.schema, ["id"], ["p"])
    return prepare_batch(t, kg, ordering_field="ts", operation="upsert").table


def test_new_keys_fill_small_files_then_new_groups():
    profile = WriteProfile(avg_record_size=100, small_files={"a": [SmallFile("small-1-0", 800)]})
    # capacity of the small file: (1000 - 800) / 100 = 2 records; new groups take 10 each
    a = BucketAssigner(
        AssignerConfig.of(WriteConfig(), small_file_limit=900, max_file_size=1000), profile
    )
    out = a.assign(_batch([f"k{i}" for i in range(15)], ["a"] * 15))
    assert out.schema.field(FILE_ID).type == FILE_ID_TYPE  # an int32 code per row
    fids = out.column(FILE_ID).to_pylist()
    assert fids[:2] == ["small-1-0", "small-1-0"]
    assert out.column(BUCKET_TYPE).to_pylist()[:2] == ["U", "U"]
    assert len(set(fids[2:12])) == 1 and len(set(fids[12:])) == 1 and fids[2] != fids[12]
    assert out.column(BUCKET_TYPE).to_pylist()[2:] == ["I"] * 13


def test_duplicate_new_keys_share_a_group_and_updates_route_back():
    a = BucketAssigner(
        AssignerConfig.of(WriteConfig(), max_file_size=300), WriteProfile(avg_record_size=100)
    )
    out = a.assign(_batch(["x", "y", "x", "z", "w"], ["a"] * 5))
    f = dict(zip(out.column("id").to_pylist(), out.column(FILE_ID).to_pylist(), strict=False))
    assert out.column(FILE_ID).to_pylist()[0] == out.column(FILE_ID).to_pylist()[2]
    out2 = a.assign(_batch(["w", "x"], ["a", "a"]))
    assert out2.column(FILE_ID).to_pylist() == [f["w"], f["x"]]
    a.checkpoint_done()
    out3 = a.assign(_batch(["w"], ["a"]))
    assert out3.column(BUCKET_TYPE).to_pylist() == ["U"]


def test_global_index_partition_move_and_deletes():
    a = BucketAssigner(AssignerConfig.of(WriteConfig()), WriteProfile(avg_record_size=100))
    first = a.assign(_batch(["k1", "k2"], ["a", "a"]))
    old = first.column(FILE_ID).to_pylist()[0]
    out = a.assign(_batch(["k1", "k2", "zz"], ["b", "a", "a"], deleted=[False, True, True]))
    rows = out.select(["id", PARTITION_PATH, IS_DELETED, FILE_ID]).to_pylist()
    # k1: delete in old partition + insert in new; k2: delete routed to its group; zz: dropped
    assert {"id": "k1", PARTITION_PATH: "a", IS_DELETED: True, FILE_ID: old} in rows
    assert any(r["id"] == "k1" and r[PARTITION_PATH] == "b" and not r[IS_DELETED] for r in rows)
    assert {"id": "k2", PARTITION_PATH: "a", IS_DELETED: True, FILE_ID: old} in rows
    assert all(r["id"] != "zz" for r in rows)
    # a deleted key keeps its location: the delete may lose to a newer stored record
    assert a.index.lookup(pa.array(["k2"]))[0] >= 0


def test_non_global_index_keeps_key_per_partition():
    a = BucketAssigner(
        AssignerConfig.of(WriteConfig(), global_index=False), WriteProfile(avg_record_size=100)
    )
    a.assign(_batch(["k1"], ["a"]))
    out = a.assign(_batch(["k1"], ["b"]))
    assert out.num_rows == 1 and out.column(PARTITION_PATH).to_pylist() == ["b"]


def test_file_ownership_by_task():
    for task in range(3):
        fid = new_file_id_for_task(task, 3)
        assert file_id_task(fid, 3) == task
    profile = WriteProfile(100, {"a": [SmallFile(new_file_id_for_task(1, 2), 10)]})
    a0 = BucketAssigner(AssignerConfig.of(WriteConfig(), 0, 2), profile)
    out = a0.assign(_batch(["n"], ["a"]))
    assert out.column(FILE_ID).to_pylist()[0] != profile.small_files["a"][0].file_id
    kt = key_task(pa.array([f"k{i}" for i in range(100)]), 2)
    assert set(kt.tolist()) == {0, 1}
    assert (kt == key_task(pa.array([f"k{i}" for i in range(100)]), 2)).all()


def test_bucket_index_is_stateless_and_stable():
    a = BucketAssigner(
        AssignerConfig.of(WriteConfig(), index_type="BUCKET", bucket_num=2), WriteProfile(100)
    )
    out = a.assign(_batch([f"k{i}" for i in range(20)], ["a"] * 20))
    fids = set(out.column(FILE_ID).to_pylist())
    assert len(fids) == 2 and all(f[:8] in ("00000000", "00000001") for f in fids)
    b = BucketAssigner(
        AssignerConfig.of(WriteConfig(), index_type="BUCKET", bucket_num=2), WriteProfile(100)
    )
    b.set_bucket_file_ids([("a", f) for f in fids])
    assert set(b.assign(_batch(["k1"], ["a"])).column(FILE_ID).to_pylist()) <= fids


def test_bucket_index_hashes_the_record_key_fields_as_java_does():
    """The assigner buckets by the values of its record key fields' pairs (Java's
    ``extractRecordKeysByFields``): a simple key holding ',' and ':' hashes whole (it was
    read as pairs ``host:80`` and ``backup``: ArrowInvalid)."""
    from hoodie_ray.index import bucket_ids, java_string_hash
    from hoodie_ray.meta import RECORD_KEY

    wc = WriteConfig(record_key_field="id", index_type="BUCKET", bucket_num=64)
    cfg = AssignerConfig.of(wc)
    assert cfg.record_key_fields == ("id",)
    keys = ["host:80,backup", "10:00,11:00", "k1"]
    out = BucketAssigner(cfg, WriteProfile(100)).assign(_batch(keys, ["a"] * 3))
    whole = (31 + java_string_hash(pa.array(keys)).astype(np.int64)) & 0x7FFFFFFF
    rows = zip(out.column(RECORD_KEY).to_pylist(), out.column(FILE_ID).to_pylist(), strict=True)
    got = {k: int(f[:8]) for k, f in rows}
    assert got == dict(zip(keys, (whole % 64).tolist(), strict=True))
    assert bucket_ids(pa.array(keys), 64, ["id"]).tolist() == (whole % 64).tolist()


def test_bootstrap_filters_by_task():
    a = BucketAssigner(AssignerConfig.of(WriteConfig(), 0, 2), WriteProfile(100))
    keys = pa.array([f"k{i}" for i in range(50)])
    a.bootstrap([("a", "f-0", keys)])
    mine = key_task(keys, 2) == 0
    assert ((a.index.lookup(keys) >= 0) == mine).all()
    assert np.count_nonzero(mine) == len(a.index)


def test_new_file_groups_go_to_the_assigners_own_writer():
    """With as many writers as assigners, each assigner's new file groups have its own writer
    as home writer: its inserts reach one writer, not every one."""
    for task in (0, 1):
        a = BucketAssigner(
            AssignerConfig.of(WriteConfig(), task, 2, max_file_size=1000, num_writers=2),
            WriteProfile(avg_record_size=100),
        )
        out = a.assign(_batch([f"k{i}" for i in range(40)], ["a"] * 40))
        groups = sorted({("a", f) for f in out.column(FILE_ID).to_pylist()})
        assert len(groups) == 4
        assert writer_of_groups(groups, 2).tolist() == [task] * 4
        assert all(file_id_task(f, 2) == task for _, f in groups)


def test_new_file_groups_take_turns_over_more_writers_than_assigners():
    """One assigner, two writers: new file ids are drawn so that their home writers take
    turns (a plain hash of four ids often is not two and two)."""
    a = BucketAssigner(
        AssignerConfig.of(WriteConfig(), 0, 1, max_file_size=1000, num_writers=2),
        WriteProfile(avg_record_size=100),
    )
    out = a.assign(_batch([f"k{i}" for i in range(40)], ["a"] * 40))
    groups = sorted({("a", f) for f in out.column(FILE_ID).to_pylist()})
    assert len(groups) == 4
    assert sorted(np.bincount(writer_of_groups(groups, 2), minlength=2).tolist()) == [2, 2]


def test_a_balanced_home_split_needs_no_plan():
    """Groups whose home writers carry even loads keep them (no plan: each assigner sends to
    its own writer); an uneven home split gets the longest-first plan."""
    groups = [("", new_file_id_for_task(t, 2)) for t in (0, 0, 1, 1)]
    assert plan_writers(dict.fromkeys(groups, 10.0), 2) == {}
    skewed = {groups[0]: 40.0, groups[1]: 30.0, groups[2]: 20.0, groups[3]: 10.0}
    plan = plan_writers(skewed, 2)
    assert sorted(plan) == sorted(groups)
    totals = [sum(v for g, v in skewed.items() if plan[g] == w) for w in (0, 1)]
    assert totals == [50.0, 50.0]


def test_writer_plan_packs_the_largest_loads_first():
    """Longest-first packing: loads 40, 30, 20, 10 over two writers split 50/50 (a hash or a
    turn by creation order can put 40 and 30 together); the plan is the same in any order."""
    loads = {("", "a"): 40.0, ("", "b"): 30.0, ("", "c"): 20.0, ("", "d"): 10.0}
    plan = plan_writers(loads, 2)
    totals = [sum(v for g, v in loads.items() if plan[g] == w) for w in (0, 1)]
    assert totals == [50.0, 50.0]
    assert plan_writers(dict(reversed(list(loads.items()))), 2) == plan
    assert plan_writers(loads, 1) == {}
    assert plan_writers({}, 2) == {}


def test_writer_plan_overrides_the_hash():
    groups = [("p", f"f{i}") for i in range(8)]
    hashed = writer_of_groups(groups, 3)
    plan = {groups[0]: (int(hashed[0]) + 1) % 3, groups[1]: 7}  # an out-of-range entry: hash
    routed = writer_of_groups(groups, 3, plan)
    assert routed[0] == (hashed[0] + 1) % 3
    assert routed[1:].tolist() == hashed[1:].tolist()


def test_inserts_spread_over_the_small_files_of_every_writer():
    """Small files of two writers take half the inserts each (packing them all into the first
    small file would give one writer every insert, and that group the most updates later)."""
    plan = {("a", "f1"): 0, ("a", "f2"): 1, ("a", "f3"): 0}
    profile = WriteProfile(
        avg_record_size=100,
        small_files={"a": [SmallFile("f1", 100), SmallFile("f2", 100), SmallFile("f3", 100)]},
        writer_plan=plan,
    )
    a = BucketAssigner(
        AssignerConfig.of(WriteConfig(), 0, 1, max_file_size=100_000, num_writers=2), profile
    )
    out = a.assign(_batch([f"k{i}" for i in range(41)], ["a"] * 41))
    fids = out.column(FILE_ID).to_pylist()
    per_writer = np.bincount([plan[("a", f)] for f in fids], minlength=2)
    assert per_writer.tolist() == [21, 20]
    assert set(fids) == {"f1", "f2"}  # f3 not needed: f1 holds writer 0's share


def test_repeated_keys_go_on_unfolded_where_they_cannot_diverge():
    """On a non-partitioned table without deletes the assigner leaves the fold to the writers
    (every row of a key reaches its one group); a batch with a delete is still folded first,
    so an insert and its later delete in one batch leave nothing."""
    cfg = AssignerConfig.of(WriteConfig(), partitioned=False)
    a = BucketAssigner(cfg, WriteProfile(avg_record_size=100))
    out = a.assign_batch(_batch(["a", "b", "a"], ["", "", ""]))
    assert out.num_rows == 3
    fids = out.column(FILE_ID).to_pylist()
    assert fids[0] == fids[2] and len(a.index) == 2
    b = BucketAssigner(cfg, WriteProfile(avg_record_size=100))
    out = b.assign_batch(_batch(["x", "x"], ["", ""], deleted=[False, True]))
    assert out.num_rows == 0 and len(b.index) == 0


def test_a_kept_default_delete_and_its_successor_route_to_the_key_group():
    """A delete batch whose precombine keeps a default-ordered delete before the next delete
    of its key (hoodie_ray.merge): both rows reach the key's group; an unknown key's go."""
    cfg = AssignerConfig.of(WriteConfig(), partitioned=False, ordering_field="ts")
    a = BucketAssigner(cfg, WriteProfile(avg_record_size=100))
    first = a.assign_batch(_batch(["a", "b"], ["", ""]))
    group = first.column(FILE_ID)[0].as_py()
    a.checkpoint_done()
    t = pa.table({"id": ["a", "a", "c", "c"], "p": [""] * 4, "ts": [None, 5, None, 7]})
    kg = choose_key_generator(t.schema, ["id"], ["p"])
    rows = prepare_batch(t, kg, ordering_field="ts", operation="delete").table
    out = a.assign_batch(rows)
    assert out.column("id").to_pylist() == ["a", "a"]
    assert out.column("ts").to_pylist() == [None, 5]
    assert out.column(FILE_ID).to_pylist() == [group, group]


def test_repeated_new_keys_are_indexed_once_with_their_last_rows_ordering():
    a = BucketAssigner(
        AssignerConfig.of(WriteConfig(), ordering_field="ts", partitioned=True, max_file_size=300),
        WriteProfile(avg_record_size=100),
    )
    t = pa.table({"id": ["x", "y", "x", "z", "x"], "p": ["a"] * 5, "ts": [5, 1, 9, 2, 7]})
    kg = choose_key_generator(t.schema, ["id"], ["p"])
    out = a.assign(prepare_batch(t, kg, ordering_field="ts", operation="upsert").table)
    fids = out.column(FILE_ID).to_pylist()
    assert fids[0] == fids[2] == fids[4]  # one group a key
    keys = pa.array(["x", "y", "z"])
    loc, seg, pos = a.index.probe(keys)
    assert (loc >= 0).all()
    assert len(a.index) == 3
    # the index keeps the ordering value of each key's last row (as its put always did)
    assert a.index.ordering_at(seg, pos).tolist() == [7, 1, 2]
