"""The timeline: instants, the active timeline, commit metadata and plans (pure Python)."""

from hoodie_ray.timeline.instant import (
    Action,
    Instant,
    InstantTimeGenerator,
    State,
    format_instant_time,
    instant_file_name,
    new_instant_time,
    parse_instant_file_name,
    parse_instant_time,
)
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieRuntimeStats, HoodieWriteStat
from hoodie_ray.timeline.timeline import ActiveTimeline

__all__ = [
    "Action",
    "ActiveTimeline",
    "HoodieCommitMetadata",
    "HoodieRuntimeStats",
    "HoodieWriteStat",
    "Instant",
    "InstantTimeGenerator",
    "State",
    "format_instant_time",
    "instant_file_name",
    "new_instant_time",
    "parse_instant_file_name",
    "parse_instant_time",
]
