"""What an index lookup costs against the scan it would replace: the planner's choice for
``=`` / ``IN`` filters that an index of the metadata table can answer.

A lookup reads metadata-table HFile data blocks (each inflated from gzip and walked entry by
entry) and then the data file groups the index names; the scan reads every file group the
other prunings left. Both are estimated in bytes of data files before the lookup reads any
block (its block indexes tell which blocks it needs, and their size on disk):

* the lookup: ``INDEX_BYTE_WEIGHT`` x the index blocks' bytes, plus the share of the scan's
  bytes that the expected number of file groups holds: ``k`` keys spread uniformly over ``n``
  file groups touch ``n (1 - (1 - 1/n)^k)`` of them (keys that are not in the table, or that
  cluster, touch fewer: the estimate errs toward the scan);
* the scan: each file group's bytes plus ``SLICE_OPEN_BYTES`` (opening a file and reading its
  footer cost the same whatever its rows).

The lookup is taken when its estimate is below the scan's. Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Reading one byte (on disk) of a metadata-table HFile data block costs about this many
#: bytes of a data file read: inflating gzip to ~8x the bytes and walking every entry of the
#: block, against Parquet's decode of the columns read (benchmarks/lookup.py, RESULTS.md).
INDEX_BYTE_WEIGHT = 4.0
#: What opening one more data file slice costs, in bytes of reading (its footer, the file's
#: open and its share of the read's planning).
SLICE_OPEN_BYTES = 256 * 1024


def expected_file_groups(keys: int, file_groups: int) -> float:
    """How many of ``file_groups`` hold at least one of ``keys`` keys spread uniformly."""
    if file_groups <= 0 or keys <= 0:
        return 0.0
    return file_groups * (1.0 - (1.0 - 1.0 / file_groups) ** keys)


@dataclass(frozen=True)
class LookupCost:
    """One index lookup's estimate against the scan (see the module docstring)."""

    index: str
    keys: int
    index_blocks: int
    index_bytes: int
    file_groups: int
    scan_bytes: int

    @classmethod
    def of(
        cls, index: str, keys: int, blocks: tuple[int, int], slice_bytes: Sequence[int]
    ) -> LookupCost:
        """The estimate of looking ``keys`` keys up in ``index`` through ``blocks`` (count,
        bytes on disk) against scanning slices of ``slice_bytes`` bytes."""
        scan = sum(slice_bytes) + SLICE_OPEN_BYTES * len(slice_bytes)
        return cls(index, keys, blocks[0], blocks[1], len(slice_bytes), scan)

    @property
    def expected_file_groups(self) -> float:
        return expected_file_groups(self.keys, self.file_groups)

    @property
    def lookup_bytes(self) -> float:
        share = self.expected_file_groups / self.file_groups if self.file_groups else 0.0
        return INDEX_BYTE_WEIGHT * self.index_bytes + share * self.scan_bytes

    @property
    def use_index(self) -> bool:
        return self.lookup_bytes < self.scan_bytes

    def describe(self) -> str:
        """One line: what each side is estimated to read, and which was taken."""
        chosen = "the index" if self.use_index else "the scan"
        return (
            f"{self.index}: {self.index_blocks} index block(s) ({_mb(self.index_bytes)}) and "
            f"~{self.expected_file_groups:.0f} of {self.file_groups} file groups for "
            f"{self.keys} key(s) (~{_mb(self.lookup_bytes)} of reading) against a scan of "
            f"{self.file_groups} file groups (~{_mb(self.scan_bytes)}): {chosen} is cheaper"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "keys": self.keys,
            "index_blocks": self.index_blocks,
            "index_bytes": self.index_bytes,
            "expected_file_groups": round(self.expected_file_groups, 1),
            "file_groups": self.file_groups,
            "lookup_bytes": round(self.lookup_bytes),
            "scan_bytes": self.scan_bytes,
            "use_index": self.use_index,
            "why": self.describe(),
        }


def _mb(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"
