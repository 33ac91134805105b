"""Every command of the README's CLI section runs as written, on a table the test writes at the
README's example path (``/data/trips`` becomes a temporary directory)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_ray as hr
from hoodie_ray.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"
# the README's own write options (its "Use" section)
OPTIONS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "uuid",
    "hoodie.datasource.write.partitionpath.field": "city",
    "precombine.field": "ts",
}
#: Commands too slow for the CI suite run under -m slow.
SLOW = ("bench",)
#: What a benchmark command gets added under -m slow: the quick size and no peers. A README
#: benchmark at its full size is a measurement, not a test (the scale variant's 20M keys take
#: ~10 min and ~11 GB of disk on 2 cores); at the quick size it still runs every step it names.
BENCH_AT_TEST_SIZE = ("--quick", "--skip-peers")
#: Suite time: commands that start a Ray write topology (~8 s of the CI suite each) run in CI
#: with ``--engine local`` added (the README's options and input, on the README's table), and
#: as written under -m slow; the CLI's write through Ray (the default engine) runs in CI in
#: tests/cli/test_cli.py::test_write_engine_ray.
RAY_WRITES = ("write",)


def readme_cli_commands() -> list[str]:
    """The ``hoodie-ray ...`` commands of the README's CLI section, continuation lines joined
    and comments dropped."""
    text = README.read_text()
    section = text.split("## CLI", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the README's CLI section has no bash block"
    joined = block.group(1).replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line.startswith("hoodie-ray "):
            out.append(line)
    return out


def _trips(ids: list[str], cities: list[str], ts: int) -> pa.Table:
    return pa.table({"uuid": ids, "city": cities, "ts": [ts] * len(ids), "fare": [1.5] * len(ids)})


@pytest.fixture
def readme_table(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "trips"
    hr.write(_trips(["a", "b", "c"], ["sf", "la", "sf"], 1), str(path), OPTIONS, engine="local")
    hr.write(_trips(["a", "d"], ["sf", "nyc"], 2), str(path), OPTIONS, engine="local")
    pq.write_table(_trips(["e", "f"], ["sf", "la"], 3), tmp_path / "trips.parquet")
    return path


COMMANDS = readme_cli_commands()


def _params() -> list:
    out = []
    for c in COMMANDS:
        verb, name = c.split()[1], " ".join(c.split())
        if verb in RAY_WRITES:
            out.append(pytest.param(c, (), marks=pytest.mark.slow, id=name))
            out.append(pytest.param(c, ("--engine", "local"), id=f"{name} --engine local"))
        else:
            marks = pytest.mark.slow if verb in SLOW else ()
            extra = BENCH_AT_TEST_SIZE if verb == "bench" else ()
            out.append(pytest.param(c, extra, marks=marks, id=name))
    return out


@pytest.mark.parametrize(("command", "extra"), _params())
def test_readme_command_runs(
    command: str,
    extra: tuple[str, ...],
    readme_table: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys,
) -> None:
    monkeypatch.chdir(readme_table.parent.parent)  # where trips.parquet is
    argv = [a.replace("/data/trips", str(readme_table)) for a in shlex.split(command)[1:]]
    argv += extra
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, f"{command!r} exited {rc}\n{out}\n{err}"
    assert "Traceback" not in err


def test_the_readme_lists_the_commands() -> None:
    assert len(COMMANDS) >= 8
    assert any("fsview" in c and "city=sf" in c for c in COMMANDS)
