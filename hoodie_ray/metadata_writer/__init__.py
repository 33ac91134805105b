"""Writing the metadata table (Hudi's ``HoodieBackedTableMetadataWriter``) and validating it.

Above the table handle and the readers, below the write operators: the writer opens the data
table through :class:`~hoodie_ray.table.HoodieTable`, while the reading side
(:mod:`hoodie_ray.metadata`) sits below the handle, which lists files through it.
"""
