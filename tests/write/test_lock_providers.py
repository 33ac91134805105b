"""Hudi-compatible lock providers (write/lock_providers.py): FileSystemBasedLockProvider and
StorageBasedLockProvider, on local files and on S3 (moto).

Time is moved by a fake clock (``clock``), never slept: a holder's heartbeat is its explicit
``renew()``. Lock files "written by Java" are the bytes Java's code writes (LockInfo through
Jackson's default pretty printer; StorageLockData through Jackson's compact writer).
"""

from __future__ import annotations

import json
import os
import re
import time
import types

import pytest

from hoodie_ray.config.options import (
    FILESYSTEM_LOCK_PROVIDER,
    STORAGE_LOCK_PROVIDER,
    resolve_options,
)
from hoodie_ray.exceptions import HoodieCommitConflictError, HoodieOptionError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.storage import ArrowStorage, LocalStorage
from hoodie_ray.write import lock_providers as lp
from hoodie_ray.write.lock import LOCK_PATH, WriterLock
from hoodie_ray.write.lock_providers import (
    STORAGE_LOCK_PATH,
    FileSystemBasedLock,
    LockData,
    StorageBasedLock,
    open_lock,
)
from tests.job.test_occ import OCC, _during_commit, _instants, _seeded, row
from tests.test_s3 import s3_endpoint, s3_path, storage_options  # noqa: F401 (fixtures)
from tests.write.model import model_options, to_arrow

FS_LOCK = ".hoodie/lock"
# As Java's FileSystemBasedLockProvider writes it: LockInfo, Jackson's default pretty printer
JAVA_LOCK_INFO = (
    b"{\n"
    b'  "lockCreateTime" : "2026-11-27 04:00:00.123",\n'
    b'  "lockThreadName" : "main",\n'
    b'  "lockStacksInfo" : [ "java.lang.Thread.getStackTrace (Thread.java:1610)", '
    b'"org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider.initLockInfo '
    b'(FileSystemBasedLockProvider.java:177)" ]\n'
    b"}"
)


def java_storage_lock(expired: bool, valid_until_ms: int, owner: str) -> bytes:
    """StorageLockData as Java's ObjectMapper writes it."""
    flag = "true" if expired else "false"
    return f'{{"expired":{flag},"validUntil":{valid_until_ms},"owner":"{owner}"}}'.encode()


@pytest.fixture
def clock(monkeypatch):
    """The providers' wall clock, moved by ``clock.advance(seconds)``."""
    offset = [0.0]
    fake = types.SimpleNamespace(time=lambda: time.time() + offset[0])
    monkeypatch.setattr(lp, "time", fake)
    fake.advance = lambda s: offset.__setitem__(0, offset[0] + s)
    return fake


@pytest.fixture
def storage(tmp_path):
    (tmp_path / ".hoodie").mkdir()
    return LocalStorage(str(tmp_path))


def fs_lock(storage, owner=None, expire_s=60.0):
    return FileSystemBasedLock(storage, expire_s=expire_s, heartbeat_s=3600, owner=owner)


def storage_lock(storage, owner=None, validity_s=60.0):
    return StorageBasedLock(storage, validity_s=validity_s, heartbeat_s=3600, owner=owner)


MAKERS = {"filesystem": fs_lock, "storage": storage_lock}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_second_holder_is_refused_and_a_released_lock_is_free(storage, kind):
    make = MAKERS[kind]
    a = make(storage).acquire()
    with pytest.raises(HoodieCommitConflictError, match="locked by"):
        make(storage).acquire()
    with pytest.raises(HoodieCommitConflictError, match="waited hoodie.write.lock.wait_time_ms"):
        make(storage).acquire_waiting(20)
    a.check()
    a.release()
    b = make(storage).acquire()
    b.check()
    again = make(storage, owner=b.owner).acquire()  # the same owner re-takes (a restart)
    again.check()
    again.release()
    b.release()
    if kind == "filesystem":
        assert not storage.exists(FS_LOCK)  # Java's unlock deletes the file
    else:  # Java's unlock marks it expired; the file stays
        data = LockData.parse(storage.read_bytes(STORAGE_LOCK_PATH))
        assert data is not None and data.expired and data.owner == again.owner
    assert not storage.exists(LOCK_PATH)  # hoodie_ray's own lock was never involved


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_expired_only_after_expiry_never_while_its_holder_heartbeats(storage, clock, kind):
    make = MAKERS[kind]
    a = make(storage).acquire()
    clock.advance(40)
    with pytest.raises(HoodieCommitConflictError, match="locked by"):
        make(storage).acquire()  # 40 s of 60: still valid
    assert a.renew()  # the heartbeat: valid 60 s from now
    clock.advance(40)
    with pytest.raises(HoodieCommitConflictError, match="locked by"):
        make(storage).acquire()  # 80 s after acquiring, 40 s after the renewal
    clock.advance(61)  # the holder stalled past the expiry: taken over
    b = make(storage).acquire()
    b.check()
    with pytest.raises(HoodieCommitConflictError, match="lost the lock"):
        a.check()
    assert not a.renew()  # a stalled holder's late heartbeat never writes b's lock back
    a.release()  # and its release leaves b's lock alone
    b.check()
    assert not make(storage, owner=a.owner).release_owned()
    b.release()


def test_fs_lock_never_expires_with_expire_zero(storage, clock):
    storage.write_bytes(FS_LOCK, JAVA_LOCK_INFO)
    clock.advance(10 * 365 * 86400)
    with pytest.raises(HoodieCommitConflictError, match="a Java writer"):
        fs_lock(storage, expire_s=0).acquire()
    assert storage.read_bytes(FS_LOCK) == JAVA_LOCK_INFO


@pytest.mark.parametrize("content", [JAVA_LOCK_INFO, b""], ids=["lock_info", "empty"])
def test_java_fs_lock_is_honoured_until_it_expires(storage, clock, content):
    """Java's lock (its LockInfo, or the empty file Hadoop's local create leaves when the
    content is written only if the file did not exist yet) refuses us until its modification
    time is older than the expiry; then it is deleted and ours created."""
    storage.write_bytes(FS_LOCK, content)
    with pytest.raises(HoodieCommitConflictError, match="a Java writer"):
        fs_lock(storage).acquire_waiting(20)
    assert storage.read_bytes(FS_LOCK) == content
    clock.advance(61)
    ours = fs_lock(storage).acquire()
    assert storage.read_bytes(FS_LOCK) != content
    ours.release()
    assert not storage.exists(FS_LOCK)


def test_our_fs_lock_reads_as_javas_lock_info(storage):
    a = fs_lock(storage).acquire()
    raw = storage.read_bytes(FS_LOCK)
    info = json.loads(raw)
    assert list(info) == ["lockCreateTime", "lockThreadName", "lockStacksInfo"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", info["lockCreateTime"])
    assert info["lockThreadName"] == f"hoodie-ray:{a.owner}"
    assert isinstance(info["lockStacksInfo"], list) and info["lockStacksInfo"]
    assert raw.startswith(b'{\n  "lockCreateTime" : "')  # Jackson's pretty printer's shape
    a.release()


@pytest.mark.parametrize(
    "content",
    [
        java_storage_lock(False, 0, "java-owner"),
        # Java reads past unknown fields (FAIL_ON_UNKNOWN_PROPERTIES off): so do we
        b'{"expired":false,"validUntil":0,"owner":"java-owner","extra":1}',
    ],
    ids=["plain", "unknown_field"],
)
def test_java_storage_lock_is_honoured_until_valid_until_passes(storage, clock, content):
    valid_until = int(time.time() * 1000) + 30_000
    content = content.replace(b'"validUntil":0', f'"validUntil":{valid_until}'.encode())
    storage.write_bytes(STORAGE_LOCK_PATH, content)
    with pytest.raises(HoodieCommitConflictError, match="locked by java-owner"):
        storage_lock(storage).acquire_waiting(20)
    clock.advance(30.3)  # past validUntil, but within Java's 500 ms clock-drift allowance
    with pytest.raises(HoodieCommitConflictError, match="locked by java-owner"):
        storage_lock(storage).acquire()
    clock.advance(1)
    ours = storage_lock(storage).acquire()
    ours.release()


def test_java_storage_lock_marked_expired_is_free(storage):
    future = int(time.time() * 1000) + 3_600_000
    storage.write_bytes(STORAGE_LOCK_PATH, java_storage_lock(True, future, "java-owner"))
    storage_lock(storage).acquire().release()


def test_our_storage_lock_reads_as_javas_storage_lock_data(storage):
    before = int(time.time() * 1000)
    a = storage_lock(storage, validity_s=300).acquire()
    raw = storage.read_bytes(STORAGE_LOCK_PATH)
    assert re.fullmatch(rb'\{"expired":false,"validUntil":\d+,"owner":"[^"]+"\}', raw)
    d = json.loads(raw)
    assert d["owner"] == a.owner and before + 300_000 <= d["validUntil"] <= before + 310_000
    a.release()
    assert json.loads(storage.read_bytes(STORAGE_LOCK_PATH)) == {**d, "expired": True}


def test_storage_lock_refuses_a_replaced_version(storage):
    """The compare-and-swap: a renewal or release against a version someone else replaced
    fails, whatever the content."""
    a = storage_lock(storage).acquire()
    other = storage_lock(storage, owner=a.owner)  # same owner id, other process
    other.acquire()  # re-takes: a new version
    assert not a.renew()
    a.release()  # its stale version: nothing written
    data = LockData.parse(storage.read_bytes(STORAGE_LOCK_PATH))
    assert data is not None and not data.expired
    other.release()


def test_factory_and_options(tmp_path, storage):
    assert isinstance(open_lock(storage), WriterLock)  # the default
    wc = resolve_options(
        {
            "hoodie.write.lock.provider": FILESYSTEM_LOCK_PROVIDER,
            "hoodie.write.lock.filesystem.expire": "2",
            "hoodie.write.lock.filesystem.path": str(tmp_path / "elsewhere"),
        }
    )
    lock = open_lock(storage, wc)
    assert isinstance(lock, FileSystemBasedLock) and lock.expire_s == 120
    lock.acquire()
    assert (tmp_path / "elsewhere" / "lock").exists() and not storage.exists(FS_LOCK)
    lock.release()
    wc = resolve_options({"hoodie.write.lock.provider": STORAGE_LOCK_PROVIDER})
    lock = open_lock(storage, wc)
    assert isinstance(lock, StorageBasedLock)
    assert (lock.validity_s, lock.heartbeat_s) == (300, 30)  # Java's defaults
    with pytest.raises(HoodieOptionError, match="hoodie.write.lock.provider"):
        resolve_options({"hoodie.write.lock.provider": "org.example.ZookeeperLock"})
    with pytest.raises(HoodieOptionError, match="10 x hoodie.write.lock.storage.heartbeat"):
        resolve_options({"hoodie.write.lock.storage.validity.timeout.secs": "60"})
    with pytest.raises(HoodieOptionError, match="at least 10 seconds"):
        resolve_options(
            {
                "hoodie.write.lock.storage.validity.timeout.secs": "5",
                "hoodie.write.lock.storage.heartbeat.poll.secs": "1",
            }
        )


def test_providers_refuse_storage_without_the_writes_they_need():
    mock = ArrowStorage("mock:///t")
    for provider in (FILESYSTEM_LOCK_PROVIDER, STORAGE_LOCK_PROVIDER):
        wc = resolve_options({"hoodie.write.lock.provider": provider})
        with pytest.raises(HoodieOptionError, match=rf"{provider}.*storage mock:///t"):
            open_lock(mock, wc)


# -- two OCC writers through each provider ----------------------------------------------------------


@pytest.mark.parametrize("provider", [FILESYSTEM_LOCK_PROVIDER, STORAGE_LOCK_PROVIDER])
def test_two_occ_writers_commit_through_the_provider(tmp_path, provider):
    opts = model_options({**OCC, "hoodie.write.lock.provider": provider})
    path, opts, model = _seeded(tmp_path, opts)
    a_rows = [row("a1", "a", 2, 10), row("a9", "a", 2, 11)]
    b_rows = [row("b1", "b", 3, 20), row("b2", "b", 3, 21)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)
    with _during_commit(lambda: b.write(to_arrow(b_rows, True))) as held:
        res = a.write(to_arrow(a_rows, True))
    assert res.instant == held[0]
    model.upsert(b_rows)
    model.upsert(a_rows)
    model.assert_hudi_rs_reads(path)
    t = tmp_path / "t"
    assert not (t / LOCK_PATH).exists()  # only the chosen provider's file
    if provider == FILESYSTEM_LOCK_PROVIDER:
        assert not (t / FS_LOCK).exists()
    else:
        data = LockData.parse((t / STORAGE_LOCK_PATH).read_bytes())
        assert data is not None and data.expired


@pytest.mark.parametrize("provider", [FILESYSTEM_LOCK_PROVIDER, STORAGE_LOCK_PROVIDER])
def test_occ_writer_waits_for_a_java_holder_then_gives_up_table_unchanged(tmp_path, provider):
    opts = model_options({**OCC, "hoodie.write.lock.provider": provider})
    path, opts, model = _seeded(tmp_path, opts)
    before = [i.timestamp for i in _instants(path)]
    t = tmp_path / "t"
    if provider == FILESYSTEM_LOCK_PROVIDER:
        (t / FS_LOCK).write_bytes(JAVA_LOCK_INFO)
    else:
        until = int(time.time() * 1000) + 600_000
        (t / STORAGE_LOCK_PATH).write_bytes(java_storage_lock(False, until, "java-owner"))
    client = HoodieWriteClient(path, {**opts, "hoodie.write.lock.wait_time_ms": "30"})
    with pytest.raises(HoodieCommitConflictError, match="waited hoodie.write.lock.wait_time_ms"):
        client.write(to_arrow([row("a1", "a", 9, 99)], True))
    assert [i.timestamp for i in _instants(path)] == before
    model.assert_hudi_rs_reads(path)
    os.remove(t / (FS_LOCK if provider == FILESYSTEM_LOCK_PROVIDER else STORAGE_LOCK_PATH))


# -- S3 (moto) ---------------------------------------------------------------------------------------


def test_storage_lock_on_s3(s3_path, storage_options):  # noqa: F811
    storage = ArrowStorage(s3_path, storage_options)
    a = StorageBasedLock(storage, validity_s=60, heartbeat_s=3600).acquire()
    with pytest.raises(HoodieCommitConflictError, match="locked by"):
        StorageBasedLock(storage, validity_s=60).acquire()
    assert a.renew()
    a.check()
    raw = storage.read_bytes(STORAGE_LOCK_PATH)
    assert LockData.parse(raw) is not None and json.loads(raw)["owner"] == a.owner
    a.release()
    assert LockData.parse(storage.read_bytes(STORAGE_LOCK_PATH)).expired  # type: ignore[union-attr]
    # a Java holder's lock past its validity is taken over (If-Match on its ETag)
    past = int(time.time() * 1000) - 5_000
    storage.write_bytes(STORAGE_LOCK_PATH, java_storage_lock(False, past, "java-owner"))
    b = StorageBasedLock(storage, validity_s=60, heartbeat_s=3600).acquire()
    # ... and a stale ETag can neither renew nor release it
    storage.write_bytes(STORAGE_LOCK_PATH, java_storage_lock(False, past + 10**9, "java-owner"))
    assert not b.renew()
    b.release()
    assert b"java-owner" in storage.read_bytes(STORAGE_LOCK_PATH)
    with pytest.raises(HoodieOptionError, match=rf"{FILESYSTEM_LOCK_PROVIDER}.*{s3_path}"):
        open_lock(
            storage, resolve_options({"hoodie.write.lock.provider": FILESYSTEM_LOCK_PROVIDER})
        )


# suite time: the storage lock on S3 runs in CI in test_storage_lock_on_s3, two OCC writers
# through it in test_two_occ_writers_commit_through_the_provider
@pytest.mark.slow
def test_two_occ_writers_on_s3_through_the_storage_lock(s3_path, s3_endpoint, storage_options):  # noqa: F811
    from tests.test_s3 import hudi_rs_s3_snapshot
    from tests.write.model import TableModel

    opts = model_options({**OCC, "hoodie.write.lock.provider": STORAGE_LOCK_PROVIDER})
    model = TableModel()
    seed = [row(f"a{i}", "a", 1, i) for i in range(3)] + [row(f"b{i}", "b", 1, i) for i in range(3)]
    model.write(s3_path, opts, "upsert", seed, storage_options=storage_options)
    a_rows, b_rows = [row("a1", "a", 2, 10)], [row("b1", "b", 3, 20)]
    a = HoodieWriteClient(s3_path, opts, storage_options)
    b = HoodieWriteClient(s3_path, opts, storage_options)
    with _during_commit(lambda: b.write(to_arrow(b_rows, True))):
        a.write(to_arrow(a_rows, True))
    model.upsert(b_rows)
    model.upsert(a_rows)
    assert hudi_rs_s3_snapshot(s3_path, s3_endpoint).to_pylist() == model.as_table().to_pylist()
    storage = ArrowStorage(s3_path, storage_options)
    assert not storage.exists(LOCK_PATH)
    assert LockData.parse(storage.read_bytes(STORAGE_LOCK_PATH)).expired  # type: ignore[union-attr]


@pytest.mark.parametrize("provider", [FILESYSTEM_LOCK_PROVIDER, STORAGE_LOCK_PROVIDER])
def test_occ_turn_that_lost_its_lock_commits_nothing(tmp_path, provider, monkeypatch):
    """A writer whose lock was taken over during its commit turn (it stalled past the expiry)
    fails before writing the completed instant; readers see the table as it was."""
    from hoodie_ray.job.coordinator import Coordinator

    opts = model_options({**OCC, "hoodie.write.lock.provider": provider})
    path, opts, model = _seeded(tmp_path, opts)
    t = tmp_path / "t"
    real = Coordinator._check_conflicts

    def taken_over(self, instant, stats, *rest):  # type: ignore[no-untyped-def]
        real(self, instant, stats, *rest)
        if provider == FILESYSTEM_LOCK_PROVIDER:
            (t / FS_LOCK).write_bytes(JAVA_LOCK_INFO)  # deleted as expired, re-created by Java
        else:
            until = int(time.time() * 1000) + 600_000
            (t / STORAGE_LOCK_PATH).write_bytes(java_storage_lock(False, until, "java-owner"))

    monkeypatch.setattr(Coordinator, "_check_conflicts", taken_over)
    # its best-effort rollback waits for the new holder only briefly
    client = HoodieWriteClient(path, {**opts, "hoodie.write.lock.wait_time_ms": "30"})
    with pytest.raises(HoodieCommitConflictError, match="lost the lock"):
        client.write(to_arrow([row("a1", "a", 9, 99)], True))
    model.assert_hudi_rs_reads(path)
    # the new holder's lock is left as it is
    if provider == FILESYSTEM_LOCK_PROVIDER:
        assert (t / FS_LOCK).read_bytes() == JAVA_LOCK_INFO
    else:
        assert json.loads((t / STORAGE_LOCK_PATH).read_bytes())["owner"] == "java-owner"


@pytest.mark.parametrize("provider", [FILESYSTEM_LOCK_PROVIDER, STORAGE_LOCK_PROVIDER])
def test_single_writer_holds_the_providers_lock_for_its_job(tmp_path, provider):
    opts = model_options({"hoodie.write.lock.provider": provider})
    path, opts, model = _seeded(tmp_path, opts)
    t = tmp_path / "t"
    refused: list[str] = []

    def second_writer() -> None:
        if provider == FILESYSTEM_LOCK_PROVIDER:
            assert lp.lock_info_owner((t / FS_LOCK).read_bytes())
        else:
            assert not json.loads((t / STORAGE_LOCK_PATH).read_bytes())["expired"]
        with pytest.raises(HoodieCommitConflictError, match="locked by") as e:
            HoodieWriteClient(path, opts).write(to_arrow([row("b1", "b", 8, 80)], True))
        refused.append(str(e.value))

    rows = [row("a1", "a", 7, 70)]
    with _during_commit(second_writer):
        HoodieWriteClient(path, opts).write(to_arrow(rows, True))
    assert refused
    model.upsert(rows)
    model.assert_hudi_rs_reads(path)
    if provider == FILESYSTEM_LOCK_PROVIDER:
        assert not (t / FS_LOCK).exists()
