"""The table of the built-in types (docs/types.md), assembled from the family modules,
each of which declares its types once: :data:`TYPES` (one :class:`~.typeinfo.TypeInfo`
each: OID, name, array OID, converter, compiled converter code, typmod of its modifiers)
and :data:`CONVERTERS` (per converter name its text and send form parsers and its Arrow
type), and the lookups built from them: by OID, by name, array OID to element OID, the
parsers by converter name."""

from __future__ import annotations

from . import (bytea, datetime, extensiontext, floats, geometry, hstore, integers, interval, network, numeric,
               ranges, text, vectors)
from .typeinfo import MAXDIM, Converter, TypeInfo, binary_as_bytes, text_as_str

__all__ = [
    "FAMILIES", "TypeInfo", "TYPES", "CONVERTERS", "BY_OID", "BY_NAME", "ARRAY_ELEM", "ARRAY_NAME", "ARRAY_BY_NAME",
    "TEXT_PARSERS", "BINARY_PARSERS", "DELIMITERS", "MAXDIM", "BY_EXTENSION",
]

#: the family modules, each with its ``TYPES`` and ``CONVERTERS`` (arrays: :mod:`.arrays`)
FAMILIES = (integers, floats, numeric, text, bytea, datetime, interval, network, ranges, extensiontext, hstore, vectors,
            geometry)


def _one_each(items, key, what):
    seen = {}
    for x in items:
        if key(x) in seen:
            raise ValueError(f"{what} {key(x)!r} declared twice")
        seen[key(x)] = x
    return seen


TYPES = sorted((t for f in FAMILIES for t in f.TYPES), key=lambda t: t.oid)
#: converter name -> :class:`~.typeinfo.Converter`; 'unknown': a type no converter reads
CONVERTERS = _one_each([c for f in FAMILIES for c in f.CONVERTERS]
                       + [Converter("unknown", text_as_str, binary_as_bytes)], lambda c: c.name, "converter")
BY_OID = _one_each(TYPES, lambda t: t.oid, "type OID")
BY_NAME = _one_each(TYPES, lambda t: t.name, "type name")
#: (extension, type name) -> :class:`~.typeinfo.ExtensionType`: the types an extension
#: owns, whose OIDs differ per database (a family lists them in ``EXTENSION_TYPES``)
BY_EXTENSION = _one_each([t for f in FAMILIES for t in getattr(f, "EXTENSION_TYPES", ())],
                         lambda t: (t.extension, t.name), "extension type")
#: array type OID -> element type OID
ARRAY_ELEM = {t.array_oid: t.oid for t in TYPES if t.array_oid}
ARRAY_NAME = {t.array_oid: "_" + t.name for t in TYPES if t.array_oid}
ARRAY_BY_NAME = {"_" + t.name: t.oid for t in TYPES if t.array_oid}
#: converter name -> parser of the text form; of the send form (absent: kept as text, as bytes)
TEXT_PARSERS = {c.name: c.text for c in CONVERTERS.values() if c.text is not None}
BINARY_PARSERS = {c.name: c.binary for c in CONVERTERS.values() if c.binary is not None}
#: converter name -> the delimiter of its elements in an array's text form, where not ','
DELIMITERS = {c.name: c.delimiter for c in CONVERTERS.values() if c.delimiter != b","}
_missing = ({t.conv for t in TYPES} | {t.conv for t in BY_EXTENSION.values()}) - CONVERTERS.keys()
if _missing:
    raise ValueError(f"types name converters no family declares: {sorted(_missing)}")
