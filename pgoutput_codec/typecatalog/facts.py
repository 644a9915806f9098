"""The table of facts of the built-in types (docs/types.md), one :class:`TypeInfo` each:
OID, name, array OID, the converter pair that reads its text form (``*_out`` under
DateStyle ISO, IntervalStyle postgres) and its binary send form (``*_send``), and, for
the common types, the code of its compiled converter in ``_convert.pyx``. The lookups
built from it: by OID, by name, array OID to element OID."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "TypeInfo", "TYPES", "BY_OID", "BY_NAME", "ARRAY_ELEM", "ARRAY_NAME", "ARRAY_BY_NAME",
    "F_BOOL", "F_INT2", "F_INT4", "F_INT8", "F_OID", "F_FLOAT4", "F_FLOAT8", "F_NUMERIC", "F_DATE", "F_TIME",
    "F_TIMESTAMP", "F_TIMESTAMPTZ", "F_INTERVAL", "F_TEXT", "F_BYTEA", "F_UUID", "F_JSONB", "MAXDIM",
]

#: the most dimensions a PostgreSQL array has (its MAXDIM): a value nested deeper is
#: refused and no type is nested deeper (Arrow's nested types recurse per level)
MAXDIM = 6


@dataclass(frozen=True)
class TypeInfo:
    oid: int
    name: str
    array_oid: int | None
    conv: str          # key of text.TEXT_PARSERS, binary.BINARY_PARSERS and arrow's Arrow types
    fast: int = 0      # _convert.Code, 0 = Python converters only


# fast codes (values of _convert.Code, repeated so this module imports without the extension)
F_BOOL, F_INT2, F_INT4, F_INT8, F_OID, F_FLOAT4, F_FLOAT8, F_NUMERIC = 1, 2, 3, 4, 5, 6, 7, 8
F_DATE, F_TIME, F_TIMESTAMP, F_TIMESTAMPTZ, F_INTERVAL, F_TEXT, F_BYTEA, F_UUID, F_JSONB = range(9, 18)

TYPES = [
    TypeInfo(16, "bool", 1000, "bool", F_BOOL),
    TypeInfo(17, "bytea", 1001, "bytea", F_BYTEA),
    TypeInfo(18, "char", 1002, "char"),
    TypeInfo(19, "name", 1003, "text", F_TEXT),
    TypeInfo(20, "int8", 1016, "int8", F_INT8),
    TypeInfo(21, "int2", 1005, "int2", F_INT2),
    TypeInfo(23, "int4", 1007, "int4", F_INT4),
    TypeInfo(25, "text", 1009, "text", F_TEXT),
    TypeInfo(26, "oid", 1028, "oid", F_OID),
    TypeInfo(114, "json", 199, "text", F_TEXT),
    TypeInfo(142, "xml", 143, "text", F_TEXT),
    TypeInfo(600, "point", 1017, "point"),
    TypeInfo(650, "cidr", 651, "inet"),
    TypeInfo(700, "float4", 1021, "float4", F_FLOAT4),
    TypeInfo(701, "float8", 1022, "float8", F_FLOAT8),
    TypeInfo(774, "macaddr8", 775, "macaddr"),
    TypeInfo(790, "money", 791, "money"),
    TypeInfo(829, "macaddr", 1040, "macaddr"),
    TypeInfo(869, "inet", 1041, "inet"),
    TypeInfo(1042, "bpchar", 1014, "text", F_TEXT),
    TypeInfo(1043, "varchar", 1015, "text", F_TEXT),
    TypeInfo(1082, "date", 1182, "date", F_DATE),
    TypeInfo(1083, "time", 1183, "time", F_TIME),
    TypeInfo(1114, "timestamp", 1115, "timestamp", F_TIMESTAMP),
    TypeInfo(1184, "timestamptz", 1185, "timestamptz", F_TIMESTAMPTZ),
    TypeInfo(1186, "interval", 1187, "interval", F_INTERVAL),
    TypeInfo(1266, "timetz", 1270, "timetz"),
    TypeInfo(1560, "bit", 1561, "bit"),
    TypeInfo(1562, "varbit", 1563, "bit"),
    TypeInfo(1700, "numeric", 1231, "numeric", F_NUMERIC),
    TypeInfo(2950, "uuid", 2951, "uuid", F_UUID),
    TypeInfo(3220, "pg_lsn", 3221, "pg_lsn"),
    TypeInfo(3802, "jsonb", 3807, "jsonb", F_JSONB),
    TypeInfo(3904, "int4range", 3905, "range:23"),
    TypeInfo(3906, "numrange", 3907, "range:1700"),
    TypeInfo(3908, "tsrange", 3909, "range:1114"),
    TypeInfo(3910, "tstzrange", 3911, "range:1184"),
    TypeInfo(3912, "daterange", 3913, "range:1082"),
    TypeInfo(3926, "int8range", 3927, "range:20"),
]
BY_OID = {t.oid: t for t in TYPES}
#: array type OID -> element type OID
ARRAY_ELEM = {t.array_oid: t.oid for t in TYPES if t.array_oid}
ARRAY_NAME = {t.array_oid: "_" + t.name for t in TYPES if t.array_oid}
BY_NAME = {t.name: t for t in TYPES}
ARRAY_BY_NAME = {"_" + t.name: t.oid for t in TYPES if t.array_oid}
