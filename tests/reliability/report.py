"""Figures of the reliability suite (crash points survived, faults injected, inputs tried...).

Each test calls :func:`record` with what it did; with ``HOODIE_RAY_REPORT=<file>`` set, the
figures are appended to that file as JSON lines (docs/RELIABILITY.md is written from them),
and they are always printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any


def record(test: str, **figures: Any) -> None:
    line = {"test": test, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **figures}
    text = json.dumps(line, sort_keys=True, default=str)
    print(f"\nRELIABILITY {text}")
    path = os.environ.get("HOODIE_RAY_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")
