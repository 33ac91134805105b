"""The ``hoodie-ray`` command line (installed by the package; ``python -m hoodie_ray.cli`` too).

::

    hoodie-ray commits show PATH [--limit N]
    hoodie-ray compactions show PATH
    hoodie-ray compactions drop PATH INSTANT
    hoodie-ray fsview PATH [--partition P]
    hoodie-ray timeline PATH
    hoodie-ray compact PATH [--option key=value ...]
    hoodie-ray write PATH --input FILE.parquet|FILE.csv --option key=value ... [--engine ray|local]
    hoodie-ray upgrade PATH [--to VERSION]
    hoodie-ray bench mor-q1 [--quick] [--json]

Every subcommand takes ``--output table|json``. Object stores: ``--storage-option KEY=VALUE``
or ``$HOODIE_RAY_STORAGE_OPTIONS`` (a JSON object); credentials are never printed.

Errors (a path with no table, bad options, any :class:`~hoodie_ray.exceptions.HoodieError`)
print one line, ``hoodie-ray: error: <message>``, on stderr and exit with status 1; usage
mistakes print click's usage text and exit with status 2. With ``--output json`` both are one
JSON document on stderr instead, ``{"error": {"type": ..., "message": ...}}``. ``--debug`` (or
``HOODIE_RAY_DEBUG=1``) adds the traceback.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

import click

from hoodie_ray.cli.commands import CliError, cli

__all__ = ["CliError", "cli", "error_message", "main"]

PROG = "hoodie-ray"


def _unwrap(e: BaseException) -> BaseException:
    """The error a Ray ``RayTaskError`` carries, else ``e``."""
    seen = 0
    while seen < 5:
        cause = getattr(e, "cause", None)
        if (
            isinstance(cause, BaseException)
            and cause is not e
            and type(e).__name__.startswith("RayTaskError")
        ):
            e = cause
            seen += 1
            continue
        break
    return e


def error_message(e: BaseException) -> str:
    """One line describing ``e``: a HoodieError's message, else ``Type: first line``."""
    from hoodie_ray.exceptions import HoodieError

    e = _unwrap(e)
    if isinstance(e, (HoodieError, CliError)):
        text = getattr(e, "message", None) or str(e)
        prefix = ""
    elif isinstance(e, FileNotFoundError) and e.filename:
        return f"file not found: {e.filename}"
    else:
        text = str(e)
        prefix = f"{type(e).__name__}: "
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else type(e).__name__
    return prefix + first if prefix and first != type(e).__name__ else first


def _json_requested(argv: Sequence[str]) -> bool:
    """``--output json`` / ``-o json`` (any spelling click accepts) among ``argv``."""
    for i, a in enumerate(argv):
        if a in ("--output=json", "-ojson"):
            return True
        if a in ("--output", "-o") and i + 1 < len(argv) and argv[i + 1] == "json":
            return True
    return False


def _report_error(argv: Sequence[str], e: BaseException, message: str | None = None) -> None:
    """One line on stderr: ``hoodie-ray: error: ...``, or a JSON document under ``-o json``."""
    text = message if message is not None else error_message(e)
    if _json_requested(argv):
        import json

        kind = type(_unwrap(e)).__name__
        click.echo(json.dumps({"error": {"type": kind, "message": text}}), err=True)
    else:
        click.echo(f"{PROG}: error: {text}", err=True)


def _debug_requested(argv: Sequence[str]) -> bool:
    return "--debug" in argv or os.environ.get("HOODIE_RAY_DEBUG", "") not in ("", "0", "false")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status.

    Never lets a traceback out unless ``--debug`` is given: errors print one line on stderr.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=args, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo(f"{PROG}: aborted", err=True)
        return 130
    except click.ClickException as e:
        if _json_requested(args):
            _report_error(args, e, e.format_message())
        else:
            e.show()
        return e.exit_code
    except click.exceptions.Exit as e:  # pragma: no cover - click returns it instead
        return int(e.exit_code or 0)
    except KeyboardInterrupt:
        click.echo(f"{PROG}: interrupted", err=True)
        return 130
    except BrokenPipeError:
        # stdout closed early (| head): quiet, as other CLIs do
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - avoid a second error at exit
        except OSError:
            pass
        return 1
    except Exception as e:
        if _debug_requested(args):
            traceback.print_exc()
        _report_error(args, e)
        return 1
    if isinstance(rv, bool):
        return 0
    if isinstance(rv, int):
        return rv
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
