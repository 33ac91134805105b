"""The Ray layer of hoodie_ray: runtime setup (:mod:`.runtime`), actors, the stream writer.

Ray is imported by the modules of this package only, never by the pure core.
"""
