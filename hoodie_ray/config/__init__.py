"""Options registry, resolved write config, and the table config (hoodie.properties)."""

from hoodie_ray.config.options import OPTIONS, ConfigOption, WriteConfig, resolve_options
from hoodie_ray.config.table_config import HoodieTableConfig, MergeMode

__all__ = [
    "OPTIONS",
    "ConfigOption",
    "HoodieTableConfig",
    "MergeMode",
    "WriteConfig",
    "resolve_options",
]
