"""The type catalog: for each PostgreSQL type OID, its Arrow type and its converters.

Public API (every representation choice is argued in ``docs/types.md``):

- :func:`arrow_type` — the Arrow type of a column (type OID + ``type_modifier``);
- :func:`convert_column` — a whole column of TupleData values (``kind`` + ``data`` arrays,
  mixed 'n'/'u'/'t'/'b' allowed) to a :class:`ConvertedColumn` (Arrow values + the
  ``special`` markers that say what a null value really was: ``infinity``, ``-infinity``,
  ``NaN``, an array's bounds; with ``refuse=True``, :data:`REFUSED` + the reason for a
  value that does not convert); :func:`convert_columns`, several columns at once;
- :func:`convert_value` — one value to a Python object (tests, slow paths);
- :class:`TypeRegistry` — enums, domains, user arrays and names learned from Type ('Y')
  messages or from the server catalog;
- :class:`Catalog` — the type catalog an archive carries (versions by LSN), read from a live
  server by :func:`catalog_from_connection`, from a file by :func:`read_catalog`; its
  :meth:`~Catalog.registry` is what decoding takes, :func:`registry_of` the registry that
  change rows carrying one are typed with.

The modules, lowest layer first:

- :mod:`.errors` — :class:`ConversionError`, :class:`Special`/:class:`Physical`;
- :mod:`.typeinfo` — what a family declares: :class:`TypeInfo`, a converter's parsers and
  Arrow type, its compiled converter's code;
- one module per family of types, each with its types, the parsers of their text and
  send forms, their Arrow types and what writes them back as the server does:
  :mod:`.integers` (bool, int2/4/8, oid, pg_lsn), :mod:`.floats` (float4/8, point),
  :mod:`.numeric` (numeric, money), :mod:`.text` (text-like, json, jsonb, uuid),
  :mod:`.bytea` (bytea, bit, varbit), :mod:`.datetime` (date, time, timetz, timestamp,
  timestamptz), :mod:`.interval`, :mod:`.network` (inet, cidr, macaddr), :mod:`.ranges`
  (ranges and multiranges), :mod:`.enums`, :mod:`.composites` (the nested ones split by
  what :mod:`.nested` shares);
  the compiled twin of a family is ``_codecs/<family>.pxi``, included by ``_convert.pyx``;
- :mod:`.facts` — the table of built-in types (:data:`TYPES`) assembled from the
  families, and its lookups;
- :mod:`.names` — SQL type names (``numeric(10,2)``) to OID and typmod;
- :mod:`.registry` — :class:`TypeRegistry`, how an OID resolves through it, its Arrow type;
- :mod:`.catalog` — :class:`Catalog`, its JSON, its reading from a live server;
- :mod:`.arrays` — arrays in both forms;
- :mod:`.columns` — whole columns, over the compiled ``_convert`` where it applies.

The plain-Python parsers are the readable reference and the oracle the compiled ones
are tested against; ``PGOUTPUT_CODEC_NO_EXTENSIONS=1`` (or ``fast=False``) uses them for
everything.
"""

from __future__ import annotations

from .catalog import (CATALOG_KEY, Catalog, catalog_from_connection, catalog_of, read_catalog, registry_of,
                      with_catalog, write_catalog)
from .columns import ConvertedColumn, convert_column, convert_columns, convert_value
from .errors import REFUSED, SPECIAL_NAMES, ConversionError, Physical, Special
from .facts import ARRAY_ELEM, BY_OID, TYPES, TypeInfo
from .names import type_of_name
from .numeric import numeric_typmod
from .registry import TypeRegistry, arrow_type, with_type_names

__all__ = [
    "TypeInfo", "TYPES", "BY_OID", "ARRAY_ELEM", "TypeRegistry", "ConversionError", "ConvertedColumn",
    "Special", "Physical", "SPECIAL_NAMES", "REFUSED", "arrow_type", "convert_column", "convert_columns",
    "convert_value", "numeric_typmod", "type_of_name", "with_type_names", "Catalog", "CATALOG_KEY",
    "catalog_from_connection", "catalog_of", "read_catalog", "write_catalog", "registry_of", "with_catalog",
]
