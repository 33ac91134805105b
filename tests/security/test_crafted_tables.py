"""Crafted tables: names in a table's metadata never reach outside it, class names never run code.

Each test builds two real tables side by side, ``parent/table`` (the shared table an attacker
can write) and ``parent/victim`` (another table: what the attacker wants read or deleted), then
plants hostile metadata in ``table`` -- write stats, rollback plans, markers, compaction plans,
symbolic links, class names -- and runs every operation a user would run on it: snapshot,
read-optimized, incremental and time-travel reads, file slices, an upsert (index bootstrap,
pending rollbacks), compaction, cleaning, ``hr.rollback``.

Each operation either succeeds without a single victim row, or fails with a HoodieError; any
other exception fails the test. Afterwards the victim's files are byte-identical, no Python-level
file-system call reached the victim's directory (audit hook), nothing appeared outside the table
and the victim table still reads back.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.api import compact
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.exceptions import HoodieError, HoodiePathError, HoodieUnsupportedError
from hoodie_ray.job.maintenance import clean
from hoodie_ray.storage import LocalStorage
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import new_instant_time
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.timeline.plans import (
    HoodieCompactionOperation,
    HoodieCompactionPlan,
    HoodieRollbackMetadata,
    HoodieRollbackPlan,
    HoodieRollbackRequest,
)
from tests.security import CodeAudit, FileAudit, rows, tree, write


@dataclass
class Scene:
    parent: Path
    base: Path  # the shared table, where hostile metadata is planted
    victim: Path  # a table next to it
    victim_base: Path  # the victim's base file (absolute)
    victim_log: Path  # the victim's log file (absolute)
    victim_file_id: str
    schema: str  # the shared table's Avro schema (extraMetadata.schema)
    expected: dict[str, float]  # id -> v of the shared table before the attack

    @property
    def hoodie(self) -> Path:
        return self.base / ".hoodie"

    def last_instant(self) -> str:
        return max(f.name[:17] for f in self.hoodie.iterdir() if f.name[:1].isdigit())

    def new_instant(self) -> str:
        return new_instant_time(self.last_instant())


def make_scene(tmp_path: Path) -> Scene:
    parent = tmp_path / "parent"
    base, victim = parent / "table", parent / "victim"
    write(victim, rows(["VICTIM"], ["a"], v=-1.0))
    write(victim, rows(["VICTIM"], ["a"], ts=2, v=-2.0))
    write(base, rows(["k1", "k2", "k3"], ["a", "a", "b"]))
    write(base, rows(["k1", "k3"], ["a", "b"], ts=2, v=10.0))
    names = os.listdir(victim / "a")
    vbase = next(n for n in names if n.endswith(".parquet"))
    vlog = next(n for n in names if ".log." in n)
    last = max(f.name for f in (base / ".hoodie").iterdir() if f.name.endswith(".deltacommit"))
    meta = HoodieCommitMetadata.from_bytes((base / ".hoodie" / last).read_bytes())
    got = hr.read(str(base))
    return Scene(
        parent=parent,
        base=base,
        victim=victim,
        victim_base=victim / "a" / vbase,
        victim_log=victim / "a" / vlog,
        victim_file_id=vbase.split("_")[0],
        schema=meta.extra_metadata["schema"],
        expected=dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)),
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    return make_scene(tmp_path_factory.mktemp("template"))


@pytest.fixture
def scene(template: Scene, tmp_path: Path) -> Scene:
    """A fresh copy of the template tables (copying is much faster than writing)."""
    parent = tmp_path / "parent"
    shutil.copytree(template.parent, parent, symlinks=True)

    def moved(p: Path) -> Path:
        return parent / p.relative_to(template.parent)

    return dataclasses.replace(
        template,
        parent=parent,
        base=moved(template.base),
        victim=moved(template.victim),
        victim_base=moved(template.victim_base),
        victim_log=moved(template.victim_log),
    )


def operations(sc: Scene) -> dict[str, Callable[[], Any]]:
    p = str(sc.base)
    return {
        "snapshot": lambda: hr.read(p),
        "read_optimized": lambda: hr.read(p, query_type="read_optimized"),
        "incremental": lambda: hr.read(p, query_type="incremental"),
        "time_travel": lambda: hr.read(p, as_of=sc.last_instant()),
        "file_slices": lambda: HoodieTable.load(p).latest_file_slices(),
        "upsert": lambda: write(sc.base, rows(["k1", "k9"], ["a", "c"], ts=9, v=90.0)),
        "compact": lambda: compact(p),
        "clean": lambda: clean(p, {"clean.retain_commits": "1"}),
    }


def attack(sc: Scene, ops: dict[str, Callable[[], Any]] | None = None) -> dict[str, Any]:
    """Run the operations; each returns its result or raises a HoodieError (kept as outcome)."""
    victim_before = tree(sc.victim)
    outside_before = tree(sc.parent, skip=sc.base)
    outcomes: dict[str, Any] = {}
    with FileAudit(sc.victim) as audit:
        for name, fn in (ops or operations(sc)).items():
            try:
                result = fn()
            except HoodieError as e:
                outcomes[name] = e
                continue
            outcomes[name] = result
            if isinstance(result, pa.Table):
                assert "VICTIM" not in result.column("id").to_pylist(), name
                assert -1.0 not in result.column("v").to_pylist(), name
    assert audit.hits == [], audit.hits
    assert tree(sc.victim) == victim_before
    assert tree(sc.parent, skip=sc.base) == outside_before
    assert hr.read(str(sc.victim)).column("id").to_pylist() == ["VICTIM"]
    return outcomes


def add_instant(sc: Scene, action: str, content: bytes, state: str = "completed") -> str:
    """Plant an instant (requested, inflight, then completed unless ``state`` says otherwise)."""
    t = sc.new_instant()
    (sc.hoodie / f"{t}.{action}.requested").write_bytes(content if action != "deltacommit" else b"")
    if state in ("inflight", "completed"):
        (sc.hoodie / f"{t}.{action}.inflight").write_bytes(b"")
    if state == "completed":
        (sc.hoodie / f"{t}.{action}").write_bytes(content)
    return t


def add_commit(sc: Scene, stats: dict[str, list[HoodieWriteStat]], schema: bool = True) -> str:
    meta = HoodieCommitMetadata(
        partition_to_write_stats=stats,
        extra_metadata={"schema": sc.schema} if schema else {},
        operation_type="UPSERT",
    )
    return add_instant(sc, "deltacommit", meta.to_json())


# -- write stats ---------------------------------------------------------------------------------


STAT_VARIANTS = ["relative", "deep", "absolute", "uri", "partition", "delta", "symlink"]


def hostile_stats(sc: Scene, variant: str) -> dict[str, list[HoodieWriteStat]]:
    fid = sc.victim_file_id
    vb, vl = sc.victim_base.name, sc.victim_log.name

    def stat(part: str, path: str, **kw: Any) -> HoodieWriteStat:
        return HoodieWriteStat(
            file_id=fid, path=path, partition_path=part, prev_commit="null", num_writes=1, **kw
        )

    if variant == "relative":
        return {"a": [stat("a", f"../victim/a/{vb}")]}
    if variant == "deep":
        return {"a": [stat("a", f"a/../../victim/a/{vb}")]}
    if variant == "absolute":
        return {"a": [stat("a", str(sc.victim_base))]}
    if variant == "uri":
        return {"a": [stat("a", sc.victim_base.as_uri())]}
    if variant == "partition":
        return {"../victim/a": [stat("../victim/a", f"../victim/a/{vb}")]}
    if variant == "delta":
        return {
            "a": [
                stat(
                    "a",
                    f"../../victim/a/{vl}",
                    base_file=f"../../victim/a/{vb}",
                    log_files=[f"../../victim/a/{vl}"],
                    log_version=1,
                )
            ]
        }
    assert variant == "symlink"
    (sc.base / "evil").symlink_to(sc.victim / "a", target_is_directory=True)
    return {"evil": [stat("evil", f"evil/{vb}", base_file=vb, log_files=[vl], log_version=1)]}


@pytest.mark.parametrize("variant", STAT_VARIANTS)
def test_write_stats_pointing_outside(scene: Scene, variant: str) -> None:
    add_commit(scene, hostile_stats(scene, variant))
    outcomes = attack(scene)
    # the listing-based snapshot does not depend on write stats: it still reads the table
    snap = outcomes["snapshot"]
    assert isinstance(snap, pa.Table), snap
    assert dict(zip(snap.column("id").to_pylist(), snap.column("v").to_pylist(), strict=True)) == (
        scene.expected
    )
    # the incremental read follows write stats: refused, not redirected
    inc = outcomes["incremental"]
    assert isinstance(inc, HoodieError) or "VICTIM" not in inc.column("id").to_pylist()


@pytest.mark.parametrize("variant", ["relative", "absolute", "symlink"])
def test_write_stats_used_for_the_schema(scene: Scene, variant: str) -> None:
    """Without extraMetadata.schema the reader opens base files named by write stats."""
    add_commit(scene, hostile_stats(scene, variant), schema=False)
    attack(scene, {k: v for k, v in operations(scene).items() if k in ("snapshot", "upsert")})


# -- rollback ------------------------------------------------------------------------------------


def test_rollback_plan_and_metadata_deleting_outside(scene: Scene) -> None:
    target = scene.last_instant()
    plan = HoodieRollbackPlan(
        instant_to_rollback=target,
        action="deltacommit",
        requests=[
            HoodieRollbackRequest(
                "a", files_to_delete=[f"../../victim/a/{scene.victim_base.name}"]
            ),
            HoodieRollbackRequest("a", files_to_delete=[str(scene.victim_log)]),
            HoodieRollbackRequest("../victim/a", files_to_delete=[scene.victim_base.name]),
            HoodieRollbackRequest(
                "a", log_blocks_to_delete={f"../../victim/a/{scene.victim_log.name}": 10}
            ),
        ],
    )
    pending = add_instant(scene, "rollback", plan.to_bytes(), state="inflight")
    done = HoodieRollbackMetadata(
        start_rollback_time=scene.new_instant(),
        commits_rollback=[target],
        partition_deleted_files={"../victim/a": [scene.victim_base.name]},
        instants_rollback=[(target, "deltacommit")],
    )
    add_instant(scene, "rollback", done.to_bytes())

    # parsing: an escaping partition is refused; full paths are reduced to a name in the table
    with pytest.raises(HoodiePathError):
        HoodieRollbackPlan.from_bytes(plan.to_bytes())
    safe = HoodieRollbackPlan(target, "deltacommit", plan.requests[:2])
    storage = LocalStorage(str(scene.base))
    for req in HoodieRollbackPlan.from_bytes(safe.to_bytes()).requests:
        for name in req.file_names():
            resolved = Path(storage.local_path(f"{req.partition_path}/{name}")).resolve()
            assert scene.base.resolve() in resolved.parents

    ops = operations(scene)
    ops["rollback_pending"] = lambda: hr.rollback(str(scene.base), pending)
    attack(scene, ops)


def _plant_pending_write(sc: Scene, markers: list[str]) -> str:
    t = add_instant(sc, "deltacommit", b"", state="inflight")
    for m in markers:
        path = sc.hoodie / ".temp" / t / m
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    return t


def test_markers_through_symbolic_links(scene: Scene) -> None:
    """Rollback deletes what markers name: a symlinked directory or file is refused."""
    (scene.base / "evil").symlink_to(scene.victim / "a", target_is_directory=True)
    (scene.base / "a" / scene.victim_log.name).symlink_to(scene.victim_log)
    t = _plant_pending_write(
        scene,
        [
            f"evil/{scene.victim_base.name}.marker.CREATE",
            f"a/{scene.victim_log.name}.marker.APPEND",
        ],
    )
    ops = {
        "rollback": lambda: hr.rollback(str(scene.base), t),
        "upsert": operations(scene)["upsert"],  # rolls back pending writes first
        "snapshot": operations(scene)["snapshot"],
    }
    outcomes = attack(scene, ops)
    assert isinstance(outcomes["rollback"], HoodiePathError), outcomes["rollback"]
    assert isinstance(outcomes["upsert"], HoodiePathError), outcomes["upsert"]


def test_symlinked_partition_is_not_read(scene: Scene) -> None:
    (scene.base / "evil").symlink_to(scene.victim / "a", target_is_directory=True)
    (scene.base / "b" / scene.victim_base.name).symlink_to(scene.victim_base)
    outcomes = attack(scene)
    snap = outcomes["snapshot"]
    assert isinstance(snap, pa.Table) and set(snap.column("id").to_pylist()) == set(scene.expected)


# -- compaction plans ----------------------------------------------------------------------------


def _op(sc: Scene, **kw: Any) -> HoodieCompactionOperation:
    args: dict[str, Any] = {
        "base_instant_time": sc.last_instant(),
        "delta_file_paths": [sc.victim_log.name],
        "data_file_path": sc.victim_base.name,
        "file_id": sc.victim_file_id,
        "partition_path": "a",
    }
    args.update(kw)
    return HoodieCompactionOperation(**args)


@pytest.mark.parametrize(
    "variant", ["partition", "data_file", "delta_file", "absolute_v1", "file_id"]
)
def test_compaction_plan_pointing_outside(scene: Scene, variant: str) -> None:
    vb, vl = scene.victim_base.name, scene.victim_log.name
    op = {
        "partition": lambda: _op(scene, partition_path="../victim/a"),
        "data_file": lambda: _op(scene, data_file_path=f"../../victim/a/{vb}"),
        "delta_file": lambda: _op(scene, delta_file_paths=[f"../../victim/a/{vl}"]),
        "absolute_v1": lambda: _op(
            scene, data_file_path=str(scene.victim_base), delta_file_paths=[str(scene.victim_log)]
        ),
        "file_id": lambda: _op(scene, file_id="../../victim"),
    }[variant]()
    plan = HoodieCompactionPlan([op], version=1 if variant == "absolute_v1" else 2)
    add_instant(scene, "compaction", plan.to_bytes(), state="requested")
    outcomes = attack(scene)
    if variant != "absolute_v1":  # version-1 full paths become names inside the table
        assert isinstance(outcomes["compact"], HoodiePathError), outcomes["compact"]


# -- class names never run code ------------------------------------------------------------------

EVIL = "hoodie_ray_evil_mod"

CLASS_PROPS = [
    {"hoodie.compaction.payload.class": f"{EVIL}.Payload"},
    {"hoodie.datasource.write.payload.class": f"{EVIL}.Payload"},
    {"hoodie.compaction.payload.class": "builtins.eval"},
    {"hoodie.compaction.payload.class": "com.attacker.hudi.RemoteCodePayload"},
    {"hoodie.table.keygenerator.class": f"{EVIL}.KeyGenerator"},
    {"hoodie.table.keygenerator.type": f"{EVIL}.KeyGenerator"},
    {
        "hoodie.compaction.record.merger.strategy": "1897ef5f-18bc-4557-939c-9d6a8afd1519",
        "hoodie.datasource.write.record.merger.impls": f"{EVIL}.Merger",
        "hoodie.record.merge.impl.classes": f"{EVIL}.Merger",
    },
    {"hoodie.bootstrap.index.class": f"{EVIL}.Index", "hoodie.table.base.file.format": "PARQUET"},
]


@pytest.fixture
def evil_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable module that leaves a marker file when anything imports it."""
    pkg = tmp_path / "importable"
    pkg.mkdir()
    marker = tmp_path / "IMPORTED"
    (pkg / f"{EVIL}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "class Payload: pass\nclass KeyGenerator: pass\nclass Merger: pass\nclass Index: pass\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    return marker


def _set_props(base: Path, **props: str) -> None:
    storage = LocalStorage(str(base))
    cfg = HoodieTableConfig.load(storage)
    cfg.with_props(**props).save(storage)


@pytest.mark.parametrize("props", CLASS_PROPS, ids=lambda p: next(iter(p)).rsplit(".", 2)[-2])
def test_class_names_in_table_config_never_run(
    scene: Scene, evil_module: Path, props: dict[str, str]
) -> None:
    _set_props(scene.base, **props)
    with CodeAudit(EVIL) as code:
        outcomes = attack(scene)
    assert code.hits == [], code.hits
    assert not evil_module.exists() and EVIL not in sys.modules
    # the table's payload class decides the merge: an unknown one is refused by name, never
    # loaded (hoodie.datasource.write.payload.class yields to it, as in Java)
    payload = props.get("hoodie.compaction.payload.class")
    if payload:
        assert isinstance(outcomes["snapshot"], HoodieUnsupportedError), outcomes["snapshot"]
        assert payload in str(outcomes["snapshot"])


def test_v8_custom_merge_mode_never_runs(tmp_path: Path, evil_module: Path) -> None:
    base = tmp_path / "parent" / "table"
    write(base, rows(["k1"], ["a"]), **{"hoodie.write.table.version": "8"})
    _set_props(
        base,
        **{
            "hoodie.record.merge.mode": "CUSTOM",
            "hoodie.record.merge.strategy.id": "1897ef5f-18bc-4557-939c-9d6a8afd1519",
            "hoodie.record.merge.impl.classes": f"{EVIL}.Merger",
            "hoodie.compaction.payload.class": f"{EVIL}.Payload",
        },
    )
    with CodeAudit(EVIL) as code:
        with pytest.raises(HoodieUnsupportedError, match="CUSTOM"):
            hr.read(str(base))
        with pytest.raises(HoodieError):
            write(base, rows(["k2"], ["a"]), **{"hoodie.write.table.version": "8"})
    assert code.hits == [] and not evil_module.exists()


def test_schema_with_java_class_properties_never_runs(scene: Scene, evil_module: Path) -> None:
    """Avro ``java-class`` / custom logical types in a commit's schema are inert strings."""
    import json

    schema = json.loads(scene.schema)
    schema["java-class"] = f"{EVIL}.Record"
    for f in schema["fields"]:
        f["java-class"] = f"{EVIL}.Field"
    schema["fields"][0]["type"] = [
        "null",
        {"type": "string", "logicalType": f"{EVIL}.Logical", "avro.java.string": "String"},
    ]
    meta = HoodieCommitMetadata(
        partition_to_write_stats={},
        extra_metadata={"schema": json.dumps(schema)},
        operation_type="UPSERT",
    )
    add_instant(scene, "deltacommit", meta.to_json())
    with CodeAudit(EVIL) as code:
        attack(scene)
    assert code.hits == [] and not evil_module.exists()


@pytest.mark.parametrize("timeline_path", ["../../outside", "/abs/outside", "..", "a/../../.."])
def test_v8_timeline_path_outside_the_table(tmp_path: Path, timeline_path: str) -> None:
    """``hoodie.timeline.path`` is table content too: it may not lead out of ``.hoodie``.

    The reader honours the property (and refuses this one); the writer and ``HoodieTable``
    use the standard ``.hoodie/timeline``: either way nothing outside is listed or read.
    """
    parent = tmp_path / "parent"
    base = parent / "table"
    write(base, rows(["k1"], ["a"]), **{"hoodie.write.table.version": "8"})
    outside = parent / "outside"
    outside.mkdir()
    (outside / "20200101000000000_20200101000000001.deltacommit").write_bytes(b"{}")
    _set_props(base, **{"hoodie.timeline.path": timeline_path})
    before = tree(parent, skip=base)
    with FileAudit(outside, tmp_path / "abs") as audit:
        for fn in (
            lambda: hr.read(str(base)),
            lambda: HoodieTable.load(str(base)),
            lambda: write(base, rows(["k2"], ["a"]), **{"hoodie.write.table.version": "8"}),
        ):
            try:
                fn()
            except HoodiePathError:
                pass
        if ".." in timeline_path:  # '/abs/outside' is joined as .hoodie/abs/outside: inside
            with pytest.raises(HoodiePathError):
                hr.read(str(base))
    assert audit.hits == [] and tree(parent, skip=base) == before


def test_library_never_turns_ray_security_off() -> None:
    """No hoodie_ray module disables Ray's token authentication or binds Ray to all interfaces."""
    import hoodie_ray

    root = Path(hoodie_ray.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "0.0.0.0" not in text, path
        assert not re.search(r"RAY_AUTH_MODE[\"']?\s*[\]:=,]\s*[\"']?(disabled|off|none)", text), (
            path
        )
        assert 'os.environ["RAY_AUTH_MODE"]' not in text, path
