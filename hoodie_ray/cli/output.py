"""Rendering for the ``hoodie-ray`` CLI: aligned text tables, human sizes, one JSON document.

Every subcommand builds one plain document (dicts, lists, strings, numbers) and hands it to
:func:`emit` with the table views of it; ``--output json`` prints the document, ``--output
table`` the tables. Sizes are bytes in JSON and human units (``1.5 MB``) in tables.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click

__all__ = [
    "Column",
    "View",
    "display_path",
    "emit",
    "human_count",
    "human_size",
    "instant_to_iso",
    "render_table",
]

_UNITS = ("KB", "MB", "GB", "TB", "PB")


def human_size(n: int | float | None) -> str:
    """Bytes in human units, 1024-based: ``512 B``, ``1.5 KB``, ``12.3 MB``, ``2.0 GB``; ``-`` for None."""
    if n is None:
        return "-"
    if not isinstance(n, (int, float)) or (isinstance(n, float) and not math.isfinite(n)):
        return str(n)
    if abs(n) < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in _UNITS:
        value /= 1024.0
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    return f"{value:.1f} {_UNITS[-1]}"  # pragma: no cover - the loop always returns


def human_count(n: int | None) -> str:
    """An integer with thousands separators (``1,234,567``); ``-`` for None."""
    return "-" if n is None else f"{n:,}"


def plural(n: int, noun: str) -> str:
    """``1 file slice``, ``2 file slices`` (nouns that take an ``s``)."""
    return f"{human_count(n)} {noun}{'' if n == 1 else 's'}"


def rate(count: int, seconds: float) -> str | None:
    """``12,345 rows/s``, or None when too few rows or too little time make it meaningless."""
    if count < 1000 or seconds <= 0:
        return None
    return f"{count / seconds:,.0f} rows/s"


def instant_to_iso(ts: str | None) -> str | None:
    """``yyyyMMddHHmmssSSS`` as ``yyyy-MM-dd HH:mm:ss.SSS`` (UTC); None if it is not a time."""
    if not ts or not ts.isdigit() or len(ts) not in (14, 17):
        return None
    try:
        base = _dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    millis = ts[14:17] if len(ts) == 17 else "000"
    return base.strftime("%Y-%m-%d %H:%M:%S") + f".{millis}"


def display_path(path: str) -> str:
    """``path`` safe to print: user info (``user:secret@``) of a URL is dropped."""
    try:
        parts = urlsplit(path)
    except ValueError:
        return path
    if parts.scheme and "@" in parts.netloc:
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return path


@dataclass(frozen=True)
class Column:
    """One column of a text table.

    Args:
        key: the row dict's key.
        header: the column title.
        fmt: value -> text (default ``str``; None prints as ``-``).
        align: ``"<"`` left or ``">"`` right (numbers).
    """

    key: str
    header: str
    fmt: Callable[[Any], str] | None = None
    align: str = "<"

    def cell(self, row: dict[str, Any]) -> str:
        v = row.get(self.key)
        if self.fmt is not None:
            return self.fmt(v)
        return "-" if v is None else str(v)


def size_col(key: str, header: str) -> Column:
    """A right-aligned column of byte counts in human units."""
    return Column(key, header, human_size, ">")


def count_col(key: str, header: str) -> Column:
    """A right-aligned column of integers."""
    return Column(key, header, human_count, ">")


def render_table(columns: Sequence[Column], rows: Sequence[dict[str, Any]]) -> str:
    """Rows as an aligned text table: a header, a rule, one line per row (no trailing spaces)."""
    cells = [[c.header for c in columns]] + [[c.cell(r) for c in columns] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]

    def line(values: list[str]) -> str:
        out = []
        for c, v, w in zip(columns, values, widths, strict=True):
            out.append(v.rjust(w) if c.align == ">" else v.ljust(w))
        return "  ".join(out).rstrip()

    text = [line(cells[0]), "  ".join("-" * w for w in widths)]
    text += [line(r) for r in cells[1:]]
    return "\n".join(text)


@dataclass(frozen=True)
class View:
    """One block of the text output: a title line, a table (or ``empty`` text), a footer."""

    title: str | None = None
    columns: Sequence[Column] = ()
    rows: Sequence[dict[str, Any]] = ()
    empty: str = "(none)"
    footer: str | None = None
    lines: Sequence[str] = ()

    def render(self) -> str:
        parts: list[str] = []
        if self.title:
            parts.append(self.title)
        parts.extend(self.lines)
        if self.columns:
            parts.append(render_table(self.columns, self.rows) if self.rows else self.empty)
        if self.footer:
            parts.append(self.footer)
        return "\n".join(parts)


def to_json(doc: Any) -> str:
    """One JSON document (2-space indent, UTF-8 characters kept, keys in insertion order)."""
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str)


def emit(output: str, doc: Any, views: Sequence[View]) -> None:
    """Print ``doc`` as JSON (``output == "json"``) or the text ``views`` (``"table"``)."""
    if output == "json":
        click.echo(to_json(doc))
        return
    click.echo("\n\n".join(v.render() for v in views))
