"""The one exception root of hoodie_ray and its domain subclasses.

Every error a user can meet is a :class:`HoodieError`. The subclasses say what went wrong so
callers can tell a retryable commit conflict from an error that must not be retried blindly.
They pickle cleanly (only plain string arguments), so they survive Ray's ``RayTaskError``
wrapping: ``except hr.HoodieError`` works around a call that failed inside an actor.
"""

from __future__ import annotations


class HoodieError(Exception):
    """Base class of every error raised by hoodie_ray."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.message,))

    def __str__(self) -> str:
        return self.message


class HoodieOptionError(HoodieError):
    """An unknown, missing or invalid option (names the option)."""


class HoodieInputError(HoodieError):
    """Bad input data: a missing key field, a null record key, an incompatible schema..."""


class HoodieSchemaError(HoodieInputError):
    """A schema that cannot be written or that conflicts with the table's schema."""


class HoodieTableNotFoundError(HoodieError):
    """The path holds no Hudi table (no ``.hoodie/hoodie.properties``)."""


class HoodieUnsupportedError(HoodieError):
    """A table version, feature or value this implementation does not support."""


class HoodieCorruptedDataError(HoodieError):
    """A file on storage that cannot be decoded (names the file)."""


class HoodieIOError(HoodieError):
    """Storage failed to read, write, list or delete a file."""


class HoodiePathError(HoodieError):
    """A path that would resolve outside the table's base path, or is otherwise unsafe."""


class HoodieTimelineError(HoodieError):
    """An instant that is not on the timeline, or a timeline in an unexpected state."""


class HoodieQueryError(HoodieError):
    """Bad query arguments: unknown query type, begin after end, unknown column..."""


class HoodieCommitConflictError(HoodieError):
    """Another writer holds the table or committed a conflicting change; safe to retry."""


class HoodieWriteConflictError(HoodieCommitConflictError):
    """Under optimistic concurrency control, another writer committed (or a table service
    planned) changes to file groups this write touched after it started; this write's
    instant was rolled back and the table holds none of it. Safe to retry against the table
    as it is now (``hoodie.write.num.retries.on.conflict.failures``)."""


class HoodieSchemaEvolutionConflictError(HoodieWriteConflictError):
    """Under optimistic concurrency control, this write and another writer's commit since it
    last read the table both changed the table schema, differently (Java's
    ``HoodieSchemaEvolutionConflictException``); this write's instant was rolled back. A
    retry writes the union of both schemas."""


class HoodieCommitStateUnknownError(HoodieError):
    """The commit may or may not be on storage; do not retry blindly, reload the table first."""


class HoodieWriteError(HoodieError):
    """A write failed; the table was left as it was before the write."""


class HoodieCompactionError(HoodieError):
    """A compaction failed to plan, execute or commit."""
