"""The metadata table (``.hoodie/metadata``), its reading side: layout, records, column
statistics and the reader.

Below :mod:`hoodie_ray.table`, which lists files through the reader; the writing side, which
needs the table handle, is :mod:`hoodie_ray.metadata_writer`.
"""
