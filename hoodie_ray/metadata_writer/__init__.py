"""Writing the metadata table (Hudi's ``HoodieBackedTableMetadataWriter``) and validating it.

Above the table handle and the readers, below the write operators: the writer opens the data
table through :class:`~hoodie_ray.table.HoodieTable`, while the reading side
(:mod:`hoodie_ray.metadata`) sits below the handle, which lists files through it.
"""

# The 0.x-layout writer registers itself with writer.py (which it builds on) when imported.
from hoodie_ray.metadata_writer import v6 as _v6  # noqa: F401
