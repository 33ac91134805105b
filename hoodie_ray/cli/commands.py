"""The ``hoodie-ray`` subcommands (click). Entry point: :func:`hoodie_ray.cli.main`.

Read-only views (``commits show``, ``compactions show``, ``fsview``, ``timeline``), the table
services (``compact``, ``clean``, ``archive``, each with ``--dry-run``; ``compactions drop``,
``upgrade``), one-commit writes from a file
(``write``) and the benchmark (``bench mor-q1``). Every subcommand takes ``--output
table|json``; tables print sizes in human units, JSON prints one document with sizes in bytes.
Ray, the compaction and the upgrade code are imported only by the subcommands that use them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import io
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from hoodie_ray.cli import info
from hoodie_ray.cli.output import (
    Column,
    View,
    count_col,
    display_path,
    emit,
    human_count,
    human_size,
    plural,
    rate,
    size_col,
)

__all__ = ["CliError", "cli"]

STORAGE_OPTIONS_ENV = "HOODIE_RAY_STORAGE_OPTIONS"
"""Environment variable with storage options as a JSON object (keeps secrets off the command
line, where ``ps`` shows them)."""

DEFAULT_COMMITS_LIMIT = 20
_CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2")


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


# -- shared options ------------------------------------------------------------------------------


def output_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--output/-o table|json`` (default ``table``)."""
    return click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Readable tables, or one JSON document (sizes in bytes).",
    )(fn)


def storage_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--storage-option KEY=VALUE`` (repeatable): object-store credentials and endpoint."""
    return click.option(
        "--storage-option",
        "storage_kv",
        multiple=True,
        metavar="KEY=VALUE",
        help=(
            "Object-store option (pyarrow S3FileSystem arguments: access_key, secret_key, "
            f"endpoint_override, region, ...); repeatable. Also read from ${STORAGE_OPTIONS_ENV} "
            "as a JSON object. Never printed."
        ),
    )(fn)


def table_command(
    group: click.Group, name: str, *params: Callable[..., Any]
) -> Callable[[Callable[..., Any]], click.Command]:
    """A subcommand of ``group`` on the table at ``PATH``: its arguments and options are
    ``PATH``, ``params`` (click decorators, in order), ``--storage-option`` and ``--output``."""

    def decorate(fn: Callable[..., Any]) -> click.Command:
        for param in reversed((*params, storage_option, output_option)):
            fn = param(fn)
        return group.command(name)(click.argument("path")(fn))

    return decorate


def parse_key_values(pairs: Sequence[str], what: str, secret: bool = False) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``.

    With ``secret`` a malformed item is not echoed in the error (it may be a credential).

    Raises:
        CliError: an item without ``=`` or with an empty key.
    """
    out: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            shown = "(not shown)" if secret else repr(item)
            raise CliError(f"{what} must be KEY=VALUE, got {shown}")
        out[key] = value
    return out


def storage_options_from(pairs: Sequence[str]) -> dict[str, Any] | None:
    """Storage options from ``$HOODIE_RAY_STORAGE_OPTIONS`` overridden by ``--storage-option``."""
    opts: dict[str, Any] = {}
    env = os.environ.get(STORAGE_OPTIONS_ENV)
    if env:
        try:
            loaded = json.loads(env)
        except ValueError:
            raise CliError(f"${STORAGE_OPTIONS_ENV} is not valid JSON") from None
        if not isinstance(loaded, dict):
            raise CliError(f"${STORAGE_OPTIONS_ENV} must be a JSON object")
        opts.update(loaded)
    opts.update(parse_key_values(pairs, "--storage-option", secret=True))
    return opts or None


def load_table(path: str, storage_kv: Sequence[str]) -> Any:
    """``HoodieTable.load`` with the command line's storage options."""
    from hoodie_ray.table import HoodieTable

    return HoodieTable.load(path, storage_options_from(storage_kv))


def lazy_feature(module: str, attr: str, what: str) -> Callable[..., Any]:
    """``module.attr``, or a :class:`CliError` saying ``what`` is not in this build.

    A module that is absent, or that fails to import (a missing dependency), gives that error,
    naming what is missing.
    """
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        if isinstance(e, ModuleNotFoundError) and e.name == module:
            raise CliError(
                f"{what} is not available in this version of hoodie_ray ({module} is missing)"
            ) from None
        raise CliError(
            f"{what} is not available in this version of hoodie_ray: cannot import {module} "
            f"({_first_line(e)})"
        ) from None
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise CliError(
            f"{what} is not available in this version of hoodie_ray ({module}.{attr} is missing)"
        )
    return fn  # type: ignore[no-any-return]


def kv_view(title: str, pairs: Sequence[tuple[str, str]]) -> View:
    """A block of ``key  value`` lines, keys padded to one width."""
    width = max((len(k) for k, _ in pairs), default=0)
    return View(title=title, lines=[f"  {k.ljust(width)}  {v}".rstrip() for k, v in pairs])


def table_doc(path: str, storage_kv: Sequence[str]) -> dict[str, Any]:
    """The ``table`` entry of a document: the summary of the table at ``path``, or only its
    path when there is no table there."""
    from hoodie_ray.exceptions import HoodieTableNotFoundError

    try:
        return info.table_summary(load_table(path, storage_kv), display_path(path))
    except HoodieTableNotFoundError:
        return {"path": display_path(path)}


def _head(t: Any, path: str) -> tuple[dict[str, Any], str]:
    summary = info.table_summary(t, display_path(path))
    title = (
        f"{summary['name']} ({summary['type']}, table version {summary['version']}) at "
        f"{summary['path']}"
    )
    return summary, title


# -- the group -----------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hoodie-ray", prog_name="hoodie-ray")
@click.option(
    "--debug",
    is_flag=True,
    envvar="HOODIE_RAY_DEBUG",
    help="Print the traceback of an error (also $HOODIE_RAY_DEBUG=1).",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Inspect and write Apache Hudi tables with hoodie_ray."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# -- commits -------------------------------------------------------------------------------------


_COMMIT_COLUMNS = (
    Column("instant", "instant"),
    Column("action", "action"),
    Column("operation", "operation"),
    count_col("num_partitions", "partitions"),
    count_col("files_added", "files added"),
    count_col("files_updated", "files updated"),
    count_col("records_written", "records"),
    count_col("inserts", "inserts"),
    count_col("updates", "updates"),
    count_col("deletes", "deletes"),
    size_col("bytes_written", "written"),
    count_col("errors", "errors"),
)


@cli.group("commits")
def commits_group() -> None:
    """Completed commits of a table."""


@table_command(
    commits_group,
    "show",
    click.option(
        "--limit",
        "-n",
        type=click.IntRange(min=0),
        default=DEFAULT_COMMITS_LIMIT,
        show_default=True,
        help="Newest N commits (0 for all).",
    ),
    click.option("--archived", is_flag=True, help="Include the archived commits."),
)
def commits_show(
    path: str, limit: int, archived: bool, storage_kv: tuple[str, ...], output: str
) -> None:
    """Commits, deltacommits and replacecommits, newest first, with what each wrote."""
    t = load_table(path, storage_kv)
    summary, title = _head(t, path)
    total = len(t.active_timeline.completed_commits())
    commits = info.commits_doc(t, limit or None, archived=archived)
    if archived:
        total += info.archived_commit_count(t)
    doc = {"table": summary, "total_commits": total, "commits": commits}
    cols = list(_COMMIT_COLUMNS)
    if any(c["completion_time"] for c in commits):
        cols.insert(2, Column("completion_time", "completed"))
    if archived:
        cols.append(Column("archived", "archived"))
    shown = f"{len(commits)} of {total} commits" if len(commits) < total else f"{total} commits"
    emit(
        output,
        doc,
        [View(title, cols, commits, empty="no completed commits", footer=shown)],
    )


# -- compactions ---------------------------------------------------------------------------------


_COMPACTION_COLUMNS = (
    Column("instant", "instant"),
    Column("state", "state"),
    count_col("file_groups", "file groups"),
    count_col("base_files", "base files"),
    count_col("log_files", "log files"),
    size_col("log_bytes", "log size"),
    count_col("records_written", "records"),
    size_col("bytes_written", "written"),
)


@cli.group("compactions")
def compactions_group() -> None:
    """Compactions of a Merge-On-Read table."""


@table_command(compactions_group, "show")
def compactions_show(path: str, storage_kv: tuple[str, ...], output: str) -> None:
    """Pending and completed compactions, oldest first, with the size of their plans."""
    t = load_table(path, storage_kv)
    summary, title = _head(t, path)
    comps = info.compactions_doc(t)
    pending = sum(1 for c in comps if c["state"] != "COMPLETED")
    doc = {"table": summary, "pending": pending, "compactions": comps}
    cols = list(_COMPACTION_COLUMNS)
    if any(c.get("error") for c in comps):
        cols.append(Column("error", "error"))
    footer = f"{len(comps)} compactions, {pending} pending"
    empty = "no compactions on the active timeline"
    emit(output, doc, [View(title, cols, comps, empty=empty, footer=footer)])


@table_command(compactions_group, "drop", click.argument("instant"))
def compactions_drop(path: str, instant: str, storage_kv: tuple[str, ...], output: str) -> None:
    """Delete the pending compaction plan INSTANT (requested or inflight), under the writer
    lock: a corrupt plan the writers refuse to run. Files an interrupted run of it wrote are
    deleted too; the table's committed data is not touched."""
    fn = lazy_feature("hoodie_ray.job.maintenance", "drop_compaction", "dropping a compaction")
    load_table(path, storage_kv)  # a bad path fails here, with the usual message
    deleted = fn(path, instant, storage_options=storage_options_from(storage_kv))
    doc = {"table": table_doc(path, storage_kv), "instant": instant, "deleted_files": deleted}
    line = f"compaction {instant} dropped"
    if deleted:
        line += f" ({len(deleted)} files of an interrupted run deleted)"
    emit(output, doc, [View(lines=[line])])


# -- metadata ------------------------------------------------------------------------------------


@cli.group("metadata")
def metadata_group() -> None:
    """The metadata table (.hoodie/metadata): file listings readers use instead of listing."""


@table_command(
    metadata_group,
    "init",
    click.option(
        "--bloom-filters",
        is_flag=True,
        help="Also build the bloom_filters index from the base files' footers "
        "(hoodie.metadata.index.bloom.filter.enable).",
    ),
)
def metadata_init(path: str, bloom_filters: bool, storage_kv: tuple[str, ...], output: str) -> None:
    """Build the metadata table from a listing of the table's files (rebuilds an existing
    one), under the writer lock."""
    load_table(path, storage_kv)
    fn = lazy_feature("hoodie_ray.job.maintenance", "init_metadata", "the metadata table")
    options = {"hoodie.metadata.index.bloom.filter.enable": "true"} if bloom_filters else None
    with _slice_progress(_isatty(sys.stderr), "reading base file footers") as on_progress:
        parts = fn(
            path,
            storage_options=storage_options_from(storage_kv),
            options=options,
            on_progress=on_progress,
        )
    doc = {"table": table_doc(path, storage_kv), "partitions": parts}
    emit(output, doc, [View(lines=[f"metadata table built: {', '.join(parts)}"])])


@table_command(metadata_group, "validate")
def metadata_validate(path: str, storage_kv: tuple[str, ...], output: str) -> None:
    """Compare the metadata table with the table's files; exits 1 naming each difference."""
    t = load_table(path, storage_kv)
    fn = lazy_feature("hoodie_ray.job.maintenance", "validate_metadata", "the metadata table")
    diffs = fn(path, storage_options=storage_options_from(storage_kv))
    parts = t.config.get("hoodie.table.metadata.partitions", "")
    doc = {
        "table": table_doc(path, storage_kv),
        "partitions": [p for p in parts.split(",") if p],
        "differences": [
            {"partition": d.partition, "key": d.key, "problem": d.problem} for d in diffs
        ],
    }
    if not parts:
        lines = ["the table has no metadata table"]
    elif diffs:
        lines = [str(d) for d in diffs] + [f"{len(diffs)} difference{'s' * (len(diffs) != 1)}"]
    else:
        lines = [f"metadata table in sync ({parts})"]
    emit(output, doc, [View(lines=lines)])
    if diffs:
        raise click.exceptions.Exit(1)


@table_command(
    metadata_group,
    "drop",
    click.option(
        "--partition",
        default=None,
        help="Drop only this metadata-table partition (an index such as column_stats).",
    ),
)
def metadata_drop(
    path: str, partition: str | None, storage_kv: tuple[str, ...], output: str
) -> None:
    """Delete the metadata table (or one of its partitions), under the writer lock."""
    load_table(path, storage_kv)
    fn = lazy_feature("hoodie_ray.job.maintenance", "drop_metadata", "the metadata table")
    left = fn(path, partition=partition, storage_options=storage_options_from(storage_kv))
    doc = {"table": table_doc(path, storage_kv), "dropped": partition or "all", "partitions": left}
    what = f"metadata partition {partition}" if partition else "metadata table"
    emit(output, doc, [View(lines=[f"{what} dropped"])])


@table_command(
    metadata_group,
    "create-index",
    click.argument("name"),
    click.argument("column"),
    click.option(
        "--kind",
        type=click.Choice(["secondary", "record_index"]),
        default="secondary",
        show_default=True,
        help="The index kind (Hudi's CREATE INDEX ... USING secondary_index / record_index); "
        "a record index is named record_index and is over the record key field(s).",
    ),
    click.option(
        "--engine",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="Read the file slices here, or in Ray tasks over the cluster's CPUs.",
    ),
)
def metadata_create_index(
    path: str,
    name: str,
    column: str,
    kind: str,
    engine: str,
    storage_kv: tuple[str, ...],
    output: str,
) -> None:
    """Build index NAME over COLUMN in the metadata table from the table's current snapshot,
    and keep it from then on (its definition goes to .hoodie/.index_defs/index.json)."""
    load_table(path, storage_kv)
    fn = lazy_feature("hoodie_ray.api", "create_index", "the metadata table")
    with _slice_progress(_isatty(sys.stderr), "indexing file slices") as on_progress:
        part = fn(
            path,
            name,
            column,
            kind=kind,
            storage_options=storage_options_from(storage_kv),
            on_progress=on_progress,
            engine=engine,
        )
    doc = {"table": table_doc(path, storage_kv), "index": part, "column": column, "kind": kind}
    emit(output, doc, [View(lines=[f"index {part} built over {column}"])])


@table_command(metadata_group, "drop-index", click.argument("name"))
def metadata_drop_index(path: str, name: str, storage_kv: tuple[str, ...], output: str) -> None:
    """Drop index NAME: its metadata-table partition and its definition."""
    load_table(path, storage_kv)
    fn = lazy_feature("hoodie_ray.job.maintenance", "drop_index", "the metadata table")
    left = fn(path, name, storage_options=storage_options_from(storage_kv))
    doc = {"table": table_doc(path, storage_kv), "dropped": name, "partitions": left}
    emit(output, doc, [View(lines=[f"index {name} dropped"])])


# -- fsview --------------------------------------------------------------------------------------


@table_command(
    cli,
    "fsview",
    click.option(
        "--partition",
        "-p",
        default=None,
        help="Only this partition: its path, or field=value (either partition style).",
    ),
)
def fsview(path: str, partition: str | None, storage_kv: tuple[str, ...], output: str) -> None:
    """The latest file slice of every file group: base file and log files."""
    t = load_table(path, storage_kv)
    summary, title = _head(t, path)
    slices = info.fsview_doc(t, partition)
    partitions = sorted({s["partition_path"] for s in slices})
    totals = {
        "file_slices": len(slices),
        "partitions": len(partitions),
        "base_files": sum(1 for s in slices if s["base_file"]),
        "log_files": sum(s["num_log_files"] for s in slices),
        "total_bytes": sum(s["total_bytes"] for s in slices),
    }
    doc = {"table": summary, "partition": partition, "totals": totals, "file_slices": slices}
    rows = [dict(s, partition_path=s["partition_path"] or "(non-partitioned)") for s in slices]
    cols = [
        Column("partition_path", "partition"),
        Column("file_id", "file id"),
        Column("base_instant", "base instant"),
        size_col("base_file_bytes", "base file"),
        count_col("num_log_files", "log files"),
        size_col("log_bytes", "log size"),
        size_col("total_bytes", "total"),
    ]
    footer = (
        f"{plural(totals['file_slices'], 'file slice')} in "
        f"{plural(totals['partitions'], 'partition')}: "
        f"{plural(totals['base_files'], 'base file')}, "
        f"{plural(totals['log_files'], 'log file')}, {human_size(totals['total_bytes'])}"
    )
    emit(output, doc, [View(title, cols, rows, empty="no file slices", footer=footer)])


# -- explain -------------------------------------------------------------------------------------


@table_command(
    cli,
    "explain",
    click.option(
        "--filter",
        "-f",
        "filters",
        nargs=3,
        multiple=True,
        metavar="FIELD OP VALUE",
        help=(
            "A read filter, as hr.read takes it (ops =, !=, <, <=, >, >=, in, 'not in'; "
            "in-lists comma-separated); repeatable, combined with AND."
        ),
    ),
    click.option(
        "--query-type",
        default="snapshot",
        show_default=True,
        help="snapshot, read_optimized or incremental.",
    ),
)
def explain(
    path: str,
    filters: tuple[tuple[str, str, str], ...],
    query_type: str,
    storage_kv: tuple[str, ...],
    output: str,
) -> None:
    """The plan of a read: the file groups it reads, of how many, and what pruned them
    (partition values, column statistics, the record or a secondary index for lookups), and
    for a lookup the planner's estimate of it against the scan, and which it took."""
    from hoodie_ray.reader.query import plan_file_slices

    t = load_table(path, storage_kv)
    summary, title = _head(t, path)
    plan = plan_file_slices(t, query_type, filters=[tuple(f) for f in filters] or None)
    st = plan.stats
    doc = {
        "table": summary,
        "query_type": plan.query_type,
        "query_instant": plan.query_instant,
        "filters": [list(f) for f in filters],
        **st,
        "file_groups": [
            {"partition_path": s.partition_path, "file_id": s.file_id} for s in plan.slices
        ],
    }
    lines = [
        f"query: {plan.query_type} as of {plan.query_instant or '(no commit)'}",
        f"filters: {' AND '.join(' '.join(f) for f in filters) or '(none)'}",
        f"file groups: {len(plan.slices)} planned of {st.get('file_groups_total', len(plan.slices))}",
        f"pruned_by: {', '.join(st.get('pruned_by', [])) or '(nothing)'}",
    ]
    if "record_index" in st:
        ri = st["record_index"]
        lines.append(f"record_index: {ri['keys']} key(s) looked up, {ri['found']} found")
    if "record_index_skipped" in st:
        lines.append(f"record_index not used: {st['record_index_skipped']}")
    if "secondary_index" in st:
        si = st["secondary_index"]
        lines.append(
            f"{si['index']} ({si['field']}): {si['values']} value(s), {si['keys']} record "
            f"key(s), {si['found']} located by the record index"
        )
    if "secondary_index_skipped" in st:
        lines.append(f"secondary index not used: {st['secondary_index_skipped']}")
    if st.get("lookup_cost", {}).get("use_index"):
        lines.append(f"planner: {st['lookup_cost']['why']}")
    rows = [
        {"partition_path": s.partition_path or "(non-partitioned)", "file_id": s.file_id}
        for s in plan.slices
    ]
    cols = [Column("partition_path", "partition"), Column("file_id", "file id")]
    emit(output, doc, [View(title, cols, rows, empty="no file groups to read", lines=lines)])


# -- changes -------------------------------------------------------------------------------------

#: Characters of a record image shown in a text table (``--output json`` keeps them whole).
_IMAGE_WIDTH = 60


def _clip(v: Any) -> str:
    if v is None:
        return "-"
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= _IMAGE_WIDTH else text[: _IMAGE_WIDTH - 3] + "..."


@table_command(
    cli,
    "changes",
    click.option(
        "--begin", default=None, help="After this instant (exclusive; default: the first)."
    ),
    click.option(
        "--end", default=None, help="Up to this instant (inclusive; default: the latest)."
    ),
    click.option(
        "--limit",
        "-n",
        type=click.IntRange(min=0),
        default=50,
        show_default=True,
        help="First N changes (0 for all).",
    ),
)
def changes(
    path: str,
    begin: str | None,
    end: str | None,
    limit: int,
    storage_kv: tuple[str, ...],
    output: str,
) -> None:
    """Every change the commits requested in (begin, end] made, in commit order: Hudi's CDC
    query (hr.read(..., query_type="incremental", incremental_format="cdc")). op is i, u or
    d; before and after are the record before and after the change, as JSON."""
    from hoodie_ray.reader.query import read_table

    t = load_table(path, storage_kv)
    summary, title = _head(t, path)
    table = read_table(
        t.base_uri,
        query_type="incremental",
        incremental_format="cdc",
        begin=begin,
        end=end,
        storage_options=t.storage_options,
        cdc_image_format="json",
    )
    total = table.num_rows
    rows = table.slice(0, limit or total).to_pylist()
    for r in rows:
        for side in ("before", "after"):
            r[side] = None if r[side] is None else json.loads(r[side])
    doc = {"table": summary, "begin": begin, "end": end, "total_changes": total, "changes": rows}
    cols = [
        Column("op", "op"),
        Column("ts_ms", "commit"),
        Column("before", "before", _clip),
        Column("after", "after", _clip),
    ]
    shown = f"{len(rows)} of {total} changes" if len(rows) < total else f"{total} changes"
    emit(output, doc, [View(title, cols, rows, empty="no changes in the range", footer=shown)])


# -- timeline ------------------------------------------------------------------------------------


@table_command(
    cli,
    "timeline",
    click.option("--archived", is_flag=True, help="Include the archived instants."),
)
def timeline(path: str, archived: bool, storage_kv: tuple[str, ...], output: str) -> None:
    """Every instant of the active timeline, oldest first (``--archived``: the archived
    timeline's instants first)."""
    t = load_table(path, storage_kv)
    summary, title = _head(t, path)
    instants = info.timeline_doc(t, archived=archived)
    doc = {"table": summary, "instants": instants}
    cols = [
        Column("instant", "instant"),
        Column("action", "action"),
        Column("state", "state"),
        Column("requested_at", "requested at (UTC)"),
    ]
    if any(i["completion_time"] for i in instants):
        cols.append(Column("completion_time", "completed"))
    if archived:
        cols.append(Column("archived", "archived"))
    pending = sum(1 for i in instants if i["state"] != "COMPLETED")
    footer = f"{len(instants)} instants, {pending} pending"
    emit(output, doc, [View(title, cols, instants, empty="empty timeline", footer=footer)])


# -- compact -------------------------------------------------------------------------------------


def dry_run_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--dry-run``: say what a table service would do, change nothing."""
    return click.option(
        "--dry-run", is_flag=True, help="Only say what would be done; change nothing."
    )(fn)


def option_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--option KEY=VALUE`` (repeatable): Hudi options of a table service."""
    return click.option(
        "--option", "option_kv", multiple=True, metavar="KEY=VALUE", help="Repeatable."
    )(fn)


_SLICE_COLUMNS = [
    Column("partition_path", "partition", lambda v: v or "(none)"),
    Column("file_id", "file id"),
    Column("base_file", "base file"),
    count_col("num_log_files", "log files"),
]


@table_command(
    cli,
    "compact",
    option_option,
    click.option(
        "--engine",
        type=click.Choice(["local", "ray"]),
        default=None,
        help="Run the operations in this process (local, the default) or as Ray tasks.",
    ),
    dry_run_option,
)
def compact(
    path: str,
    option_kv: tuple[str, ...],
    engine: str | None,
    dry_run: bool,
    storage_kv: tuple[str, ...],
    output: str,
) -> None:
    """Schedule, run and commit a compaction now (hr.compact): the earliest pending plan, else
    a new one; with --dry-run only the plan and its file slices. With --option
    hoodie.write.concurrency.mode=optimistic_concurrency_control it runs beside live writers,
    taking the writer lock only to schedule and to commit."""
    fn = lazy_feature("hoodie_ray.api", "compact", "compaction")
    params = inspect.signature(fn).parameters
    options = parse_key_values(option_kv, "--option") or None
    storage = storage_options_from(storage_kv)
    kwargs = _optional_kwargs(
        "hr.compact",
        params,
        [
            ("storage_options", storage, "takes no storage options"),
            ("engine", engine, "takes no engine; omit --engine"),
            ("dry_run", dry_run, "has no dry run; omit --dry-run"),
        ],
    )
    load_table(path, storage_kv)  # a bad path fails here, with the usual message
    show_bar = "on_progress" in params and sys.stderr.isatty() and not dry_run
    t0 = time.perf_counter()
    with _slice_progress(show_bar) as on_progress:
        if on_progress is not None:
            kwargs["on_progress"] = on_progress
        result = fn(path, options, **kwargs)
    seconds = round(time.perf_counter() - t0, 3)
    emit(output, *_compact_report(path, storage_kv, result, seconds, dry_run))


@table_command(
    cli,
    "cluster",
    option_option,
    click.option(
        "--engine",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="Rewrite the groups in this process, or as Ray tasks.",
    ),
    dry_run_option,
)
def cluster(
    path: str,
    option_kv: tuple[str, ...],
    engine: str,
    dry_run: bool,
    storage_kv: tuple[str, ...],
    output: str,
) -> None:
    """Cluster the table now (hr.cluster): small file slices rewritten into fewer base files
    (sorted by hoodie.clustering.plan.strategy.sort.columns when set), committed as a
    replacecommit, under the writer lock; with --dry-run only the file slices a plan would
    rewrite."""
    fn = lazy_feature("hoodie_ray.api", "cluster", "clustering")
    load_table(path, storage_kv)  # a bad path fails here, with the usual message
    t0 = time.perf_counter()
    with _slice_progress(_isatty(sys.stderr) and not dry_run, "clustering groups") as progress:
        result = fn(
            path,
            parse_key_values(option_kv, "--option") or None,
            storage_options=storage_options_from(storage_kv),
            engine=engine,
            dry_run=dry_run,
            on_progress=progress,
        )
    seconds = round(time.perf_counter() - t0, 3)
    rows = [
        {"group": i, "partition": p, "file_id": f}
        for i, g in enumerate(result.groups)
        for p, f in g
    ]
    doc = {
        "table": table_doc(path, storage_kv),
        **dataclasses.asdict(result),
        "seconds": seconds,
    }
    slices = plural(result.num_slices, "file slice")
    groups = plural(len(result.groups), "group")
    if not result.groups:
        lines = ["nothing to cluster (no partition has two small file slices to merge)"]
    elif dry_run:
        lines = [f"dry run: {slices} in {groups} would be rewritten"]
    else:
        lines = [
            f"clustering {result.instant}: {slices} in {groups} rewritten into "
            f"{plural(len(result.files_written), 'file')} ({seconds} s)"
        ]
    cols = [
        Column("group", "group"),
        Column("partition", "partition", lambda v: v or "(non-partitioned)"),
        Column("file_id", "file id"),
    ]
    emit(output, doc, [View(lines=lines, columns=cols if rows else (), rows=rows)])


def _optional_kwargs(
    what: str, params: Mapping[str, Any], wanted: Sequence[tuple[str, Any, str]]
) -> dict[str, Any]:
    """The keyword arguments ``(name, value, refusal)`` of ``wanted`` whose value is set, for
    the API function ``what`` (its ``params``); one it does not take fails with
    ``this version of <what> <refusal>``."""
    kwargs: dict[str, Any] = {}
    for name, value, refusal in wanted:
        if not value:
            continue
        if name not in params:
            raise CliError(f"this version of {what} {refusal}")
        kwargs[name] = value
    return kwargs


def _rate_text(bar: Any, t0: float) -> str:
    """The rate shown beside a progress bar: file slices a second."""
    elapsed = time.monotonic() - t0
    pos = getattr(bar, "pos", 0) if bar is not None else 0
    return f"{pos / elapsed:.1f}/s" if elapsed > 0 and pos else ""


@contextlib.contextmanager
def _slice_progress(
    enabled: bool, label: str = "compacting file slices"
) -> Iterator[Callable[[int, int], None] | None]:
    """An API's ``on_progress(done, total)`` (hr.compact, hr.cluster, hr.create_index): a click progress
    bar on stderr (done/total, percent, time left, rate), opened at the first call (when the
    total is known); None when ``enabled`` is not."""
    if not enabled:
        yield None
        return
    bar: Any = None
    t0 = time.monotonic()

    def on_progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(
                length=total,
                label=label,
                file=sys.stderr,
                show_pos=True,
                show_percent=True,
                item_show_func=lambda _: _rate_text(bar, t0),
            )
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        yield on_progress
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


def _compact_report(
    path: str, storage_kv: Sequence[str], result: Any, seconds: float, dry_run: bool
) -> tuple[dict[str, Any], list[View]]:
    """What ``compact`` prints of hr.compact's result: the JSON document and the views."""
    instant = result if result is None or isinstance(result, str) else result.instant
    slices = [] if result is None or isinstance(result, str) else list(result.slices)
    rows = [{**dataclasses.asdict(sl), "num_log_files": len(sl.log_files)} for sl in slices]
    doc: dict[str, Any] = {
        "table": table_doc(path, storage_kv),
        "instant": instant,
        "seconds": seconds,
        "dry_run": dry_run,
        "scheduled": bool(getattr(result, "scheduled", False)),
        "slices": [{k: v for k, v in r.items() if k != "num_log_files"} for r in rows],
    }
    if not slices and not instant:
        return doc, [View(lines=["nothing to compact"])]
    if dry_run or instant is None:
        what = (
            "a new compaction plan would be scheduled and run"
            if instant is None
            else f"pending compaction {instant} would run"
        )
        line = (
            f"dry run: {what}: {plural(len(slices), 'file slice')} in "
            f"{plural(len({sl.partition_path for sl in slices}), 'partition')}"
        )
        return doc, [View(lines=[line], columns=_SLICE_COLUMNS, rows=rows)]
    done = info.compaction_result_doc(load_table(path, storage_kv), instant)
    doc.update(done)
    line = (
        f"compaction {instant} committed in {seconds:.1f} s: "
        f"{plural(done['file_groups'], 'file group')} in "
        f"{plural(len(done['partitions']), 'partition')}, "
        f"{plural(done['records_written'], 'record')} written to new base files "
        f"({human_size(done['bytes_written'])})"
    )
    views = [View(lines=[line])]
    if rows:
        views.append(View(columns=_SLICE_COLUMNS, rows=rows))
    return doc, views


# -- clean / archive -----------------------------------------------------------------------------


@table_command(
    cli,
    "clean",
    option_option,
    dry_run_option,
)
def clean(
    path: str, option_kv: tuple[str, ...], dry_run: bool, storage_kv: tuple[str, ...], output: str
) -> None:
    """Delete the file slices the last clean.retain_commits commits do not read (hr.clean),
    under the writer lock (in one short turn beside live writers with --option
    hoodie.write.concurrency.mode=optimistic_concurrency_control); with --dry-run only list
    them."""
    fn = lazy_feature("hoodie_ray.job.maintenance", "clean", "cleaning")
    options = parse_key_values(option_kv, "--option") or None
    load_table(path, storage_kv)  # a bad path fails here, with the usual message
    t0 = time.perf_counter()
    result = fn(path, options, storage_options=storage_options_from(storage_kv), dry_run=dry_run)
    seconds = round(time.perf_counter() - t0, 3)
    doc: dict[str, Any] = {
        "table": table_doc(path, storage_kv),
        **dataclasses.asdict(result),
        "num_files": result.num_files,
        "seconds": seconds,
    }
    rows = [{"partition": p, "file": n} for p, names in result.files.items() for n in names]
    parts = plural(len(result.files), "partition")
    retained = result.earliest_commit_to_retain
    keeps = f"commits from {retained} on keep their file slices" if retained else None
    if not rows:
        why = keeps or "no more commits than clean.retain_commits"
        lines = [f"nothing to clean ({why})"]
    elif dry_run:
        lines = [f"dry run: {plural(len(rows), 'file')} in {parts} would be deleted ({keeps})"]
    else:
        lines = [
            f"clean {result.instant}: {plural(len(rows), 'file')} in {parts} deleted ({keeps})"
        ]
        failed = sum(len(v) for v in result.failed.values())
        if failed:
            lines.append(f"{plural(failed, 'file')} could not be deleted (listed in the clean)")
    if result.finished:
        lines.append(f"finished {plural(len(result.finished), 'pending clean')} first")
    if result.rolled_back:
        n = plural(len(result.rolled_back), "pending write")
        lines.append(f"rolled back {n} whose heartbeat expired first")
    cols = [Column("partition", "partition", lambda v: v or "(none)"), Column("file", "file")]
    emit(output, doc, [View(lines=lines, columns=cols if rows else (), rows=rows)])


@table_command(
    cli,
    "archive",
    option_option,
    dry_run_option,
)
def archive(
    path: str, option_kv: tuple[str, ...], dry_run: bool, storage_kv: tuple[str, ...], output: str
) -> None:
    """Move the oldest instants to the archived timeline once past hoodie.keep.max.commits
    (hr.archive), under the writer lock (in one short turn beside live writers with --option
    hoodie.write.concurrency.mode=optimistic_concurrency_control); with --dry-run only list
    them."""
    fn = lazy_feature("hoodie_ray.job.maintenance", "archive", "archival")
    options = parse_key_values(option_kv, "--option") or None
    load_table(path, storage_kv)  # a bad path fails here, with the usual message
    result = fn(path, options, storage_options=storage_options_from(storage_kv), dry_run=dry_run)
    rows = [{"instant": ts, "action": action} for ts, action in result.instants]
    doc = {"table": table_doc(path, storage_kv), "instants": rows, "dry_run": dry_run}
    if not rows:
        doc["reason"] = result.reason
        line = f"nothing to archive: {result.reason}"
    else:
        span = f"{rows[0]['instant']} .. {rows[-1]['instant']}"
        verb = "would be archived (dry run)" if dry_run else "archived"
        line = f"{plural(len(rows), 'instant')} {verb}: {span}"
    cols = [Column("instant", "instant"), Column("action", "action")]
    emit(output, doc, [View(lines=[line], columns=cols if rows else (), rows=rows)])


# -- upgrade -------------------------------------------------------------------------------------


@table_command(
    cli,
    "upgrade",
    click.option(
        "--to",
        "to_version",
        type=int,
        default=None,
        help="Target table version (8 or 9; default 8).",
    ),
)
def upgrade(path: str, to_version: int | None, storage_kv: tuple[str, ...], output: str) -> None:
    """Upgrade a table to a newer table version (hr.upgrade)."""
    fn = lazy_feature("hoodie_ray.upgrade_table", "upgrade", "table upgrade")
    params = inspect.signature(fn).parameters
    storage = storage_options_from(storage_kv)
    kwargs: dict[str, Any] = {}
    if to_version is not None:
        name = next(
            (n for n in ("to_version", "target_version", "version", "to") if n in params), None
        )
        if name is None:
            raise CliError("this version of hr.upgrade takes no target version; omit --to")
        kwargs[name] = to_version
    wanted = [("storage_options", storage, "takes no storage options")]
    kwargs.update(_optional_kwargs("hr.upgrade", params, wanted))
    before = load_table(path, storage_kv).table_config.table_version
    show_bar = "on_progress" in params and sys.stderr.isatty()
    with _slice_progress(show_bar, "upgrading (timeline, metadata table)") as on_progress:
        if on_progress is not None:
            kwargs["on_progress"] = on_progress
        result = fn(path, **kwargs)
    after = load_table(path, storage_kv).table_config.table_version
    if result is not None and not isinstance(result, (str, int, float, bool)):
        result = str(result)
    doc = {
        "table": table_doc(path, storage_kv),
        "from_version": before,
        "to_version": after,
        "result": result,
    }
    line = (
        f"upgraded from table version {before} to {after}"
        if after != before
        else f"table version {after}: nothing to upgrade"
    )
    emit(output, doc, [View(lines=[line])])


# -- write ---------------------------------------------------------------------------------------


# -- savepoints and restore ------------------------------------------------------------------------


@cli.group("savepoint")
def savepoint_group() -> None:
    """Savepoints: commits the cleaner and archival keep, to restore the table to."""


@table_command(
    savepoint_group,
    "create",
    click.option("--instant", default=None, help="The completed commit (default: the latest)."),
    click.option("--user", default="", help="Recorded as savepointedBy."),
    click.option("--comment", default="", help="Recorded as the savepoint's comments."),
    option_option,
)
def savepoint_create(
    path: str,
    instant: str | None,
    user: str,
    comment: str,
    option_kv: tuple[str, ...],
    storage_kv: tuple[str, ...],
    output: str,
) -> None:
    """Savepoint a completed commit (hr.savepoint), under the writer lock."""
    fn = lazy_feature("hoodie_ray.job.savepoint", "savepoint", "savepoints")
    load_table(path, storage_kv)  # a bad path fails here, with the usual message
    done = fn(
        path,
        instant,
        user=user,
        comments=comment,
        options=parse_key_values(option_kv, "--option") or None,
        storage_options=storage_options_from(storage_kv),
    )
    doc = {"table": table_doc(path, storage_kv), "instant": done}
    emit(output, doc, [View(lines=[f"savepoint {done} created"])])


@table_command(savepoint_group, "show")
def savepoint_show(path: str, storage_kv: tuple[str, ...], output: str) -> None:
    """The table's savepoints, oldest first."""
    fn = lazy_feature("hoodie_ray.job.savepoint", "savepoints", "savepoints")
    load_table(path, storage_kv)
    rows = [
        dataclasses.asdict(s) for s in fn(path, storage_options=storage_options_from(storage_kv))
    ]
    doc = {"table": table_doc(path, storage_kv), "savepoints": rows}
    cols = [
        Column("instant", "instant"),
        Column("savepointed_by", "by"),
        Column("savepointed_at", "at (epoch ms)"),
        Column("files", "files"),
        Column("comments", "comments"),
    ]
    emit(output, doc, [View(path, cols, rows, empty="no savepoints")])


@table_command(savepoint_group, "delete", click.argument("instant"), option_option)
def savepoint_delete(
    path: str, instant: str, option_kv: tuple[str, ...], storage_kv: tuple[str, ...], output: str
) -> None:
    """Delete savepoint INSTANT: the next clean may delete the files it held."""
    fn = lazy_feature("hoodie_ray.job.savepoint", "delete_savepoint", "savepoints")
    load_table(path, storage_kv)
    fn(
        path,
        instant,
        options=parse_key_values(option_kv, "--option") or None,
        storage_options=storage_options_from(storage_kv),
    )
    doc = {"table": table_doc(path, storage_kv), "instant": instant}
    emit(output, doc, [View(lines=[f"savepoint {instant} deleted"])])


@table_command(cli, "restore", click.argument("instant"), option_option)
def restore(
    path: str, instant: str, option_kv: tuple[str, ...], storage_kv: tuple[str, ...], output: str
) -> None:
    """Restore the table to savepoint INSTANT (hr.restore): every write after it rolled back,
    the metadata table rebuilt, under the writer lock. Run it again to finish one that died."""
    fn = lazy_feature("hoodie_ray.job.savepoint", "restore", "restore")
    load_table(path, storage_kv)
    result = fn(
        path,
        instant,
        options=parse_key_values(option_kv, "--option") or None,
        storage_options=storage_options_from(storage_kv),
    )
    doc = {"table": table_doc(path, storage_kv), **dataclasses.asdict(result)}
    line = (
        f"restore {result.instant}: back to savepoint {instant}, "
        f"{plural(len(result.rolled_back), 'instant')} rolled back"
    )
    emit(output, doc, [View(lines=[line])])


def table_data_schema(path: str, storage: dict[str, Any] | None) -> Any:
    """The Arrow data schema of the table at ``path`` (latest commit's), or None if no table."""
    from hoodie_ray.avro.schema import avro_to_arrow_schema
    from hoodie_ray.exceptions import HoodieTableNotFoundError
    from hoodie_ray.table import HoodieTable
    from hoodie_ray.timeline.metadata import HoodieCommitMetadata

    try:
        t = HoodieTable.load(path, storage)
    except HoodieTableNotFoundError:
        return None
    tl = t.active_timeline
    for inst in reversed(tl.completed_commits()):
        meta = HoodieCommitMetadata.from_bytes(tl.read_details(inst), tl.layout_version, inst)
        if meta.schema:
            return avro_to_arrow_schema(meta.schema)
    create = t.table_config.create_schema
    return avro_to_arrow_schema(create) if create else None


def _input_batches(
    input_path: str, batch_rows: int, schema: Any = None
) -> tuple[int, Iterator[Any]]:
    """``(row count, iterator of pyarrow Tables)`` of a Parquet or CSV file.

    CSV has no types: columns the table already has are parsed as the table's types
    (``schema``), the others as pyarrow infers them.
    """
    import pyarrow as pa

    p = Path(input_path)
    if not p.exists():
        raise CliError(f"input file not found: {input_path}")
    if not p.is_file():
        kind = "a directory" if p.is_dir() else "not a regular file (a device, FIFO or socket)"
        raise CliError(f"input {input_path} is {kind}: give a .parquet or .csv file")
    name = p.name.lower()
    try:
        if name.endswith((".parquet", ".pq", ".parq")):
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(str(p))

            def parquet_batches() -> Iterator[pa.Table]:
                for b in pf.iter_batches(batch_size=batch_rows):
                    yield pa.Table.from_batches([b])

            return pf.metadata.num_rows, parquet_batches()
        if name.endswith(_CSV_SUFFIXES):
            import pyarrow.csv as pacsv

            convert = pacsv.ConvertOptions(
                column_types={f.name: f.type for f in schema} if schema is not None else None
            )
            table = pacsv.read_csv(str(p), convert_options=convert)

            def csv_batches() -> Iterator[pa.Table]:
                for off in range(0, table.num_rows, batch_rows):
                    yield table.slice(off, batch_rows)

            return table.num_rows, csv_batches()
    except (pa.ArrowException, OSError) as e:
        raise CliError(f"cannot read input {input_path}: {_first_line(e)}") from None
    raise CliError(f"unsupported input {input_path}: use a .parquet or .csv file")


@contextlib.contextmanager
def _progress(enabled: bool, total: int, label: str) -> Iterator[Callable[[int], None]]:
    """A click progress bar on stderr when it is a terminal; yields ``advance(rows)``.

    Off a terminal nothing is printed (click would print the label alone), so a failed
    write still prints exactly one error line.
    """
    if not enabled or total <= 0 or not _isatty(sys.stderr):
        yield lambda n: None
        return
    bar: Any = click.progressbar(
        length=total, label=label, file=sys.stderr, show_pos=True, show_percent=True
    )
    with bar:
        yield bar.update


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _write_batches(
    engine: str,
    path: str,
    options: dict[str, str],
    storage: dict[str, Any] | None,
    batches: Iterator[Any],
    advance: Callable[[int], None],
) -> Any:
    """One commit of ``batches``: streamed to the actor topology (``ray``), or gathered and
    written by this process (``local``); ``advance(rows)`` after each batch."""
    from hoodie_ray.job.coordinator import CommitResult

    if engine == "ray":
        from hoodie_ray.ray.stream import HoodieStreamWriter

        with HoodieStreamWriter(path, options, storage_options=storage) as w:
            for batch in batches:
                w.write(batch)
                advance(batch.num_rows)
            w.checkpoint()
            return w.last_result or CommitResult(None)
    import pyarrow as pa

    from hoodie_ray.api import write as hr_write

    parts = []
    for batch in batches:
        parts.append(batch)
        advance(batch.num_rows)
    if not parts:
        return CommitResult(None)
    table = pa.concat_tables(parts)
    return hr_write(table, path, options, storage_options=storage, engine="local")


@table_command(
    cli,
    "write",
    click.option(
        "--input",
        "-i",
        "input_path",
        required=True,
        metavar="FILE",
        help="A .parquet or .csv file.",
    ),
    click.option(
        "--option",
        "option_kv",
        multiple=True,
        metavar="KEY=VALUE",
        help="A Hudi option (hoodie.* or short key); repeatable.",
    ),
    click.option(
        "--engine",
        type=click.Choice(["ray", "local"]),
        default="ray",
        show_default=True,
        help="ray: the actor topology (RAY_ADDRESS or a local Ray); local: this process.",
    ),
    click.option(
        "--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr."
    ),
)
def write(
    path: str,
    input_path: str,
    option_kv: tuple[str, ...],
    engine: str,
    progress: bool,
    storage_kv: tuple[str, ...],
    output: str,
) -> None:
    """Write a Parquet or CSV file to the table at PATH as one commit."""
    from hoodie_ray.config.options import resolve_options

    options = parse_key_values(option_kv, "--option")
    batch_rows = resolve_options(options).write_batch_rows  # bad options fail before reading
    storage = storage_options_from(storage_kv)
    schema = (
        table_data_schema(path, storage) if input_path.lower().endswith(_CSV_SUFFIXES) else None
    )
    total, batches = _input_batches(input_path, batch_rows, schema)
    t0 = time.perf_counter()
    label = "writing" if engine == "ray" else "reading"
    with _progress(progress, total, label) as advance:
        result = _write_batches(engine, path, options, storage, batches, advance)
    seconds = time.perf_counter() - t0
    emit(output, *_write_report(path, storage_kv, input_path, engine, total, result, seconds))


def _write_report(
    path: str,
    storage_kv: Sequence[str],
    input_path: str,
    engine: str,
    total: int,
    result: Any,
    seconds: float,
) -> tuple[dict[str, Any], list[View]]:
    """What ``write`` prints of its commit: the JSON document and the view."""
    doc = {
        "table": table_doc(path, storage_kv),
        "input": input_path,
        "engine": engine,
        "rows": total,
        "instant": result.instant,
        "inserts": result.num_inserts,
        "updates": result.num_updates,
        "deletes": result.num_deletes,
        "records_written": result.num_writes,
        "files": result.num_files,
        "seconds": round(seconds, 3),
        "rows_per_s": round(total / seconds, 1) if seconds > 0 else None,
    }
    services = getattr(result, "services", None)
    if services is not None:
        doc["table_services"] = dataclasses.asdict(services)
    title = (
        f"committed {result.instant} to {display_path(path)}"
        if result.instant
        else f"nothing written to {display_path(path)} (no rows)"
    )
    pairs = [
        ("input", f"{input_path} ({human_count(total)} rows)"),
        ("engine", engine),
        ("inserts", human_count(result.num_inserts)),
        ("updates", human_count(result.num_updates)),
        ("deletes", human_count(result.num_deletes)),
        ("files", human_count(result.num_files)),
        (
            "time",
            f"{seconds:.2f} s" + (f" ({rate(total, seconds)})" if rate(total, seconds) else ""),
        ),
    ]
    said = _services_said(services) if services is not None else []
    if said:
        pairs.append(("table services", "; ".join(said)))
    return doc, [kv_view(title, pairs)]


def _services_said(services: Any) -> list[str]:
    """The table services a commit set off, in words."""
    said = [f"compaction {c} committed" for c in services.compacted]
    if services.compaction_started:
        said.append(f"compaction {services.compaction_started} started in the background")
    if services.cleaned:
        said.append(f"clean {services.cleaned}")
    if services.archived:
        said.append(f"{plural(services.archived, 'instant')} archived")
    return said


# -- bench ---------------------------------------------------------------------------------------


def _import_benchmark(module: str) -> Any:
    """``benchmarks.<name>``: importable from a source checkout (the repository root)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not (e.name == module or module.startswith(e.name + ".")):
            raise
    root = Path(__file__).resolve().parents[2]
    if (root / Path(*module.split("."))).with_suffix(".py").is_file():
        sys.path.insert(0, str(root))
        for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
            del sys.modules[name]  # another distribution's "benchmarks" may shadow ours
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError:
            pass
    raise CliError(
        f"the benchmarks are not importable ({module}): run `hoodie-ray bench` from a source "
        "checkout of hoodie_ray (the benchmarks/ directory is not installed with the package)"
    )


def _split_json_result(text: str) -> tuple[Any, str]:
    """``(the last line that parses as a JSON object, the other lines)`` of captured output."""
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i].strip()
        if line.startswith("{"):
            try:
                return json.loads(line), "\n".join(lines[:i] + lines[i + 1 :]).strip()
            except ValueError:
                continue
    return None, text.strip()


@cli.group("dashboard")
def dashboard_group() -> None:
    """hoodie_ray's Grafana dashboard (rows/s, commits, checkpoint phases, buffers, index,
    compaction), beside Ray's own."""


@dashboard_group.command("install")
@click.option(
    "--session",
    "session_dir",
    default=None,
    help="A Ray session folder [default: the latest, /tmp/ray/session_latest].",
)
@output_option
def dashboard_install(session_dir: str | None, output: str) -> None:
    """Put the dashboard in the Ray session's Grafana dashboards folder, which Grafana loads
    when started with Ray's config (grafana-server --config <session>/metrics/grafana/grafana.ini)."""
    from hoodie_ray.ray.dashboard import install_dashboard

    path = install_dashboard(session_dir)
    doc = {"dashboard": str(path)}
    emit(output, doc, [View(lines=[f"installed {path}"])])


@dashboard_group.command("show")
def dashboard_show() -> None:
    """Print the dashboard's JSON (to import it into a Grafana provisioned another way)."""
    from hoodie_ray.ray.dashboard import dashboard_json

    click.echo(dashboard_json(), nl=False)


@cli.group("bench")
def bench_group() -> None:
    """Benchmarks (from a source checkout)."""


@bench_group.command(
    "mor-q1", context_settings={"ignore_unknown_options": True, "allow_extra_args": True}
)
@click.option("--quick", is_flag=True, help="The quick size (K=200K, N=600K, 6 commits).")
@click.option("--json", "as_json", is_flag=True, help="The benchmark's JSON object as last line.")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
@output_option
def bench_mor_q1(quick: bool, as_json: bool, extra: tuple[str, ...], output: str) -> int:
    """Run the mor-q1 benchmark (benchmarks/mor_q1.py); more arguments pass through."""
    mod = _import_benchmark("benchmarks.mor_q1")
    argv = [*(["--quick"] if quick else []), *extra]
    if output != "json":
        rc = int(mod.main([*argv, *(["--json"] if as_json else [])]) or 0)
        return rc
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = int(mod.main([*argv, "--json"]) or 0)
    result, report = _split_json_result(buf.getvalue())
    if report:
        click.echo(report, err=True)  # the readable report is kept, off stdout
    if result is None:
        raise CliError(f"the benchmark printed no JSON result (exit status {rc})")
    click.echo(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    return rc


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    first = text.splitlines()[0].strip() if text else ""
    return first or type(e).__name__


_RST_ROLE = re.compile(r"(?::[a-z]+)+:`~?(?:[\w.]+\.)?([^`<]+?)(?:\s*<[^`>]*>)?`")


def plain_help(text: str | None) -> str | None:
    """A docstring as a terminal shows it: reST roles and double backticks taken out
    (``:func:`hoodie_ray.api.write``` -> ``write``)."""
    if text is None:
        return None
    return _RST_ROLE.sub(r"\1", text).replace("``", "")


def _plain_command_help(cmd: click.Command) -> None:
    cmd.help = plain_help(cmd.help)
    cmd.short_help = plain_help(cmd.short_help)
    for param in cmd.params:
        if isinstance(param, click.Option):
            param.help = plain_help(param.help)
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _plain_command_help(sub)


_plain_command_help(cli)
