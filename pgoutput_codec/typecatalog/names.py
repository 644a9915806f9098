"""Types named as ``format_type`` prints them (``numeric(10,2)``, ``integer[]``) read
back to (OID, typmod): openGauss's text and json decoding styles name a column's type
this way and send no OID."""

from __future__ import annotations

import re

from .facts import BY_NAME

__all__ = ["type_of_name"]


#: format_type's SQL spellings (PostgreSQL's and openGauss's format_type.c) -> catalog name
_SQL_NAMES = {"boolean": "bool", "smallint": "int2", "integer": "int4", "bigint": "int8", "real": "float4",
              "double precision": "float8", "character": "bpchar", "character varying": "varchar",
              "bit varying": "varbit", "timestamp without time zone": "timestamp",
              "timestamp with time zone": "timestamptz", "time without time zone": "time",
              "time with time zone": "timetz", '"char"': "char"}


def type_of_name(text: str) -> tuple[int, int]:
    """(OID, typmod) of a type named as ``format_type`` prints it — ``integer``,
    ``numeric(10,2)``, ``character varying(20)``, ``timestamp(3) with time zone``,
    ``integer[]`` — which is how openGauss's text and json decoding styles name a column's
    type (they send no OID). (0, -1) for a type the catalog does not hold (openGauss's own
    ``tinyint``, ``smalldatetime``…, user types): its values stay text, as an unknown OID's do."""
    s = " ".join(text.split())
    dims = 0
    while s.endswith("[]"):
        s, dims = s[:-2].rstrip(), dims + 1
    m = re.search(r"\(([0-9, ]*)\)", s)
    mods = [int(x) for x in m.group(1).split(",") if x.strip()] if m else []
    if m:
        s = " ".join((s[:m.start()] + " " + s[m.end():]).split())
    info = BY_NAME.get(_SQL_NAMES.get(s, s))
    if info is None or (dims and not info.array_oid):
        return 0, -1
    typmod = info.mods(mods) if mods and info.mods is not None else -1
    return (info.array_oid if dims else info.oid), typmod
