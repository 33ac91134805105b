"""HFile v3 reading and writing, as Apache Hudi's metadata table uses it (spec: metadata-table.md).

An HFile (spec section 2) is a sequence of blocks, each a 33-byte header (8-byte magic, sizes,
previous-block offset, checksum type, bytes per checksum, data size) followed by a payload,
compressed as one unit (GZ or NONE), and 4 checksum bytes per started 16 KiB (2.2). DATA blocks
hold HBase KeyValues in ascending unsigned-byte order of their row keys (2.3); META blocks hold
raw named bytes such as the ``bloomFilter`` of MDT base files (2.5). The load-on-open section
holds the root data index (one ``offset | size | key`` entry per data block, with leaf and
intermediate levels in HBase-written files), the meta index (2.4) and the FILE_INFO block, a
``PBUF``-prefixed protobuf map (2.6); a fixed 4096-byte trailer with a protobuf ``TrailerProto``
and the version bytes ends the file (2.7). Hudi 1.x writes the "native" ``hudi-io`` dialect (row-only
index keys, NULL checksums), older Hudi the HBase dialect (full KeyValue index keys, CRC32C
checksums); :class:`HFileReader` reads both, :func:`write_hfile` writes the native one (2.8) and
:func:`write_hbase_hfile` the HBase one (Hudi 0.x's metadata tables, table version 6;
:func:`write_hfile_arrays` / :func:`write_hbase_hfile_arrays` take the entries column-wise).
The MDT keeps such files as base files (``*.hfile``) and as the content of HFile data blocks in
its log files (4.2). Base files also carry a ``bloomFilter`` META block of their keys
(:func:`build_bloom_filter`, :func:`bloom_might_contain`; Hudi's ``DYNAMIC_V0`` filter, 2.5).
"""

from __future__ import annotations

from hoodie_ray.hfile.bloom import (
    BLOOM_FILTER_META_BLOCK,
    BLOOM_FILTER_TYPE_CODE,
    bloom_might_contain,
    build_bloom_filter,
)
from hoodie_ray.hfile.reader import HFileReader, HFileTrailer
from hoodie_ray.hfile.writer import (
    write_hbase_hfile,
    write_hbase_hfile_arrays,
    write_hfile,
    write_hfile_arrays,
)

__all__ = [
    "BLOOM_FILTER_META_BLOCK",
    "BLOOM_FILTER_TYPE_CODE",
    "HFileReader",
    "HFileTrailer",
    "bloom_might_contain",
    "build_bloom_filter",
    "write_hbase_hfile",
    "write_hbase_hfile_arrays",
    "write_hfile",
    "write_hfile_arrays",
]
