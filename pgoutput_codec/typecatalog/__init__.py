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
  messages or from the server catalog.

The modules, each holding one thing, lowest layer first:

- :mod:`.facts` — the table of built-in types (:data:`TYPES`) and its lookups;
- :mod:`.markers`, :mod:`.errors` — :class:`Special`/:class:`Physical`, :class:`ConversionError`;
- :mod:`.typmods`, :mod:`.epochs` — numeric typmods; day and microsecond counts;
- :mod:`.names` — SQL type names (``numeric(10,2)``) to OID and typmod;
- :mod:`.registry` — :class:`TypeRegistry` and how an OID resolves through it;
- :mod:`.arrow` — the Arrow type of each type;
- :mod:`.formats` — values written as the server's output functions write them;
- :mod:`.text`, :mod:`.binary` — the Python parsers of the text and send forms;
- :mod:`.arrays` — arrays in both forms;
- :mod:`.columns` — whole columns, over the compiled ``_convert`` where it applies.

The plain-Python parsers are the readable reference and the oracle the compiled ones
are tested against; ``PGOUTPUT_CODEC_NO_EXTENSIONS=1`` (or ``fast=False``) uses them for
everything.
"""

from __future__ import annotations

from .arrow import arrow_type
from .columns import ConvertedColumn, convert_column, convert_columns, convert_value
from .errors import ConversionError
from .facts import ARRAY_ELEM, BY_OID, TYPES, TypeInfo
from .markers import REFUSED, SPECIAL_NAMES, Physical, Special
from .names import type_of_name
from .registry import TypeRegistry, with_type_names
from .typmods import numeric_typmod

__all__ = [
    "TypeInfo", "TYPES", "BY_OID", "ARRAY_ELEM", "TypeRegistry", "ConversionError", "ConvertedColumn",
    "Special", "Physical", "SPECIAL_NAMES", "REFUSED", "arrow_type", "convert_column", "convert_columns",
    "convert_value", "numeric_typmod", "type_of_name", "with_type_names",
]
