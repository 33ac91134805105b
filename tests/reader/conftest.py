"""Fixtures of the reader tests."""

from __future__ import annotations

import pyarrow as pa
import pytest

from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.reader.compiled_merger import CompiledLogRecordBuffer, new_log_record_buffer
from hoodie_ray.reader.merger import RECORD_KEY


@pytest.fixture
def needs_numba() -> None:
    """Skips a test of the compiled log merge where numba cannot run it."""
    schema = pa.schema([(RECORD_KEY, pa.string()), ("ts", pa.int64())])
    buf = new_log_record_buffer(schema, "ts", MergeMode.EVENT_TIME_ORDERING, compiled=True)
    if not isinstance(buf, CompiledLogRecordBuffer):
        pytest.skip("numba is not available")
