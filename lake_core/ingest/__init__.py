"""Ingest: turn input files (NDJSON, JSON, CSV, Parquet, Arrow) into normalized Arrow tables,
and fold their schemas into a pool's accumulated schema.

- :mod:`.formats` names the formats and detects them;
- :mod:`.readers` reads each format into a normalized table;
- :mod:`.types` defines the normalized types and ISO 8601 text timestamps;
- :mod:`.schema` unifies schemas and conforms tables to a pool's schema.
"""

from lake_core.ingest.formats import FORMATS, detect_format
from lake_core.ingest.readers import read_input
from lake_core.ingest.schema import conform_to, unify_schema
from lake_core.ingest.types import normalize_table, normalize_type

__all__ = [
    "FORMATS",
    "conform_to",
    "detect_format",
    "normalize_table",
    "normalize_type",
    "read_input",
    "unify_schema",
]
