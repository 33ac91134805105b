"""Several writers and the table schema: what a commit records when another writer may have
changed the schema since this one last read it.

Hudi's RFC-82 (Java's ``SimpleSchemaConflictResolutionStrategy``), checked at commit under
the table lock, with three schemas: ``seen``, the table's schema when this writer last
read it (its open, or its own last commit); ``ours``, the schema this commit writes;
``now``, the schema of the latest write completed on the table. "Latest" is by completion
time, and compactions and clusterings (which carry whatever schema they were planned with)
do not count, for ``seen`` as for ``now``: one order for both
(:meth:`~hoodie_ray.table.HoodieTable.latest_writes`, which a writer's open reads too):

* nobody else changed it (``now`` is ``seen``), or they changed it to ours: record ours;
* only the other writer changed it (``ours`` is ``seen``): record theirs -- this commit's
  rows lack their new columns, which readers fill with nulls; recording ours would hide
  those columns from every reader until the next commit that writes them;
* both changed it, differently: a conflict (:class:`~hoodie_ray.exceptions.
  HoodieSchemaEvolutionConflictError`), the instant rolled back; a retry writes both changes
  (:func:`merged_schema`).

Schemas are compared as their Avro round trip gives them (what a commit's
``extraMetadata.schema`` reads back as), field names and types in order.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum

import pyarrow as pa

from hoodie_ray.avro.schema import arrow_to_avro_schema, avro_to_arrow_schema
from hoodie_ray.exceptions import HoodieError
from hoodie_ray.meta import META_PREFIX
from hoodie_ray.write.schema_evolution import EvolutionPolicy, evolve_schema


class SchemaChoice(Enum):
    """What :func:`choose_schema` decided a commit records."""

    OURS = "ours"
    THEIRS = "theirs"
    CONFLICT = "conflict"


def canonical(data_schema: pa.Schema, name: str) -> pa.Schema:
    """A data schema (no meta fields) as a commit's Avro schema reads it back."""
    return avro_to_arrow_schema(arrow_to_avro_schema(data_schema, name, with_meta=False))


def same_fields(a: pa.Schema, b: pa.Schema) -> bool:
    """The same field names and types, in order (nullability and metadata aside)."""
    return [(f.name, f.type) for f in a] == [(f.name, f.type) for f in b]


def data_schema_of(avro: str) -> pa.Schema | None:
    """The data fields of a commit's ``extraMetadata.schema`` (None: one that does not parse,
    as an old writer's ``"null"``: the next older write decides)."""
    try:
        schema = avro_to_arrow_schema(avro)
    except HoodieError:
        return None
    return pa.schema([f for f in schema if not f.name.startswith(META_PREFIX)])


def choose_schema(seen: pa.Schema | None, ours: pa.Schema, now: pa.Schema | None) -> SchemaChoice:
    """Which schema a commit records (the module's rules; canonical schemas). ``seen`` None:
    the table had no schema when this writer read it, so any other one there now is a
    concurrent change (Java's case 3: a conflict unless it is ours)."""
    if now is None or same_fields(now, ours):
        return SchemaChoice.OURS
    if seen is not None and same_fields(now, seen):
        return SchemaChoice.OURS
    if seen is not None and same_fields(ours, seen):
        return SchemaChoice.THEIRS
    return SchemaChoice.CONFLICT


def merged_schema(base: pa.Schema, extra: pa.Schema, fixed_fields: Collection[str]) -> pa.Schema:
    """Both schemas' fields: ``base`` evolved by ``extra`` as a write evolves the table
    schema (its fields, then ``extra``'s new ones; types widened where ``extra``'s is wider;
    ``fixed_fields`` keep their type); both canonical. Raises :class:`~hoodie_ray.exceptions.
    HoodieSchemaError` where a type of one holds no value of the other's."""
    policy = EvolutionPolicy(True, set_null_for_missing=True, fixed_fields=frozenset(fixed_fields))
    return evolve_schema(base, extra, policy)


def with_fields_of(schema: pa.Schema, kept: pa.Schema) -> pa.Schema:
    """``schema`` and, after its fields, those of ``kept`` it lacks (by name; ``schema``'s
    types win): what a writer evolving from an older view of the table must not drop."""
    missing = [f for f in kept if f.name not in set(schema.names)]
    return schema if not missing else pa.schema([*schema, *missing])


def describe_change(old: pa.Schema | None, new: pa.Schema) -> str:
    """What ``new`` changes against ``old``: added fields, and fields whose type changed."""
    if old is None:
        return f"sets it to ({', '.join(new.names)})"
    before = {f.name: f.type for f in old}
    added = [f.name for f in new if f.name not in before]
    changed = [
        f"{f.name} {before[f.name]} -> {f.type}"
        for f in new
        if f.name in before and before[f.name] != f.type
    ]
    dropped = [n for n in old.names if n not in set(new.names)]
    parts = []
    if added:
        parts.append("adds " + ", ".join(added))
    if changed:
        parts.append("changes " + ", ".join(changed))
    if dropped:
        parts.append("drops " + ", ".join(dropped))
    return "; ".join(parts) or "reorders its fields"
