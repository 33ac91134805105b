"""Lock providers compatible with Hudi's Java writers, and the factory that picks one.

``hoodie.write.lock.provider`` names the provider by Hudi's Java class name, so a Java writer
configured with the same provider and hoodie_ray exclude each other on one table:

* ``org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider``
  (:class:`FileSystemBasedLock`): the file ``lock`` in ``hoodie.write.lock.filesystem.path``
  (default: the table's ``.hoodie`` folder), created if absent, holding Java's ``LockInfo`` JSON
  (which Java never parses: any file there is a held lock). It expires
  ``hoodie.write.lock.filesystem.expire`` minutes after its modification time (0: never; then a
  dead holder's lock stays until someone deletes it). Java never renews it; hoodie_ray touches
  its own lock every heartbeat, so a job longer than the expiry keeps it. Only file systems
  with an atomic create-if-absent (local files here; Java: local and HDFS) may use it.
* ``org.apache.hudi.client.transaction.lock.StorageBasedLockProvider``
  (:class:`StorageBasedLock`, RFC-91): ``.hoodie/.locks/table_lock.json``, the JSON
  ``{"expired":false,"validUntil":<epoch ms>,"owner":"<id>"}``, written only by conditional
  writes: create if none exists (If-None-Match), replace only the version read (If-Match on
  its ETag). The holder renews ``validUntil`` every ``hoodie.write.lock.storage.heartbeat.poll.secs``
  to now + ``hoodie.write.lock.storage.validity.timeout.secs``; release writes
  ``"expired":true`` (the file stays). A lock is free when marked expired or when the reader's
  clock is past ``validUntil`` by more than 500 ms (Java's clock-drift allowance). Backends:
  S3 (conditional PutObject, through boto3, as Java's S3StorageLockClient) and local files (a
  compare-and-swap under ``flock`` on the lock folder: hoodie_ray processes only, Java's
  provider has no local implementation).

hoodie_ray's own :class:`~hoodie_ray.write.lock.WriterLock` stays the default.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlparse

from hoodie_ray.config.options import (
    FILESYSTEM_LOCK_PROVIDER,
    STORAGE_LOCK_PROVIDER,
    WriteConfig,
)
from hoodie_ray.exceptions import (
    HoodieCommitConflictError,
    HoodieIOError,
    HoodieOptionError,
    HoodiePathError,
)
from hoodie_ray.storage import ArrowStorage, LocalStorage, Storage, open_storage
from hoodie_ray.write.lock import ProcessId, TableLock, WriterLock, new_owner_id

FS_LOCK_FILE = "lock"
FS_LOCK_DEFAULT_FOLDER = ".hoodie"
STORAGE_LOCK_PATH = ".hoodie/.locks/table_lock.json"
CLOCK_DRIFT_MS = 500  # Java's CLOCK_DRIFT_BUFFER_MS
_THREAD_PREFIX = "hoodie-ray:"  # our owner id, in LockInfo's lockThreadName
_MAX_LOCK_BYTES = 64 * 1024


def _provider_error(provider: str, storage: Storage, why: str) -> HoodieOptionError:
    return HoodieOptionError(
        f"option hoodie.write.lock.provider={provider}: {why} (storage {storage.base_uri})"
    )


# -- FileSystemBasedLockProvider -------------------------------------------------------------------


def lock_info_json(owner: str, now: float | None = None) -> bytes:
    """Java's ``LockInfo`` as Jackson's default pretty printer writes it (2-space indent,
    ``" : "`` between name and value, arrays on one line), the owner id in the thread name."""
    t = time.time() if now is None else now
    created = datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    stack = "hoodie_ray.write.lock_providers.FileSystemBasedLock.acquire (lock_providers.py:0)"
    return (
        "{\n"
        f'  "lockCreateTime" : {json.dumps(created)},\n'
        f'  "lockThreadName" : {json.dumps(_THREAD_PREFIX + owner)},\n'
        f'  "lockStacksInfo" : [ {json.dumps(stack)} ]\n'
        "}"
    ).encode()


def lock_info_owner(raw: bytes) -> str | None:
    """The hoodie_ray owner id in a LockInfo file; None for Java's (or any other) content."""
    try:
        info = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    name = info.get("lockThreadName") if isinstance(info, dict) else None
    if isinstance(name, str) and name.startswith(_THREAD_PREFIX):
        return name[len(_THREAD_PREFIX) :]
    return None


class FileSystemBasedLock(TableLock):
    """Hudi's ``FileSystemBasedLockProvider`` protocol on a local file system."""

    def __init__(
        self,
        storage: Storage,
        *,
        lock_storage: Storage | None = None,
        lock_path: str = f"{FS_LOCK_DEFAULT_FOLDER}/{FS_LOCK_FILE}",
        expire_s: float = 0.0,
        heartbeat_s: float = 10.0,
        owner: str | None = None,
    ) -> None:
        self.storage = storage  # the table's (idle holders are per table)
        self.lock_storage = lock_storage or storage
        if not isinstance(self.lock_storage, LocalStorage):
            raise _provider_error(
                FILESYSTEM_LOCK_PROVIDER,
                self.lock_storage,
                "this storage cannot create a file atomically if absent (Hudi's Java refuses "
                "its scheme too); use org.apache.hudi.client.transaction.lock."
                "StorageBasedLockProvider on object stores",
            )
        self.lock_path = lock_path
        self.expire_s = expire_s
        # touch our lock well within the expiry (none needed when it never expires)
        self.heartbeat_s = min(heartbeat_s, expire_s / 4) if expire_s > 0 else 0.0
        self.owner = owner or new_owner_id()
        self._init_thread()

    @property
    def where(self) -> str:
        return self.lock_storage.uri(self.lock_path)

    def _stat(self) -> os.stat_result | None:
        assert isinstance(self.lock_storage, LocalStorage)
        try:
            return os.stat(self.lock_storage.local_path(self.lock_path))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise HoodieIOError(f"cannot stat the lock {self.where}: {e.strerror}") from e

    def _content(self) -> bytes | None:
        """The lock file's bytes (its first 64 KiB); None when it is missing."""
        try:
            with self.lock_storage.open_input(self.lock_path) as f:
                return bytes(f.read(_MAX_LOCK_BYTES))
        except HoodiePathError:
            return b""  # not a regular file: held by no one we know, expiring by its time
        except HoodieIOError:
            if self._stat() is None:
                return None
            raise

    def _expired(self, st: os.stat_result) -> bool:
        return self.expire_s > 0 and time.time() - st.st_mtime > self.expire_s

    def _take(self) -> None:
        for _ in range(3):
            st = self._stat()
            if st is not None:
                raw = self._content()
                if raw is None:
                    continue  # released meanwhile: try to create it
                holder = lock_info_owner(raw)
                if holder == self.owner:
                    return  # our job's lock (a restarted coordinator)
                if not self._expired(st):
                    age = time.time() - st.st_mtime
                    raise HoodieCommitConflictError(
                        f"table {self.storage.base_uri} is locked by "
                        f"{holder or 'a Java writer'} ({self.where}, written {age:.0f}s ago; "
                        "hoodie.write.lock.filesystem.expire="
                        f"{self.expire_s / 60:g} minutes)"
                    )
                # expired, as Java deletes it; only if it is still the file we judged
                again = self._stat()
                if again is not None and (again.st_ino, again.st_mtime_ns) == (
                    st.st_ino,
                    st.st_mtime_ns,
                ):
                    self.lock_storage.delete(self.lock_path)
            if self.lock_storage.create_new(self.lock_path, lock_info_json(self.owner)):
                return
        raise HoodieCommitConflictError(
            f"could not take the lock {self.where} of {self.storage.base_uri}: another writer "
            "took it concurrently"
        )

    def _ours(self) -> bool:
        raw = self._content()
        return raw is not None and lock_info_owner(raw) == self.owner

    def renew(self) -> bool:
        if not self._ours():
            return False
        assert isinstance(self.lock_storage, LocalStorage)
        now = time.time()
        os.utime(self.lock_storage.local_path(self.lock_path), (now, now))  # Java expires by it
        return True

    def check(self) -> None:
        if not self.held or not self._ours():
            self.held = False
            raise HoodieCommitConflictError(f"lost the lock {self.where}")

    def _drop(self) -> None:
        if self._ours():
            self.lock_storage.delete(self.lock_path)

    def release_owned(self) -> bool:
        if not self._ours():
            return False
        self.lock_storage.delete(self.lock_path)
        self.held = False
        return True


# -- StorageBasedLockProvider ---------------------------------------------------------------------


@dataclass(frozen=True)
class LockData:
    """``StorageLockData``: the content of ``table_lock.json``."""

    expired: bool
    valid_until_ms: int
    owner: str

    def to_json(self) -> bytes:
        """As Jackson writes it (creator properties in order, no spaces)."""
        return json.dumps(
            {"expired": self.expired, "validUntil": self.valid_until_ms, "owner": self.owner},
            separators=(",", ":"),
        ).encode()

    @staticmethod
    def parse(raw: bytes) -> LockData | None:
        """None for content Java could not read either (missing or null fields)."""
        try:
            d = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(d, dict):
            return None
        expired, until, owner = d.get("expired"), d.get("validUntil"), d.get("owner")
        if not isinstance(expired, bool) or isinstance(until, bool):
            return None
        if not isinstance(until, int) or not isinstance(owner, str):
            return None
        return LockData(expired, until, owner)


class ConditionalStore:
    """One object written only by conditional writes. ``put`` with ``expected=None`` creates it
    if absent (If-None-Match: *); otherwise it replaces only version ``expected`` (If-Match).
    It returns the new version, or None when the precondition failed; other failures raise
    :class:`HoodieIOError`."""

    where: str

    def read(self) -> tuple[bytes, str] | None:
        raise NotImplementedError

    def put(self, data: bytes, expected: str | None) -> str | None:
        raise NotImplementedError


class LocalConditionalStore(ConditionalStore):
    """Conditional writes of one local file. Every read-compare-write holds an exclusive
    ``flock`` on the file's folder (the same open-file lock for every process of this host, and
    for threads of one process through their own descriptors); the file is replaced by a
    rename, so a reader never sees half of it. Its version is inode and modification time in
    nanoseconds: a rename always brings a new inode while the old one is still linked."""

    def __init__(self, storage: LocalStorage, rel: str) -> None:
        self.storage = storage
        self.rel = rel
        self.where = storage.uri(rel)
        self.path = storage.local_path(rel)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        import fcntl

        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # drops the flock

    def _version(self) -> str | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return f"{st.st_ino}-{st.st_mtime_ns}"

    def read(self) -> tuple[bytes, str] | None:
        with self._guard():
            version = self._version()
            if version is None:
                return None
            return self.storage.read_bytes(self.rel)[:_MAX_LOCK_BYTES], version

    def put(self, data: bytes, expected: str | None) -> str | None:
        with self._guard():
            if self._version() != expected:
                return None
            if expected is None:
                if not self.storage.create_new(self.rel, data):
                    return None
            else:
                self.storage.write_atomic(self.rel, data)
            return self._version()


class S3ConditionalStore(ConditionalStore):
    """Conditional PutObject on S3 (If-None-Match / If-Match on the ETag), as Java's
    ``S3StorageLockClient``; 412 is a failed precondition."""

    def __init__(self, storage: ArrowStorage, rel: str) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise _provider_error(
                STORAGE_LOCK_PROVIDER, storage, "conditional writes to S3 need boto3 installed"
            ) from None
        parsed = urlparse(storage.uri(rel))
        self.bucket, self.key = parsed.netloc, parsed.path.lstrip("/")
        self.where = storage.uri(rel)
        opts: Mapping[str, Any] = storage.storage_options
        kwargs: dict[str, Any] = {}
        if opts.get("access_key"):
            kwargs["aws_access_key_id"] = opts["access_key"]
            kwargs["aws_secret_access_key"] = opts.get("secret_key")
            kwargs["aws_session_token"] = opts.get("session_token")
        if opts.get("region"):
            kwargs["region_name"] = opts["region"]
        endpoint = opts.get("endpoint_override")
        if endpoint:
            if "://" not in str(endpoint):
                endpoint = f"{opts.get('scheme', 'https')}://{endpoint}"
            kwargs["endpoint_url"] = endpoint
        self._client = boto3.client(
            "s3", config=Config(retries={"max_attempts": 2}, connect_timeout=10), **kwargs
        )

    def _status(self, e: Exception) -> int:
        return int(getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0))

    def read(self) -> tuple[bytes, str] | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            r = self._client.get_object(Bucket=self.bucket, Key=self.key)
            return bytes(r["Body"].read(_MAX_LOCK_BYTES)), str(r["ETag"])
        except ClientError as e:
            if self._status(e) == 404:
                return None
            raise HoodieIOError(f"cannot read the lock {self.where}: {e}") from None
        except BotoCoreError as e:
            raise HoodieIOError(f"cannot read the lock {self.where}: {e}") from None

    def put(self, data: bytes, expected: str | None) -> str | None:
        from botocore.exceptions import BotoCoreError, ClientError

        cond = {"IfNoneMatch": "*"} if expected is None else {"IfMatch": expected}
        try:
            r = self._client.put_object(Bucket=self.bucket, Key=self.key, Body=data, **cond)
            return str(r["ETag"])
        except ClientError as e:
            if self._status(e) == 412:
                return None
            raise HoodieIOError(f"cannot write the lock {self.where}: {e}") from None
        except BotoCoreError as e:
            raise HoodieIOError(f"cannot write the lock {self.where}: {e}") from None


def conditional_store(storage: Storage, rel: str = STORAGE_LOCK_PATH) -> ConditionalStore:
    """The conditional-write backend of ``storage``; :class:`HoodieOptionError` naming the
    option and the storage where there is none."""
    if isinstance(storage, LocalStorage):
        try:
            import fcntl  # noqa: F401
        except ImportError:
            raise _provider_error(
                STORAGE_LOCK_PROVIDER, storage, "local conditional writes need POSIX flock"
            ) from None
        return LocalConditionalStore(storage, rel)
    if isinstance(storage, ArrowStorage) and urlparse(storage.base_uri).scheme in ("s3", "s3a"):
        return S3ConditionalStore(storage, rel)
    raise _provider_error(
        STORAGE_LOCK_PROVIDER,
        storage,
        "hoodie_ray has no conditional writes (If-None-Match / If-Match) for this storage "
        "(local files and s3:// have them)",
    )


class StorageBasedLock(TableLock):
    """Hudi's ``StorageBasedLockProvider`` (RFC-91) over a :class:`ConditionalStore`."""

    def __init__(
        self,
        storage: Storage,
        *,
        store: ConditionalStore | None = None,
        validity_s: float = 300.0,
        heartbeat_s: float = 30.0,
        owner: str | None = None,
    ) -> None:
        self.storage = storage
        self.store = store or conditional_store(storage)
        self.validity_s = validity_s
        self.heartbeat_s = heartbeat_s
        self.owner = owner or new_owner_id()
        self._mutex = threading.Lock()  # renewals (heartbeat thread) vs check / release
        self._version: str | None = None
        self._data: LockData | None = None
        self._init_thread()

    def _new_data(self, expired: bool = False) -> LockData:
        if expired and self._data is not None:
            return LockData(True, self._data.valid_until_ms, self.owner)
        return LockData(expired, int(time.time() * 1000 + self.validity_s * 1000), self.owner)

    @staticmethod
    def live(data: LockData | None) -> bool:
        """Whether a lock still holds: not marked expired, and our clock not certainly past
        its ``validUntil`` (beyond the clock-drift allowance)."""
        if data is None or data.expired:
            return False
        return time.time() * 1000 <= data.valid_until_ms + CLOCK_DRIFT_MS

    def _read(self) -> tuple[LockData | None, str] | None:
        cur = self.store.read()
        if cur is None:
            return None
        raw, version = cur
        return LockData.parse(raw), version

    def _take(self) -> None:
        cur = self._read()
        expected: str | None = None
        if cur is not None:
            data, expected = cur
            if data is None:
                raise HoodieCommitConflictError(
                    f"table {self.storage.base_uri}: the lock {self.store.where} is not a lock "
                    "Hudi's StorageBasedLockProvider wrote; remove it if no writer runs"
                )
            if self.live(data) and data.owner != self.owner:
                left = data.valid_until_ms / 1000 - time.time()
                raise HoodieCommitConflictError(
                    f"table {self.storage.base_uri} is locked by {data.owner} "
                    f"({self.store.where}, valid for {left:.0f}s more)"
                )
        new = self._new_data()
        with self._mutex:
            version = self.store.put(new.to_json(), expected)
            if version is None:
                raise HoodieCommitConflictError(
                    f"table {self.storage.base_uri}: another writer took the lock "
                    f"{self.store.where} concurrently"
                )
            self._version, self._data = version, new

    def renew(self) -> bool:
        with self._mutex:
            if self._version is None:
                return False
            new = self._new_data()
            version = self.store.put(new.to_json(), self._version)
            if version is None:  # replaced by another writer: no longer ours
                self._version = self._data = None
                return False
            self._version, self._data = version, new
            return True

    def check(self) -> None:
        with self._mutex:
            ok = self.held and self._version is not None and self.live(self._data)
            if ok:
                cur = self._read()
                ok = cur is not None and cur[1] == self._version
            if not ok:
                self.held = False
                raise HoodieCommitConflictError(f"lost the lock {self.store.where}")

    def _drop(self) -> None:
        with self._mutex:
            if self._version is not None:
                # Java's unlock: our lock marked expired, only if it is still the version we wrote
                self.store.put(self._new_data(expired=True).to_json(), self._version)
            self._version = self._data = None

    def release_owned(self) -> bool:
        cur = self._read()
        if cur is None:
            return False
        data, version = cur
        if data is None or data.owner != self.owner or data.expired:
            return False
        done = self.store.put(LockData(True, data.valid_until_ms, data.owner).to_json(), version)
        self.held = False
        return done is not None


# -- the factory ----------------------------------------------------------------------------------


def open_lock(
    storage: Storage,
    wc: WriteConfig | None = None,
    owner: str | None = None,
    job: ProcessId | None = None,
) -> TableLock:
    """The table lock ``hoodie.write.lock.provider`` names, configured from ``wc``; ``owner``
    the job's id, ``job`` its driver process (hoodie_ray's own lock records both, so that the
    next writer can tell a dead holder at once).

    Raises:
        HoodieOptionError: the provider cannot run on this storage (naming option and storage).
    """
    wc = wc or WriteConfig()
    if wc.lock_provider == FILESYSTEM_LOCK_PROVIDER:
        if wc.lock_filesystem_path:
            lock_storage = open_storage(wc.lock_filesystem_path)
            rel = FS_LOCK_FILE
        else:
            lock_storage, rel = storage, f"{FS_LOCK_DEFAULT_FOLDER}/{FS_LOCK_FILE}"
        return FileSystemBasedLock(
            storage,
            lock_storage=lock_storage,
            lock_path=rel,
            expire_s=wc.lock_filesystem_expire_min * 60.0,
            heartbeat_s=wc.lock_heartbeat_ms / 1000.0,
            owner=owner,
        )
    if wc.lock_provider == STORAGE_LOCK_PROVIDER:
        return StorageBasedLock(
            storage,
            validity_s=float(wc.lock_storage_validity_s),
            heartbeat_s=float(wc.lock_storage_heartbeat_s),
            owner=owner,
        )
    return WriterLock(
        storage,
        heartbeat_ms=wc.lock_heartbeat_ms,
        expire_ms=wc.lock_expire_ms,
        owner=owner,
        job=job,
    )
