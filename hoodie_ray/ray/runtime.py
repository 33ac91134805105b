"""Ray runtime plumbing: starting or joining Ray, and sizing the actors of a write topology.

* :func:`ensure_ray` starts an embedded local Ray (or joins ``address`` / ``RAY_ADDRESS``) in the
  ``hoodie_ray`` namespace, with the JVM flags RayDP needs on Java 17 (:data:`JVM_OPTIONS`).
  Ray's token authentication (on by default for a local Ray started by ``ray.init`` in Ray
  2.60) is left as Ray sets it; hoodie_ray never sets ``RAY_AUTH_MODE``.
* :func:`plan_resources` / :func:`actor_resources` size the coordinator, bucket-assigner, writer
  and compactor actors from what the cluster has, and :func:`check_placeable` /
  :func:`wait_ready` turn "Ray queues the actor forever" into a :class:`HoodieError`.

Sizing (see :func:`plan_resources`): each role has a natural CPU size (coordinator 0.5, others
1). When the cluster's available CPUs, minus one whole CPU kept free for Ray tasks, hold the
whole topology, actors get their natural size; otherwise every size is scaled down to
fractions that fit; when nothing is left (a 2-CPU machine running a RayDP Spark executor),
actors reserve no CPU at all and share the cores through the OS scheduler. The whole CPU is
kept free because Ray Data runs its internal tasks with ``num_cpus=1``: ``ray.data.from_spark``
(its block-metadata tasks) hangs forever when no whole CPU is free, even if the fractional
actors leave 0.9 of one.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hoodie_ray.exceptions import HoodieError, HoodieOptionError
from hoodie_ray.ray.process import ARROW_POOL_ENV

if TYPE_CHECKING:
    from hoodie_ray.config.options import WriteConfig

log = logging.getLogger("hoodie_ray")

NAMESPACE = "hoodie_ray"


def job_table(name: str, path: str) -> str:
    """The table part of a job's actor names (``<name>@<tag>/<role>``): the table's name and
    a short hash of its base path, so that two tables of one name (``trips`` in two
    databases) are two jobs in one cluster, and one table reached by one path is one."""
    scheme, sep, rest = path.partition("://")
    if not sep or scheme.lower() == "file":
        # a local table: one tag however it is spelled (relative, ~, a link, file://)
        base = os.path.realpath(os.path.expanduser(rest if sep else path))
    else:
        base = f"{scheme.lower()}://" + "/".join(p for p in rest.split("/") if p)
    return f"{name}@{hashlib.sha1(base.encode()).hexdigest()[:6]}"


"""The Ray namespace of hoodie_ray's named actors (``<table>/writer-<i>`` ...)."""

_OPENS_PACKAGES = (
    "java.lang",
    "java.lang.invoke",
    "java.lang.reflect",
    "java.io",
    "java.net",
    "java.nio",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "java.math",
    "java.text",
    "java.time",
    "sun.nio.ch",
    "sun.nio.cs",
    "sun.security.action",
    "sun.util.calendar",
    "jdk.internal.misc",
)

JVM_OPTIONS: list[str] = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in _OPENS_PACKAGES]
"""``--add-opens`` flags without which RayDP's executors crash on Java 17
(``InaccessibleObjectException: module java.base does not "opens java.lang"``)."""

ROLES: tuple[str, ...] = ("coordinator", "assigner", "writer", "compactor")

NATURAL_CPUS: Mapping[str, float] = {
    "coordinator": 0.5,
    "assigner": 1.0,
    "writer": 1.0,
    "compactor": 1.0,
}
"""CPUs per actor of each role when the cluster has room for all of them."""

TASK_RESERVE_CPUS = 1.0
"""Whole CPUs kept free for Ray tasks (Ray Data's internal tasks ask for 1 CPU each)."""

_RESOURCE_UNIT = 1e-4  # Ray's resource precision
_EPS = 1e-6
_LOCAL_ONLY_INIT_ARGS = (
    "num_cpus",
    "num_gpus",
    "resources",
    "labels",
    "object_store_memory",
    "include_dashboard",
    "dashboard_host",
    "dashboard_port",
    "_system_config",
)
_init_lock = threading.Lock()


# ---------------------------------------------------------------------------------------------
# Ray start-up
# ---------------------------------------------------------------------------------------------


def _is_local_address(address: str | None) -> bool:
    return address is None or address in ("", "local")


def ensure_ray(address: str | None = None, **kw: Any) -> None:
    """Start or join Ray once per process; do nothing when Ray is already initialized.

    Args:
        address: a Ray cluster to join (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``).
            ``None`` reads ``RAY_ADDRESS``; when that is unset too, an embedded local Ray starts.
        **kw: passed to ``ray.init``. Defaults: ``namespace="hoodie_ray"``,
            ``job_config=JobConfig(jvm_options=JVM_OPTIONS)`` (a given ``job_config`` gets the
            missing flags appended), ``logging_level="warning"``, ``log_to_driver=True``,
            ``include_dashboard=None`` (Ray's choice; the dashboard binds 127.0.0.1).
            Local-only arguments (``num_cpus``, ``include_dashboard``, ...) are dropped when
            joining an existing cluster, where Ray would reject them.

    Token authentication stays as Ray sets it (on by default); hoodie_ray never disables it.
    """
    import ray

    if ray.is_initialized():
        return
    from ray.job_config import JobConfig

    with _init_lock:
        if ray.is_initialized():
            return
        address = address or os.environ.get("RAY_ADDRESS") or None
        job_config = kw.pop("job_config", None)
        if job_config is None:
            job_config = JobConfig(jvm_options=list(JVM_OPTIONS))
        else:
            have = list(job_config.jvm_options or [])
            job_config.jvm_options = have + [o for o in JVM_OPTIONS if o not in have]
        kw.setdefault("namespace", NAMESPACE)
        kw.setdefault("logging_level", "warning")
        kw.setdefault("log_to_driver", True)
        if not _is_local_address(address):
            dropped = [k for k in _LOCAL_ONLY_INIT_ARGS if kw.pop(k, None) is not None]
            if dropped:
                log.info("joining Ray at %s: ignoring local-only arguments %s", address, dropped)
        ray.init(address=address, job_config=job_config, **kw)
        if address is None and not _started_here():
            log.warning(
                "RAY_ADDRESS is unset and a Ray cluster was already running on this machine: "
                "joined it (GCS %s) instead of starting an embedded one; set RAY_ADDRESS=local "
                "to start one for this process",
                _gcs_address(),
            )


def _started_here() -> bool:
    """Whether ``ray.init`` started the head node in this process (else it joined one)."""
    try:
        from ray._private import worker

        node = getattr(worker, "_global_node", None)
        return node is None or bool(getattr(node, "head", True))
    except Exception:  # a Ray without these internals: say nothing rather than guess
        return True


def _gcs_address() -> str:
    import ray

    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:
        return "?"


def set_actor_memory_pool(choice: str | None) -> str:
    """Make ``choice`` (``ray.arrow.memory_pool``) the pool of pyarrow's Python calls in this
    actor's process and return that pool's backend name.

    Unset: the pool ``ARROW_DEFAULT_MEMORY_POOL`` names (hoodie_ray's actor processes on
    Linux name one there before pyarrow loads, :mod:`hoodie_ray.ray.process`, which also
    moves Arrow's C++ allocations, the Parquet writer's among them: mimalloc for the
    coordinator, jemalloc for the other actors), else jemalloc where pyarrow has it. Only
    for processes hoodie_ray owns (its actors): the pool is the process's.
    """
    import pyarrow as pa

    if choice is None and os.environ.get(ARROW_POOL_ENV):
        return pa.default_memory_pool().backend_name
    factory = {
        "jemalloc": pa.jemalloc_memory_pool,
        "mimalloc": pa.mimalloc_memory_pool,
        "system": pa.system_memory_pool,
    }[choice or "jemalloc"]
    try:
        pa.set_memory_pool(factory())
    except NotImplementedError:  # this pyarrow build lacks it
        if choice is not None:
            log.warning("pyarrow has no %s memory pool here: Arrow's default kept", choice)
    return pa.default_memory_pool().backend_name


# ---------------------------------------------------------------------------------------------
# Resource planning
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourcePlan:
    """The Ray resources of each actor role of one write topology.

    ``per_actor[role]`` is the ``.options(**...)`` dict of one actor of ``role``
    (``num_cpus`` and, when configured, ``memory``); ``counts[role]`` how many there are.
    """

    counts: Mapping[str, int]
    per_actor: Mapping[str, Mapping[str, float]]
    mode: str
    """``"whole"`` (natural sizes), ``"fractional"`` (scaled to fit) or ``"shared"`` (0 CPUs)."""
    cpus_available: float
    reserve_cpus: float
    explicit: frozenset[str] = field(default_factory=frozenset)
    """Roles whose CPUs the user set (``ray.<role>.num_cpus``)."""

    def for_role(self, role: str) -> dict[str, Any]:
        """The ``ActorClass.options(**...)`` keywords of one actor of ``role``."""
        _check_role(role)
        return dict(self.per_actor[role])

    def demand(self, roles: Sequence[str] | None = None) -> dict[str, float]:
        """Summed resources of the given roles' actors (all roles by default)."""
        total: dict[str, float] = {"CPU": 0.0, "memory": 0.0}
        for role in roles if roles is not None else ROLES:
            n = self.counts.get(role, 0)
            opts = self.per_actor[role]
            total["CPU"] += n * float(opts.get("num_cpus", 0.0))
            total["memory"] += n * float(opts.get("memory", 0.0))
        return total

    @property
    def total_cpus(self) -> float:
        """CPUs the whole topology reserves."""
        return self.demand()["CPU"]

    def describe(self, roles: Sequence[str] | None = None) -> str:
        """One line: ``1 coordinator x 0.5 CPU, 2 writers x 1 CPU, ...`` (all roles by
        default)."""
        parts = []
        for role in roles if roles is not None else ROLES:
            n = self.counts.get(role, 0)
            if n:
                cpus = self.per_actor[role].get("num_cpus", 0.0)
                parts.append(f"{n} {role}{'s' if n > 1 else ''} x {_fmt(cpus)} CPU")
        return ", ".join(parts) or "no actors"


def _fmt(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".") if x else "0"


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown actor role {role!r}; expected one of {', '.join(ROLES)}")


def refuse_occ(wc: WriteConfig) -> None:
    """``HoodieDatasink`` writes as the table's single writer or under non-blocking
    concurrency control (where every writer commits): its input comes from Ray Data's write
    tasks, so a checkpoint that lost a conflict under optimistic concurrency control has
    nothing to be replayed from. ``hr.write(ds, ...)`` (which keeps the dataset's blocks until
    the commit) and ``HoodieStreamWriter`` write under OCC."""
    refuse_inline_clustering(wc)
    if wc.occ and not wc.nbcc:
        raise HoodieOptionError(
            "option hoodie.write.concurrency.mode=optimistic_concurrency_control is not "
            "supported by HoodieDatasink (a conflicted commit could not be replayed): write "
            "the dataset with hr.write(ds, path, options), or use single_writer or (MERGE_ON_READ "
            "with the bucket index) non_blocking_concurrency_control"
        )


def refuse_inline_clustering(wc: WriteConfig) -> None:
    """Inline clustering runs on the single-process path for now: on Ray it would replace the
    file groups the assigners' key indexes point at between checkpoints."""
    if wc.clustering_inline:
        raise HoodieOptionError(
            "option hoodie.clustering.inline=true is not supported on the Ray write path yet "
            "(the assigners' key indexes would point at the groups it replaces): run "
            "hr.cluster(path) between jobs, or write with engine='local'"
        )


def _resolve(options: Any) -> WriteConfig:
    from hoodie_ray.config.options import resolve_options

    return resolve_options(options)


def role_counts(options: Any = None) -> dict[str, int]:
    """How many actors of each role the options ask for.

    One coordinator, ``write.bucket_assign.tasks`` assigners, ``write.tasks`` writers and, for
    MERGE_ON_READ tables with scheduled async compaction, ``compaction.tasks`` compactors.
    """
    wc = _resolve(options)
    compactors = 0
    if (
        getattr(wc, "table_type", "MERGE_ON_READ") == "MERGE_ON_READ"
        and getattr(wc, "compaction_schedule", True)
        and getattr(wc, "compaction_async", True)
    ):
        compactors = int(getattr(wc, "compaction_tasks", 0) or 0)
    return {
        "coordinator": 1,
        "assigner": int(wc.assign_tasks),
        "writer": int(wc.write_tasks),
        "compactor": compactors,
    }


def _floor_unit(x: float) -> float:
    return math.floor(x / _RESOURCE_UNIT + _EPS) * _RESOURCE_UNIT if x > 0 else 0.0


def _require_ray() -> Any:
    import ray

    if not ray.is_initialized():
        raise HoodieError(
            "Ray is not initialized: call hoodie_ray.ray.runtime.ensure_ray() before sizing "
            "actors (or pass cpus_available=)"
        )
    return ray


def plan_resources(
    options: Mapping[str, Any] | WriteConfig | None = None,
    *,
    counts: Mapping[str, int] | None = None,
    cpus_available: float | None = None,
    reserve_cpus: float | None = None,
) -> ResourcePlan:
    """Size every actor role of a topology from what the cluster has now.

    Args:
        options: user options or a resolved ``WriteConfig``; ``ray.<role>.num_cpus`` and
            ``ray.writer.memory`` / ``ray.assigner.memory`` are honoured as given.
        counts: actors per role (default: :func:`role_counts` of ``options``).
        cpus_available: CPUs to plan with (default ``ray.available_resources()["CPU"]``, which
            already excludes RayDP Spark executors and other running actors).
        reserve_cpus: CPUs to leave free for Ray tasks; default :data:`TASK_RESERVE_CPUS` when
            at least that many are available, else 0.

    Plan once per topology, before creating any of its actors: actors created in between
    lower ``ray.available_resources()`` and so the next plan.
    """
    wc = _resolve(options)
    n = dict(role_counts(wc)) if counts is None else {r: int(counts.get(r, 0)) for r in ROLES}
    if cpus_available is None:
        cpus_available = float(_require_ray().available_resources().get("CPU", 0.0))
    if reserve_cpus is None:
        reserve_cpus = TASK_RESERVE_CPUS if cpus_available >= TASK_RESERVE_CPUS else 0.0

    explicit = _explicit_cpus(wc)
    fixed = sum(n[r] * c for r, c in explicit.items())
    budget = max(0.0, cpus_available - reserve_cpus - fixed)
    free_roles = [r for r in ROLES if r not in explicit and n[r] > 0]
    cpus, mode = _size_cpus(n, explicit, free_roles, budget)
    memory = {
        "writer": getattr(wc, "writer_memory", None),
        "assigner": getattr(wc, "assigner_memory", None),
    }
    per_actor: dict[str, dict[str, float]] = {}
    for role in ROLES:
        opts: dict[str, float] = {"num_cpus": cpus[role]}
        mem = memory.get(role)
        if mem:
            opts["memory"] = int(mem)
        per_actor[role] = opts
    plan = ResourcePlan(
        counts=n,
        per_actor=per_actor,
        mode=mode,
        cpus_available=float(cpus_available),
        reserve_cpus=float(reserve_cpus),
        explicit=frozenset(explicit),
    )
    if mode == "shared" and any(n[r] for r in free_roles):
        log.debug(
            "hoodie_ray actors reserve no CPU (%.2f CPUs available, %.0f kept for Ray tasks): %s",
            cpus_available,
            reserve_cpus,
            plan.describe(),
        )
    return plan


def _explicit_cpus(wc: WriteConfig) -> dict[str, float]:
    """The CPUs the user set per role (``ray.<role>.num_cpus``)."""
    explicit: dict[str, float] = {}
    for role in ROLES:
        v = getattr(wc, f"{role}_cpus", None)
        if v is not None:
            if v < 0:
                raise HoodieError(f"ray.{role}.num_cpus must be >= 0, got {v}")
            explicit[role] = float(v)
    return explicit


def _size_cpus(
    counts: Mapping[str, int],
    explicit: Mapping[str, float],
    free_roles: Sequence[str],
    budget: float,
) -> tuple[dict[str, float], str]:
    """CPUs per actor of every role, and the mode: roles the user did not size get their
    natural CPUs when the actors of ``free_roles`` fit ``budget`` that way (``"whole"``),
    else scaled down to fit (``"fractional"``), else none (``"shared"``)."""
    cpus: dict[str, float] = dict(explicit)
    natural = sum(counts[r] * NATURAL_CPUS[r] for r in free_roles)
    if natural <= budget + _EPS:
        cpus.update({r: NATURAL_CPUS[r] for r in ROLES if r not in explicit})
        return cpus, "whole"
    scale = budget / natural
    scaled = {r: _floor_unit(NATURAL_CPUS[r] * scale) for r in ROLES if r not in explicit}
    mode = "fractional" if all(scaled[r] > 0 for r in free_roles) else "shared"
    if mode == "shared":
        scaled = {r: 0.0 for r in scaled}
    cpus.update(scaled)
    return cpus, mode


def actor_resources(
    role: str,
    options: Mapping[str, Any] | WriteConfig | None = None,
    *,
    plan: ResourcePlan | None = None,
    check: bool = True,
) -> dict[str, Any]:
    """The ``ActorClass.options(**...)`` keywords (``num_cpus``, ``memory``) of one ``role`` actor.

    Args:
        role: ``"coordinator"``, ``"assigner"``, ``"writer"`` or ``"compactor"``.
        options: user options or a resolved ``WriteConfig``.
        plan: a :func:`plan_resources` result to take the size from (plan once, then ask per
            role, so every role is sized from the same snapshot of the cluster).
        check: raise :class:`HoodieError` when this role's actors cannot fit what the cluster
            has available now (they would otherwise be queued by Ray without end).

    Example::

        w_opts = actor_resources("writer", wc)
        WriterActor.options(name=..., namespace=NAMESPACE, **w_opts).remote(...)
    """
    _check_role(role)
    if plan is None:
        plan = plan_resources(options)
    if check and plan.counts.get(role, 0) > 0:
        check_placeable(plan, roles=[role])
    return plan.for_role(role)


# ---------------------------------------------------------------------------------------------
# Placement checks
# ---------------------------------------------------------------------------------------------


def _nodes_available(ray: Any) -> list[dict[str, float]]:
    """Available resources of each alive node (falls back to the cluster total as one node)."""
    try:
        from ray._private import state

        per_node = state.available_resources_per_node()
        if per_node:
            return [dict(v) for v in per_node.values()]
    except Exception:  # a private API: tolerate its absence
        pass
    return [dict(ray.available_resources())]


def _fit_nodes(items: list[tuple[float, float]], nodes: list[dict[str, float]]) -> bool:
    """First-fit-decreasing of (cpu, memory) actors onto nodes' free CPU/memory."""
    free = [[n.get("CPU", 0.0), n.get("memory", 0.0)] for n in nodes]
    for cpu, mem in sorted(items, reverse=True):
        for slot in free:
            if slot[0] + _EPS >= cpu and slot[1] + 1 >= mem:
                slot[0] -= cpu
                slot[1] -= mem
                break
        else:
            return False
    return True


def check_placeable(
    plan: ResourcePlan,
    *,
    roles: Sequence[str] | None = None,
    available: Mapping[str, float] | None = None,
    nodes: Sequence[Mapping[str, float]] | None = None,
) -> None:
    """Raise :class:`HoodieError` when the plan's actors cannot be placed on the cluster now.

    Compares the CPUs and memory the actors of ``roles`` (all by default) reserve with what is
    available: in total, and packed onto nodes when per-node figures exist. ``available`` /
    ``nodes`` default to the live cluster's (``ray.available_resources()``).

    Ray never fails an actor it cannot place: it queues it silently, and the first call to it
    hangs. Call this before creating a topology (and :func:`wait_ready` after) instead.
    """
    roles = list(ROLES if roles is None else roles)
    for r in roles:
        _check_role(r)
    if available is None or nodes is None:
        ray = _require_ray()
        if available is None:
            available = dict(ray.available_resources())
        if nodes is None:
            nodes = _nodes_available(ray)
    problem = _placement_problem(plan, roles, available, nodes)
    if problem is None:
        return
    fixes = []
    if plan.explicit & set(roles):
        fixes.append(
            "lower " + ", ".join(f"ray.{r}.num_cpus" for r in sorted(plan.explicit & set(roles)))
        )
    fixes += [
        "lower write.tasks / write.bucket_assign.tasks",
        "stop Spark executors or other actors holding CPUs",
        "or add nodes",
    ]
    raise HoodieError(
        f"cannot place the hoodie_ray actors ({plan.describe(roles)}) on this Ray cluster: "
        f"{problem}. Ray would queue them without end. Fix: {'; '.join(fixes)}."
    )


def _placement_problem(
    plan: ResourcePlan,
    roles: Sequence[str],
    available: Mapping[str, float],
    nodes: Sequence[Mapping[str, float]],
) -> str | None:
    """Why the actors of ``roles`` do not fit: too few CPUs or too little memory in total, or
    no packing onto the nodes; None when they fit."""
    need = plan.demand(roles)
    have_cpu = float(available.get("CPU", 0.0))
    have_mem = float(available.get("memory", 0.0))
    items = [
        (float(plan.per_actor[r].get("num_cpus", 0.0)), float(plan.per_actor[r].get("memory", 0)))
        for r in roles
        for _ in range(plan.counts.get(r, 0))
    ]
    items = [it for it in items if it[0] > 0 or it[1] > 0]
    if need["CPU"] > have_cpu + _EPS:
        return f"they need {_fmt(need['CPU'])} CPUs, {_fmt(have_cpu)} are available"
    if need["memory"] > have_mem + 1:
        return (
            f"they need {need['memory'] / 2**30:.2f} GiB of Ray memory, "
            f"{have_mem / 2**30:.2f} GiB are available"
        )
    if items and not _fit_nodes(items, [dict(n) for n in nodes]):
        biggest = max((n.get("CPU", 0.0) for n in nodes), default=0.0)
        return (
            f"the CPUs are spread over {len(nodes)} nodes (at most {_fmt(biggest)} free on one) "
            "and the actors do not pack onto them"
        )
    return None


def wait_ready(actors: Sequence[Any], timeout_s: float = 120.0, what: str = "actors") -> None:
    """Wait until every actor is placed and constructed; raise :class:`HoodieError` on timeout.

    A constructor that raised surfaces as its own error (unwrapped when it is a HoodieError).
    """
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

    if not actors:
        return
    refs = [a.__ray_ready__.remote() for a in actors]
    try:
        ray.get(refs, timeout=timeout_s)
    except GetTimeoutError:
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=0)
        avail = ray.available_resources()
        raise HoodieError(
            f"{len(pending)} of {len(refs)} {what} were not placed within {timeout_s:.0f}s "
            f"(available now: {_fmt(avail.get('CPU', 0.0))} CPUs). Ray queues actors it cannot "
            "place; lower the actors' num_cpus/memory or free resources."
        ) from None
    except (RayTaskError, RayActorError) as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, HoodieError):
            raise cause from None
        raise
