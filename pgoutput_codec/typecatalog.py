"""The type catalog: for each PostgreSQL type OID, its Arrow type and its converters.

One table of facts (:data:`TYPES`, PROTOCOL.md §3): name, array OID, the converter that
reads its text form (``*_out`` under DateStyle ISO, IntervalStyle postgres) and its binary
send form (``*_send``), and, for the common types, the code of the compiled converter in
``_convert.pyx``. Every representation choice is argued in ``docs/TYPES.md``.

Public API:

- :func:`arrow_type` — the Arrow type of a column (type OID + ``type_modifier``);
- :func:`convert_column` — a whole column of TupleData values (``kind`` + ``data`` arrays,
  mixed 'n'/'u'/'t'/'b' allowed) to a :class:`ConvertedColumn` (Arrow values + the
  ``special`` markers that say what a null value really was: ``infinity``, ``-infinity``,
  ``NaN``, an array's bounds);
- :func:`convert_value` — one value to a Python object (tests, slow paths);
- :class:`TypeRegistry` — enums, domains, user arrays and names learned from Type ('Y')
  messages or from the server catalog.

The plain-Python converters in this module are the readable reference and the oracle
the compiled ones are tested against; ``PGOUTPUT_CODEC_NO_EXTENSIONS=1`` (or
``fast=False``) uses them for everything.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import ipaddress
import os
import re
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from .errors import PgoutputCodecError

__all__ = [
    "TypeInfo", "TYPES", "BY_OID", "ARRAY_ELEM", "TypeRegistry", "ConversionError", "ConvertedColumn",
    "Special", "Physical", "SPECIAL_NAMES", "arrow_type", "convert_column", "convert_value", "numeric_typmod",
    "type_of_name",
]

_NO_EXT = bool(os.environ.get("PGOUTPUT_CODEC_NO_EXTENSIONS"))


class ConversionError(PgoutputCodecError, ValueError):
    """A column value could not be converted. ``index`` is the value's position in the
    column, ``type_oid``/``type_name`` the column type, ``value`` (a bytes prefix) and
    ``kind`` ('t'/'b') what was being converted."""

    def __init__(self, message, index=None, type_oid=None, type_name=None, kind=None, value=None):
        super().__init__(message)
        self.index = index
        self.type_oid = type_oid
        self.type_name = type_name
        self.kind = kind
        self.value = value

    def __reduce__(self):
        return (type(self), (self.args[0], self.index, self.type_oid, self.type_name, self.kind, self.value))


class Special(str):
    """What :func:`convert_value` returns for a value Arrow holds as null plus a marker:
    ``Special('infinity')``, ``Special('-infinity')``, ``Special('NaN')``."""

    def __repr__(self):
        return f"Special({str(self)!r})"


class Physical(int):
    """The Arrow storage value (days or µs since 1970-01-01) of a date/timestamp that
    Python's datetime cannot hold (BC, or after 9999)."""

    def __repr__(self):
        return f"Physical({int(self)})"


#: names of the special codes of ``_convert`` (code 0 = not special)
SPECIAL_NAMES = (None, "infinity", "-infinity", "NaN")


# ------------------------------------------------------------------ the table

@dataclass(frozen=True)
class TypeInfo:
    oid: int
    name: str
    array_oid: int | None
    conv: str          # the converter pair in _TEXT/_BINARY, and the key of _ARROW
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
_ARRAY_NAME = {t.array_oid: "_" + t.name for t in TYPES if t.array_oid}
BY_NAME = {t.name: t for t in TYPES}
_ARRAY_BY_NAME = {"_" + t.name: t.oid for t in TYPES if t.array_oid}
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
    typmod = -1
    if mods:
        if info.name == "numeric":
            typmod = ((mods[0] << 16) | (mods[1] if len(mods) > 1 else 0)) + 4
        elif info.name in ("bpchar", "varchar"):
            typmod = mods[0] + 4
        elif info.name in ("bit", "varbit", "time", "timetz", "timestamp", "timestamptz", "interval"):
            typmod = mods[0]
    return (info.array_oid if dims else info.oid), typmod


def numeric_typmod(type_modifier: int) -> tuple[int, int] | None:
    """(precision, scale) of a numeric typmod, None when unconstrained. The scale is an
    11-bit signed field since PostgreSQL 15 (``numeric.c``: NUMERIC_TYPMOD_SCALE), so
    ``numeric(5,-2)`` decodes to (5, -2); older servers only produce scales >= 0."""
    if type_modifier is None or type_modifier < 4:
        return None
    t = type_modifier - 4
    return (t >> 16) & 0xFFFF, ((t & 0x7FF) ^ 1024) - 1024


def _numeric_arrow(tm):
    ps = numeric_typmod(tm)
    if ps is None:
        return pa.string()
    p, s = ps
    if 1 <= p <= 38:
        return pa.decimal128(p, s)
    if p <= 76:
        return pa.decimal256(p, s)
    return pa.string()


_ARROW = {
    "bool": lambda tm: pa.bool_(),
    "int2": lambda tm: pa.int16(),
    "int4": lambda tm: pa.int32(),
    "int8": lambda tm: pa.int64(),
    "oid": lambda tm: pa.uint32(),
    "float4": lambda tm: pa.float32(),
    "float8": lambda tm: pa.float64(),
    "numeric": _numeric_arrow,
    "date": lambda tm: pa.date32(),
    "time": lambda tm: pa.time64("us"),
    "timestamp": lambda tm: pa.timestamp("us"),
    "timestamptz": lambda tm: pa.timestamp("us", tz="UTC"),
    "interval": lambda tm: pa.month_day_nano_interval(),
    "bytea": lambda tm: pa.binary(),
    "unknown_binary": lambda tm: pa.binary(),
}


# ------------------------------------------------------------------ registry

@dataclass
class UserType:
    oid: int
    namespace: str | None = None
    name: str | None = None
    kind: str = "unknown"            # 'enum' | 'domain' | 'array' | 'unknown' (text/bytes)
    base_oid: int | None = None      # domain: the base type; array: the element type
    base_typmod: int = -1
    labels: tuple = ()


@dataclass
class TypeRegistry:
    """User types (OID >= 16384 or anything not in :data:`TYPES`).

    A Type ('Y') message only gives OID, namespace and name, which is not enough to
    know an enum from a domain: register those explicitly (:meth:`register_enum`,
    :meth:`register_domain`, :meth:`register_array`) or load them all from the server
    catalog (:meth:`load_from_connection`). Unregistered types convert as unknown.

    ``timezone`` is the server's ``TimeZone`` (an IANA name such as ``Europe/Berlin``;
    :meth:`load_from_connection` reads the session's): what an ``ALTER COLUMN … TYPE``
    between ``timestamp``, ``date`` and ``timestamptz`` read the values in, where the
    archive holds them as sent before it (:mod:`pgoutput_codec.casts`). None: UTC.
    """

    types: dict = field(default_factory=dict)
    timezone: str | None = None

    def _get(self, oid):
        return self.types.setdefault(oid, UserType(oid))

    def add_type_message(self, type_oid, namespace=None, type_name=None):
        """Record a Type ('Y') message (or any object with those attributes).

        pgoutput (``logicalrep_write_typ``) sends the OID of the column type but the
        namespace and name of its *base* type: a domain over numeric arrives as
        (domain OID, "pg_catalog", "numeric"). Such a message registers a domain over
        that builtin (its typmod is not sent: -1). A name '_x' where 'x' is a known
        user type of the same namespace registers an array of it. Facts already known
        (from the catalog or ``register_*``) are kept."""
        if not isinstance(type_oid, int):
            msg = type_oid
            type_oid, namespace, type_name = msg.type_oid, msg.namespace, msg.type_name
        t = self._get(type_oid)
        if t.kind == "unknown":
            if namespace in ("", "pg_catalog") and type_name in BY_NAME and BY_NAME[type_name].oid != type_oid:
                t.kind, t.base_oid, t.base_typmod = "domain", BY_NAME[type_name].oid, -1
            elif namespace in ("", "pg_catalog") and type_name in _ARRAY_BY_NAME:
                t.kind, t.base_oid = "array", _ARRAY_BY_NAME[type_name]
            elif type_name and type_name.startswith("_"):
                for u in self.types.values():
                    if u.name == type_name[1:] and u.namespace == namespace and u.oid != type_oid:
                        t.kind, t.base_oid = "array", u.oid
                        break
        t.namespace = namespace if t.namespace is None else t.namespace
        t.name = type_name if t.name is None else t.name
        return t

    def register_enum(self, oid, labels=(), name=None, array_oid=None):
        t = self._get(oid)
        t.kind, t.labels = "enum", tuple(labels)
        t.name = name or t.name
        if array_oid:
            self.register_array(array_oid, oid)
        return t

    def register_domain(self, oid, base_oid, base_typmod=-1, name=None, array_oid=None):
        t = self._get(oid)
        t.kind, t.base_oid, t.base_typmod = "domain", base_oid, base_typmod
        t.name = name or t.name
        if array_oid:
            self.register_array(array_oid, oid)
        return t

    def register_array(self, array_oid, elem_oid):
        t = self._get(array_oid)
        t.kind, t.base_oid = "array", elem_oid
        return t

    _CATALOG_SQL = (
        "SELECT t.oid::int8, n.nspname, t.typname, t.typtype::text, t.typbasetype::int8, t.typtypmod,"
        " t.typelem::int8, t.typcategory::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
        " WHERE t.oid >= 16384 OR t.typtype IN ('e', 'd')"
    )

    def load_rows(self, rows):
        """Rows of ``_CATALOG_SQL``: (oid, nspname, typname, typtype, typbasetype,
        typtypmod, typelem, typcategory)."""
        for oid, nsp, name, typtype, base, typmod, elem, cat in rows:
            if typtype == "e":
                self.register_enum(oid, name=name)
            elif typtype == "d":
                self.register_domain(oid, base, typmod, name=name)
            elif cat == "A" and elem:
                self.register_array(oid, elem)
            else:
                self._get(oid).name = name
            self.types[oid].namespace = nsp
        return self

    def load_from_connection(self, conn):
        """Read enums, domains and arrays of user types from a DB-API connection, and
        its session's ``TimeZone`` (kept where one was given)."""
        cur = conn.cursor()
        cur.execute(self._CATALOG_SQL)
        self.load_rows(cur.fetchall())
        if self.timezone is None:
            cur.execute("SHOW TimeZone")
            zone = cur.fetchone()[0]
            zone = zone.decode() if isinstance(zone, bytes) else zone
            if _arrow_places(zone):
                self.timezone = zone
            else:   # a POSIX rule ('UTC+3'), or the server machine's own 'localtime'
                warnings.warn(f"the session's TimeZone {zone!r} is not a zone Arrow's database places: values "
                              "retyped between timestamp and timestamptz are read in UTC unless "
                              "TypeRegistry.timezone names the zone", stacklevel=2)
        return self


def _arrow_places(zone: str) -> bool:
    """Whether Arrow's time zone database knows ``zone`` as the server did: not
    ``localtime``, which is the machine's own (this one's, for Arrow)."""
    import pyarrow.compute as pc

    if zone.lower() == "localtime":
        return False
    try:
        pc.assume_timezone(pa.array([0], pa.timestamp("us")), zone)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


class _Resolved(NamedTuple):
    oid: int
    name: str
    conv: str          # converter name; 'array' for arrays
    typmod: int
    fast: int
    elem: Any = None   # _Resolved of the element for arrays


def _resolve(oid, typmod=-1, registry=None, depth=0):
    if depth > 32:
        raise ConversionError(f"type OID {oid}: domain/array chain too deep")
    info = BY_OID.get(oid)
    if info is not None:
        return _Resolved(oid, info.name, info.conv, typmod, info.fast)
    if oid in ARRAY_ELEM:
        return _Resolved(oid, _ARRAY_NAME[oid], "array", typmod, 0, _resolve(ARRAY_ELEM[oid], typmod, registry, depth + 1))
    u = registry.types.get(oid) if registry is not None else None
    if u is None:
        return _Resolved(oid, f"oid {oid}", "unknown", typmod, 0)
    if u.kind == "enum":
        return _Resolved(oid, u.name or f"oid {oid}", "text", typmod, F_TEXT)
    if u.kind == "domain":
        return _resolve(u.base_oid, u.base_typmod if typmod == -1 else typmod, registry, depth + 1)
    if u.kind == "array":
        elem = _resolve(u.base_oid, typmod, registry, depth + 1)
        return _Resolved(oid, "_" + elem.name, "array", typmod, 0, elem)
    return _Resolved(oid, u.name or f"oid {oid}", "unknown", typmod, 0)


def _arrow_of(r, binary, ndim=1):
    if r.conv == "array":
        t = _arrow_of(r.elem, binary)
        for _ in range(max(ndim, 1)):
            t = pa.list_(t)
        return t
    if r.conv == "unknown":
        return pa.binary() if binary else pa.string()
    f = _ARROW.get(r.conv)
    return f(r.typmod) if f else pa.string()


def arrow_type(type_oid: int, type_modifier: int = -1, registry: TypeRegistry | None = None, *,
               binary: bool = False, ndim: int = 1) -> pa.DataType:
    """The Arrow type of a column. ``binary`` matters only for unknown types (string of
    the text form, or binary of the send form); ``ndim`` only for arrays (lists nested
    ``ndim`` deep; PostgreSQL does not record a column's dimensionality)."""
    return _arrow_of(_resolve(type_oid, type_modifier, registry), binary, ndim)


# ------------------------------------------------------------------ text helpers

_INT_RE = re.compile(rb"[+-]?[0-9]+\Z")
_DATE_RE = re.compile(rb"([0-9]{4,})-([0-9]{2})-([0-9]{2})( BC)?\Z")
_TS_RE = re.compile(rb"([0-9]{4,})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?"
                    rb"(?:([+-])([0-9]{2})(?::([0-9]{2}))?(?::([0-9]{2}))?)?( BC)?\Z")
_TIME_RE = re.compile(rb"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?"
                      rb"(?:([+-])([0-9]{2})(?::([0-9]{2}))?(?::([0-9]{2}))?)?\Z")
_UNIX_DAYS = 10957
_UNIX_US = 946684800000000
_I32_MAX, _I64_MAX = 2**31 - 1, 2**63 - 1
_GREG_CYCLE = 146097   # days in 400 Gregorian years


def _days(y, m, d):
    """Days since 1970-01-01, proleptic Gregorian, astronomical year (via 400-year shifts
    into the range Python's date handles)."""
    k = 0
    while y < 1:
        y += 400
        k -= 1
    while y > 9999:
        y -= 400
        k += 1
    return _dt.date(y, m, d).toordinal() - 719163 + k * _GREG_CYCLE


def _civil(days):
    """Inverse of :func:`_days`: (astronomical year, month, day)."""
    k, r = divmod(days + 719163 - 1, _GREG_CYCLE)
    d = _dt.date.fromordinal(r + 1)
    return d.year + 400 * k, d.month, d.day


def _frac_us(g):
    return int((g[1:] + b"000000")[:6]) if g else 0


def _t_int(lo, hi):
    def conv(s, tm):
        if not _INT_RE.match(s):
            raise ValueError("not an integer")
        v = int(s)
        if not lo <= v <= hi:
            raise ValueError("integer out of range")
        return v
    return conv


def _t_bool(s, tm):
    if s == b"t":
        return True
    if s == b"f":
        return False
    raise ValueError("bool text must be 't' or 'f'")


def _t_float(s, tm):
    # what float8out prints plus what strtod takes of those characters (_convert.pyx
    # _float_chars): 'E' and a leading '+' too
    if not re.match(rb"([+-]?(Infinity|[0-9.]+([eE][+-]?[0-9]+)?)|NaN)\Z", s):
        raise ValueError("not a float")
    return float(s)


def _t_float4(s, tm):
    return struct.unpack("f", struct.pack("f", _t_float(s, tm)))[0]


_NUMERIC_SPECIAL = {b"NaN": "NaN", b"Infinity": "infinity", b"-Infinity": "-infinity"}


def _decimal_to_typmod(d: decimal.Decimal, tm):
    ps = numeric_typmod(tm)
    p, s = ps
    with decimal.localcontext() as ctx:
        ctx.prec = 2000
        q = d.quantize(decimal.Decimal(1).scaleb(-s))
        if q != d:
            raise ValueError(f"more fraction digits than the column's scale {s}")
        if abs(q.scaleb(s)) >= 10 ** p:
            raise ValueError(f"exceeds the column's precision {p}")
    return q


def _t_numeric(s, tm):
    if s in _NUMERIC_SPECIAL:
        if _numeric_arrow(tm) == pa.string():
            return s.decode()
        return Special(_NUMERIC_SPECIAL[s])
    if not re.match(rb"-?[0-9]+(\.[0-9]+)?\Z", s):
        raise ValueError("not a decimal number")
    if _numeric_arrow(tm) == pa.string():
        return s.decode()
    return _decimal_to_typmod(decimal.Decimal(s.decode()), tm)


def _t_date(s, tm):
    if s in (b"infinity", b"-infinity"):
        return Special(s.decode())
    m = _DATE_RE.match(s)
    if not m:
        raise ValueError("not an ISO date")
    v = _days(_year(m[1], m[4]), int(m[2]), int(m[3]))
    if not -2**31 <= v <= _I32_MAX:
        raise ValueError("date outside the date32 range")
    return v


def _time_us(h, mi, se, frac, clock=True):
    h, mi, se, f = int(h), int(mi), int(se), _frac_us(frac)
    # datetime.c's bounds: minutes to 59, a leap second 60, and (a clock, not an interval)
    # 24:00:00 the last time
    if mi > 59 or se > 60 or (clock and (h > 24 or (h == 24 and (mi or se or f)))):
        raise ValueError("time field out of range")
    return ((h * 60 + mi) * 60 + se) * 1000000 + f


def _year(digits, bc):
    """Astronomical year of 'YYYY[ BC]'; there is no year 0 in AD/BC notation."""
    y = int(digits)
    if y == 0:
        raise ValueError("year 0 does not exist")
    return 1 - y if bc else y


def _t_time(s, tm):
    m = _TIME_RE.match(s)
    if not m or m[5]:
        raise ValueError("not a time of day")
    v = _time_us(m[1], m[2], m[3], m[4])
    if v > 86400000000:
        raise ValueError("time of day out of range")
    return v


def _t_timestamp_(tz):
    def conv(s, tm):
        if s in (b"infinity", b"-infinity"):
            return Special(s.decode())
        m = _TS_RE.match(s)
        if not m or bool(m[8]) != tz:
            raise ValueError("not an ISO timestamp" + (" with offset" if tz else ""))
        us = _days(_year(m[1], m[12]), int(m[2]), int(m[3])) * 86400000000 + _time_us(m[4], m[5], m[6], m[7])
        if tz:
            off = (int(m[9]) * 60 + int(m[10] or 0)) * 60 + int(m[11] or 0)
            us -= (off if m[8] == b"+" else -off) * 1000000
        if not -2**63 <= us <= _I64_MAX:
            raise ValueError("timestamp beyond the Arrow timestamp[us] range")
        return us
    return conv


_IV_UNIT = {b"year": 12, b"years": 12, b"mon": 1, b"mons": 1}
_IV_TOKEN = re.compile(rb"\s*(?:([+-]?[0-9]+) (years?|mons?|days?)|([+-])?([0-9]{2,}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?)")
_ISO_IV = re.compile(rb"P(?:(-?[0-9]+)Y)?(?:(-?[0-9]+)M)?(?:(-?[0-9]+)D)?"
                     rb"(?:T(?:(-?[0-9]+)H)?(?:(-?[0-9]+)M)?(?:(-?[0-9]+)(?:\.([0-9]{1,6}))?S)?)?\Z")


def _t_interval(s, tm):
    if s in (b"infinity", b"-infinity"):
        return Special(s.decode())
    months = days = us = 0
    m = _ISO_IV.match(s)
    if m and s != b"P":                              # IntervalStyle iso_8601
        y, mo, d, h, mi, se = (int(x) if x else 0 for x in m.groups()[:6])
        frac = _frac_us(b"." + m[7]) if m[7] else 0
        if m[6] and m[6].startswith(b"-"):
            frac = -frac
        months, days, us = y * 12 + mo, d, ((h * 60 + mi) * 60 + se) * 1000000 + frac
    else:                                            # IntervalStyle postgres
        pos = 0
        s2 = s.rstrip()
        if not s2:
            raise ValueError("empty interval")
        while pos < len(s2):
            t = _IV_TOKEN.match(s2, pos)
            if not t or t.end() == pos:
                raise ValueError("not an interval (IntervalStyle postgres or iso_8601)")
            if t[1]:
                v = int(t[1])
                if t[2].startswith(b"day"):
                    days += v
                else:
                    months += v * _IV_UNIT[t[2]]
            else:
                v = _time_us(t[4], t[5], t[6], t[7], clock=False)
                us = -v if t[3] == b"-" else v
            pos = t.end()
    if not (-2**31 <= months < 2**31 and -2**31 <= days < 2**31):
        raise ValueError("interval months/days out of int32 range")
    if abs(us * 1000) > _I64_MAX:
        raise ValueError("interval time part overflows int64 nanoseconds")
    return pa.MonthDayNano([months, days, us * 1000])


def _t_text(s, tm):
    return s.decode("utf-8")


def _t_bytea(s, tm):
    if s.startswith(b"\\x"):
        if len(s) % 2 or not re.match(rb"[0-9a-fA-F]*\Z", s[2:]):
            raise ValueError("bad bytea hex")
        return bytes.fromhex(s[2:].decode())
    out, i = bytearray(), 0                     # bytea_output = 'escape'
    while i < len(s):
        c = s[i]
        if c != 0x5C:
            out.append(c)
            i += 1
        elif s[i + 1:i + 2] == b"\\":
            out.append(0x5C)
            i += 2
        elif re.match(rb"[0-3][0-7]{2}", s[i + 1:i + 4]):
            out.append(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            raise ValueError("bad bytea escape")
    return bytes(out)


def _t_uuid(s, tm):
    if not re.match(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z", s):
        raise ValueError("not a canonical uuid")
    return s.decode().lower()


# ------------------------------------------------------------------ binary helpers

def _need(b, n):
    if len(b) != n:
        raise ValueError(f"send form must be {n} bytes, got {len(b)}")


def _b_struct(fmt):
    st = struct.Struct(fmt)

    def conv(b, tm):
        _need(b, st.size)
        return st.unpack(b)[0]
    return conv


def _b_bool(b, tm):
    _need(b, 1)
    if b[0] > 1:
        raise ValueError("bool send form must be 0 or 1")
    return b[0] == 1


def _numeric_parts(b):
    if len(b) < 8:
        raise ValueError("numeric send form shorter than its header")
    nd, weight, sign, dscale = struct.unpack_from(">hhHh", b)
    if sign in (0xC000, 0xD000, 0xF000):
        return sign, None, None
    if sign not in (0, 0x4000) or nd < 0:
        raise ValueError("bad numeric sign or digit count")
    if not 0 <= dscale <= 0x3FFF:
        raise ValueError("bad numeric display scale")
    _need(b, 8 + 2 * nd)
    digits = struct.unpack_from(f">{nd}h", b, 8)
    if any(not 0 <= d <= 9999 for d in digits):
        raise ValueError("numeric digit out of range")
    with decimal.localcontext() as ctx:
        ctx.prec = 200000
        v = decimal.Decimal((1 if sign == 0x4000 else 0, tuple(int(c) for d in digits for c in f"{d:04d}") or (0,),
                             4 * (weight - nd + 1) if nd else 0))
        # numeric_recv truncates (toward zero) the digits its dscale hides
        v = v.quantize(decimal.Decimal(1).scaleb(-dscale), rounding=decimal.ROUND_DOWN)
    return sign, v, dscale


def _numeric_text_of(v: decimal.Decimal):
    return format(v, "f")


def _b_numeric(b, tm):
    sign, v, dscale = _numeric_parts(b)
    if v is None:
        name = {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}[sign]
        if _numeric_arrow(tm) == pa.string():
            return name
        return Special(_NUMERIC_SPECIAL[name.encode()])
    if _numeric_arrow(tm) == pa.string():
        return _numeric_text_of(v)
    return _decimal_to_typmod(v, tm)


def _b_date(b, tm):
    _need(b, 4)
    (v,) = struct.unpack(">i", b)
    if v in (_I32_MAX, -_I32_MAX - 1):
        return Special("infinity" if v > 0 else "-infinity")
    return v + _UNIX_DAYS


def _b_time(b, tm):
    _need(b, 8)
    (v,) = struct.unpack(">q", b)
    if not 0 <= v <= 86400000000:
        raise ValueError("time of day out of range")
    return v


def _b_timestamp(b, tm):
    _need(b, 8)
    (v,) = struct.unpack(">q", b)
    if v in (_I64_MAX, -_I64_MAX - 1):
        return Special("infinity" if v > 0 else "-infinity")
    if v + _UNIX_US > _I64_MAX:
        raise ValueError("timestamp beyond the Arrow timestamp[us] range (after 294246 AD)")
    return v + _UNIX_US


def _b_interval(b, tm):
    _need(b, 16)
    us, days, months = struct.unpack(">qii", b)
    if (us, days, months) == (_I64_MAX, _I32_MAX, _I32_MAX):
        return Special("infinity")
    if (us, days, months) == (-_I64_MAX - 1, -_I32_MAX - 1, -_I32_MAX - 1):
        return Special("-infinity")
    if abs(us * 1000) > _I64_MAX:
        raise ValueError("interval time part overflows int64 nanoseconds")
    return pa.MonthDayNano([months, days, us * 1000])


def _b_text(b, tm):
    return b.decode("utf-8")


def _b_jsonb(b, tm):
    if not b or b[0] != 1:
        raise ValueError("jsonb send form must start with version byte 1")
    return b[1:].decode("utf-8")


def _b_uuid(b, tm):
    _need(b, 16)
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# --- types kept as their canonical text: the binary form rendered as the server prints it

def _b_char(b, tm):
    # charout: a high-bit byte prints as a backslash and three octal digits
    if len(b) > 1:
        raise ValueError('"char" send form is at most one byte')
    if not b or b == b"\0":
        return ""
    return b.decode("ascii") if b[0] < 0x80 else "\\%03o" % b[0]


def _fmt_time_us(us):
    s, f = divmod(us, 1000000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    out = f"{h:02d}:{m:02d}:{s:02d}"
    if f:
        out += (".%06d" % f).rstrip("0")
    return out


def _fmt_offset(off):
    """An offset in seconds east of UTC as timestamptz_out/timetz_out print it."""
    sign = "-" if off < 0 else "+"
    off = abs(off)
    h, r = divmod(off, 3600)
    m, s = divmod(r, 60)
    out = f"{sign}{h:02d}"
    if m or s:
        out += f":{m:02d}"
    if s:
        out += f":{s:02d}"
    return out


def _b_timetz(b, tm):
    _need(b, 12)
    us, zone_west = struct.unpack(">qi", b)
    return _fmt_time_us(us) + _fmt_offset(-zone_west)


def _t_timetz(s, tm):
    m = _TIME_RE.match(s)
    if not m or not m[5]:
        raise ValueError("not a time with time zone")
    return s.decode()


def _fmt_date(days):
    y, m, d = _civil(days)
    bc = y <= 0
    return f"{(1 - y) if bc else y:04d}-{m:02d}-{d:02d}" + (" BC" if bc else ""), bc


def _fmt_timestamp(us_since_2000, tz):
    """timestamp_out under DateStyle ISO; timestamptz rendered in UTC ('+00')."""
    if us_since_2000 in (_I64_MAX, -_I64_MAX - 1):
        return "infinity" if us_since_2000 > 0 else "-infinity"
    days, us = divmod(us_since_2000, 86400000000)
    ds, bc = _fmt_date(days + _UNIX_DAYS)
    if bc:
        ds = ds[:-3]
    return ds + " " + _fmt_time_us(us) + ("+00" if tz else "") + (" BC" if bc else "")


def _b_inet(b, tm):
    if len(b) < 4:
        raise ValueError("inet send form shorter than its header")
    family, bits, is_cidr, n = b[0], b[1], b[2], b[3]
    addr = b[4:]
    if (family, n) not in ((2, 4), (3, 16)) or len(addr) != n or bits > 8 * n or is_cidr > 1:
        raise ValueError("bad inet send form")
    if family == 2:
        text = ".".join(str(x) for x in addr)
    else:
        words = struct.unpack(">8H", addr)
        # pg_inet_net_ntop (inet_net_ntop.c): longest run of >= 2 zero words (first wins),
        # dotted IPv4 tail for ::a.b.c.d and ::ffff:a.b.c.d
        best, cur = (-1, 0), (-1, 0)
        for i, w in enumerate(words):
            if w == 0:
                cur = (i if cur[0] < 0 else cur[0], cur[1] + 1)
                if cur[1] > best[1]:
                    best = cur
            else:
                cur = (-1, 0)
        if best[1] < 2:
            best = (-1, 0)
        parts, i = [], 0
        while i < 8:
            if i == best[0]:
                parts.append("" if i else ":")
                i += best[1]
                if i == 8:
                    parts.append("")
                continue
            if i == 6 and best[0] == 0 and (best[1] == 6 or (best[1] == 5 and words[5] == 0xFFFF)):
                parts.append(".".join(str(x) for x in addr[12:]))
                break
            parts.append(f"{words[i]:x}")
            i += 1
        text = ":".join(parts)
    if is_cidr or bits != 8 * n:
        text += f"/{bits}"
    return text


def _t_inet(s, tm):
    t = s.decode("ascii")
    ipaddress.ip_interface(t) if "/" in t else ipaddress.ip_address(t)
    return t


def _b_macaddr(b, tm):
    if len(b) not in (6, 8):
        raise ValueError("macaddr send form must be 6 or 8 bytes")
    return ":".join(f"{x:02x}" for x in b)


def _b_money(b, tm):
    # cash_out under lc_monetary C/en_US: '$', ',' thousands, '.' and 2 fraction digits
    _need(b, 8)
    (v,) = struct.unpack(">q", b)
    units, cents = divmod(abs(v), 100)
    return ("-" if v < 0 else "") + f"${units:,}.{cents:02d}"


def _b_bit(b, tm):
    if len(b) < 4:
        raise ValueError("bit send form shorter than its length")
    (nbits,) = struct.unpack_from(">i", b)
    if nbits < 0 or len(b) != 4 + (nbits + 7) // 8:
        raise ValueError("bit send form length does not match its bit count")
    return "".join(f"{x:08b}" for x in b[4:])[:nbits]


def _b_pg_lsn(b, tm):
    _need(b, 8)
    (v,) = struct.unpack(">Q", b)
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


def _fmt_float8(x, float4=False):
    """float8out (shortest round-trip, Ryu): exponent form when the decimal exponent is
    < -4 or >= 15, as PostgreSQL 12+ prints with extra_float_digits >= 1; ``float4``:
    float4out, the shortest digits of the float4 and the exponent form from 6."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    d = decimal.Decimal(str(np.float32(x)) if float4 else repr(x))
    sign, digits, exp = d.normalize().as_tuple()
    digs = "".join(map(str, digits))
    e10 = exp + len(digs) - 1
    sg = "-" if sign else ""
    if e10 < -4 or e10 >= (6 if float4 else 15):
        mant = digs[0] + ("." + digs[1:] if len(digs) > 1 else "")
        return f"{sg}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    return format(d.normalize(), "f")


def _b_point(b, tm):
    _need(b, 16)
    x, y = struct.unpack(">dd", b)
    return f"({_fmt_float8(x)},{_fmt_float8(y)})"


def _range_bound_text(sub, b):
    if sub in (23, 20):
        return str(int.from_bytes(b, "big", signed=True))
    if sub == 1700:
        sign, v, _ = _numeric_parts(b)
        return {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}[sign] if v is None else _numeric_text_of(v)
    if sub == 1082:
        (v,) = struct.unpack(">i", b)
        if v in (_I32_MAX, -_I32_MAX - 1):
            return "infinity" if v > 0 else "-infinity"
        return _fmt_date(v + _UNIX_DAYS)[0]
    (v,) = struct.unpack(">q", b)
    t = _fmt_timestamp(v, sub == 1184)
    return f'"{t}"' if " " in t else t


def _b_range(sub):
    def conv(b, tm):
        if not b:
            raise ValueError("empty range send form")
        flags, pos, bounds = b[0], 1, []
        if flags & 0x01:
            return "empty"
        for has in (not flags & 0x08, not flags & 0x10):
            if has:
                if len(b) < pos + 4:
                    raise ValueError("range bound length missing")
                (n,) = struct.unpack_from(">i", b, pos)
                if n < 0 or len(b) < pos + 4 + n:
                    raise ValueError("bad range bound length")
                bounds.append(_range_bound_text(sub, b[pos + 4:pos + 4 + n]))
                pos += 4 + n
            else:
                bounds.append("")
        if pos != len(b):
            raise ValueError("trailing bytes in range send form")
        return ("[" if flags & 0x02 else "(") + bounds[0] + "," + bounds[1] + ("]" if flags & 0x04 else ")")
    return conv


def _t_str(s, tm):
    return s.decode("utf-8")


def _b_unknown(b, tm):
    return bytes(b)


_TEXT = {
    "bool": _t_bool, "int2": _t_int(-2**15, 2**15 - 1), "int4": _t_int(-2**31, 2**31 - 1),
    "int8": _t_int(-2**63, 2**63 - 1), "oid": _t_int(0, 2**32 - 1), "float4": _t_float4, "float8": _t_float,
    "numeric": _t_numeric, "date": _t_date, "time": _t_time, "timestamp": _t_timestamp_(False),
    "timestamptz": _t_timestamp_(True), "interval": _t_interval, "text": _t_text, "bytea": _t_bytea,
    "uuid": _t_uuid, "jsonb": _t_text, "char": _t_str, "timetz": _t_timetz, "inet": _t_inet,
    "unknown": _t_str,
}
_BINARY = {
    "bool": _b_bool, "int2": _b_struct(">h"), "int4": _b_struct(">i"), "int8": _b_struct(">q"),
    "oid": _b_struct(">I"), "float4": _b_struct(">f"), "float8": _b_struct(">d"), "numeric": _b_numeric,
    "date": _b_date, "time": _b_time, "timestamp": _b_timestamp, "timestamptz": _b_timestamp,
    "interval": _b_interval, "text": _b_text, "bytea": lambda b, tm: bytes(b), "uuid": _b_uuid,
    "jsonb": _b_jsonb, "char": _b_char, "timetz": _b_timetz, "inet": _b_inet, "macaddr": _b_macaddr,
    "money": _b_money, "bit": _b_bit, "pg_lsn": _b_pg_lsn, "point": _b_point, "unknown": _b_unknown,
}
for _t in TYPES:
    if _t.conv.startswith("range:"):
        _BINARY[_t.conv] = _b_range(int(_t.conv[6:]))


# ------------------------------------------------------------------ arrays

_ARRAY_DIMS = re.compile(rb"((?:\[-?[0-9]+:-?[0-9]+\])+)=")


class _ArrayOut(NamedTuple):
    value: list
    special: str | None


def _shape(flat, dims):
    """Nest a row-major flat list into ``dims`` lengths."""
    for n in reversed(dims[1:]):
        flat = [flat[i:i + n] for i in range(0, len(flat), n)]
    return flat


def _array_special(bounds, elem_specials):
    parts = []
    if any(lb != 1 for lb, _ in bounds):
        parts.append("".join(f"[{lb}:{lb + n - 1}]" for lb, n in bounds))
    parts += [f"{i}={s}" for i, s in elem_specials]
    return ";".join(parts) or None


def _elem(conv_fn, raw, r, elem_specials, idx):
    v = conv_fn(raw, r.typmod)
    if isinstance(v, Special):
        elem_specials.append((idx, str(v)))
        return None
    return v


def _t_array(s, r):
    elem = r.elem
    conv_fn = _TEXT.get(elem.conv, _t_str)
    bounds = None
    m = _ARRAY_DIMS.match(s)
    pos = 0
    if m:
        bounds = [tuple(int(x) for x in d.split(b":")) for d in re.findall(rb"\[(-?[0-9]+:-?[0-9]+)\]", m[1])]
        pos = m.end()
    flat, especials, dims_seen = [], [], {}
    depth, n = 0, len(s)
    counts = []

    def fail(why):
        raise ValueError(f"bad array text at byte {pos}: {why}")

    if s[pos:pos + 1] != b"{":
        fail("expected '{'")
    while pos < n:
        c = s[pos:pos + 1]
        if c == b"{":
            depth += 1
            counts.append(0)
            pos += 1
            continue
        if c == b"}":
            if depth == 0:
                fail("unbalanced '}'")
            k = counts.pop()
            if dims_seen.setdefault(depth, k) != k:
                fail("sub-arrays of different lengths")
            depth -= 1
            pos += 1
            if depth and s[pos:pos + 1] == b",":
                pos += 1
            if depth == 0:
                break
            counts[-1] += 1
            continue
        if c == b",":
            fail("empty element")
        if c == b'"':
            pos += 1
            buf = bytearray()
            while True:
                if pos >= n:
                    fail("unterminated quoted element")
                ch = s[pos]
                if ch == 0x5C:
                    if pos + 1 >= n:
                        fail("backslash at end")
                    buf.append(s[pos + 1])
                    pos += 2
                elif ch == 0x22:
                    pos += 1
                    break
                else:
                    buf.append(ch)
                    pos += 1
            flat.append(_elem(conv_fn, bytes(buf), elem, especials, len(flat)))
        else:
            j = pos
            while j < n and s[j:j + 1] not in (b",", b"}"):
                j += 1
            tok = s[pos:j].strip()
            pos = j
            if tok.upper() == b"NULL":
                flat.append(None)
            else:
                flat.append(_elem(conv_fn, tok, elem, especials, len(flat)))
        counts[-1] += 1
        if s[pos:pos + 1] == b",":
            pos += 1
    if depth != 0 or pos != n:
        fail("trailing bytes or unbalanced braces")
    ndim = len(dims_seen) if flat or dims_seen.get(1, 0) else 0
    dims = [dims_seen[d] for d in range(1, ndim + 1)]
    if bounds is not None and [b - a + 1 for a, b in bounds] != dims:
        fail("bounds prefix does not match the dimensions")
    lbs = [a for a, _ in bounds] if bounds else [1] * ndim
    if not dims:
        return _ArrayOut([], None), 0
    return _ArrayOut(_shape(flat, dims), _array_special(list(zip(lbs, dims, strict=True)), especials)), ndim


def _b_array(b, r):
    elem = r.elem
    conv_fn = _BINARY.get(elem.conv, _b_unknown)
    if len(b) < 12:
        raise ValueError("array send form shorter than its header")
    ndim, hasnull, elemoid = struct.unpack_from(">iiI", b)
    if ndim < 0 or ndim > 6 or hasnull not in (0, 1) or len(b) < 12 + 8 * ndim:
        raise ValueError("bad array header")
    dims = [struct.unpack_from(">ii", b, 12 + 8 * k) for k in range(ndim)]
    total = 1
    for n, _ in dims:
        if n < 0:
            raise ValueError("negative array dimension")
        total *= n
    pos, flat, especials = 12 + 8 * ndim, [], []
    for _ in range(total if ndim else 0):
        if len(b) < pos + 4:
            raise ValueError("array element length missing")
        (n,) = struct.unpack_from(">i", b, pos)
        pos += 4
        if n == -1:
            flat.append(None)
            continue
        if n < 0 or len(b) < pos + n:
            raise ValueError("bad array element length")
        flat.append(_elem(conv_fn, b[pos:pos + n], elem, especials, len(flat)))
        pos += n
    if pos != len(b):
        raise ValueError("trailing bytes in array send form")
    if not ndim or total == 0:
        return _ArrayOut([], None), 0
    return _ArrayOut(_shape(flat, [n for n, _ in dims]),
                     _array_special([(lb, n) for n, lb in dims], especials)), ndim


# ------------------------------------------------------------------ columns

class ConvertedColumn(NamedTuple):
    """``values``: the Arrow column. ``special``: None when no value is special, else a
    ``pa.string()`` array, null for ordinary values, and for the others what the null
    (or list) in ``values`` stands for: ``infinity`` / ``-infinity`` / ``NaN``, or for
    arrays the bounds prefix when a lower bound is not 1 (``[0:2]``) and special
    elements by flat index (``2=infinity``), ';'-separated."""

    values: pa.Array
    special: pa.Array | None


def _py_value(kind, raw, r):
    """One value in Arrow-ready form (ints for dates/times, Decimal, MonthDayNano, nested
    lists) plus its special marker; raises ValueError on bad input."""
    if r.conv == "array":
        out, ndim = (_b_array if kind == "b" else _t_array)(raw, r)
        return out.value, out.special, ndim
    table = _BINARY if kind == "b" else _TEXT
    fn = table.get(r.conv) or (_t_str if kind == "t" else _b_unknown)
    v = fn(raw, r.typmod)
    if isinstance(v, Special):
        return None, str(v), 1
    return v, None, 1


def _to_binary_array(a):
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    if not isinstance(a, pa.Array):
        a = pa.array(a, pa.binary())
    if pa.types.is_large_binary(a.type) or pa.types.is_string(a.type) or pa.types.is_large_string(a.type):
        a = a.cast(pa.binary())
    if not pa.types.is_binary(a.type):
        raise TypeError(f"data must be a binary array, got {a.type}")
    return a


def _to_kind_array(a):
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    if not isinstance(a, pa.Array):
        a = pa.array(a, pa.string())
    if pa.types.is_dictionary(a.type):
        a = a.dictionary_decode()
    if not pa.types.is_string(a.type):
        a = a.cast(pa.string())
    return a


def _fail(exc, index, r, kind, raw):
    msg = exc.message if hasattr(exc, "message") else str(exc)
    shown = bytes(raw[:40]) if raw is not None else None
    return ConversionError(f"value {index} ({r.name}, type OID {r.oid}, kind '{kind}') {shown!r}: {msg}",
                           index, r.oid, r.name, kind, shown)


def _convert_py(kinds, data, r, binary, ndim):
    values, specials, ndims = [], [], []
    klist = kinds.to_pylist()
    dlist = data.to_pylist()
    for i, (k, raw) in enumerate(zip(klist, dlist, strict=True)):
        if k in (None, "n", "u"):
            values.append(None)
            specials.append(None)
            continue
        if k not in ("t", "b"):
            raise _fail(ValueError("tuple column kind is not n/u/t/b"), i, r, k, raw)
        if raw is None:
            raise _fail(ValueError("kind 't'/'b' with null data"), i, r, k, raw)
        try:
            v, sp, nd = _py_value(k, raw, r)
        except (ValueError, UnicodeDecodeError, struct.error, decimal.InvalidOperation, OverflowError) as e:
            raise _fail(e, i, r, k, raw) from None
        if r.conv == "unknown" and binary and k == "t":
            v = bytes(raw)
        values.append(v)
        specials.append(sp)
        ndims.append(nd)
    if r.conv == "array":
        if ndim is None:
            ndim = max([d for d in ndims if d] or [1])
        bad = [i for i, v in enumerate(values) if v and _depth(v) not in (0, ndim)]
        if bad:
            i = bad[0]
            raise _fail(ValueError(f"array has {_depth(values[i])} dimensions, the column is converted with"
                                   f" ndim={ndim} (pass ndim=)"), i, r, klist[i], dlist[i])
    typ = _arrow_of(r, binary, ndim or 1)
    try:
        if pa.types.is_decimal(typ):
            # built at full precision and viewed: pa.array rejects scale > precision (numeric(3,5))
            wide = (pa.decimal128 if pa.types.is_decimal128(typ) else pa.decimal256)(
                38 if pa.types.is_decimal128(typ) else 76, typ.scale)
            arr = pa.array(values, type=wide).view(typ)
        else:
            arr = pa.array(values, type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise ConversionError(f"{r.name} (type OID {r.oid}): {e}", None, r.oid, r.name) from None
    sp = pa.array(specials, pa.string()) if any(s is not None for s in specials) else None
    return ConvertedColumn(arr, sp)


def _depth(v):
    d = 0
    while isinstance(v, list):
        d += 1
        if not v:
            break
        v = v[0]
    return d


def _materialize(index) -> np.ndarray:
    """An index as one int64 array: ``(offsets, k)`` means ``offsets + k`` (-1 stays -1)."""
    if isinstance(index, tuple):
        base, k = index
        base = np.asarray(base, dtype=np.int64)
        return np.where(base >= 0, base + k, -1)
    return np.ascontiguousarray(index, dtype=np.int64)


def _take_at(kinds, data, index):
    """kinds/data at ``index`` (-1 = an absent value: kind 'n')."""
    take = pa.array(index, pa.int64(), mask=index < 0)
    return pa.compute.fill_null(kinds.take(take), "n"), data.take(take)


def _fast_spec(r):
    """(code, precision, scale) of the compiled converter for a resolved type, or None."""
    if _NO_EXT or not r.fast:
        return None
    code, p, s = r.fast, 0, 0
    if code == F_NUMERIC:
        ps = numeric_typmod(r.typmod)
        if ps is None or not 1 <= ps[0] <= 38:
            return None
        p, s = ps
    return code, p, s


def _fast_result(res, r, kinds, data, index):
    """A compiled converter's per-column result as ConvertedColumn / ConversionError /
    None (SLOW: convert in Python)."""
    from . import _convert
    if isinstance(res, _convert._ConvertFailure):
        at = res.index if index is None else int(_materialize(index)[res.index])
        raw, kind = (data[at].as_py(), kinds[at].as_py()) if at >= 0 else (None, None)
        return _fail(res, res.index, r, kind, raw)
    if res is None:
        return None
    arr, codes = res
    sp = None
    if codes is not None:
        names = pa.array([None, *SPECIAL_NAMES[1:]], pa.string())
        sp = names.take(pa.array(codes, pa.int8()))
    return ConvertedColumn(arr, sp)


def convert_columns(kinds, data, types: list, registry: TypeRegistry | None = None, *, indexes: list,
                    fast: bool | None = None) -> list:
    """Several columns of one flat TupleData child at once (the columns of change rows):
    ``types``: (type_oid, type_modifier) per column; ``indexes``: per column the element
    of each value (int64 numpy array, -1 = null; or ``(offsets, k)``: element
    ``offsets[i] + k``, offsets -1 = null). The compiled converters run over all
    columns together, row block by row block (one pass over the values, where column
    after column reads them once per column). Returns per column a
    :class:`ConvertedColumn`, or the :class:`ConversionError` of that column (returned,
    not raised: one bad column does not lose the others)."""
    kinds = _to_kind_array(kinds)
    data = _to_binary_array(data)
    if fast is None:
        fast = not _NO_EXT
    resolved = [_resolve(oid, tm, registry) for oid, tm in types]
    specs = [_fast_spec(r) if fast else None for r in resolved]
    out = [None] * len(types)
    quick = [j for j, sp in enumerate(specs) if sp is not None]
    if quick:
        from . import _convert
        idx = [indexes[j] for j in quick]
        res = _convert.convert_columns_fast([specs[j] for j in quick], kinds, data, idx)
        for j, ix, rj in zip(quick, idx, res, strict=True):
            out[j] = _fast_result(rj, resolved[j], kinds, data, ix)
    for j in range(len(resolved)):
        if out[j] is None:
            k, d = _take_at(kinds, data, _materialize(indexes[j]))
            try:
                out[j] = convert_column(k, d, *types[j], registry, fast=False)
            except ConversionError as e:
                out[j] = e
    return out


def convert_column(kinds, data, type_oid: int, type_modifier: int = -1, registry: TypeRegistry | None = None,
                   *, binary: bool | None = None, ndim: int | None = None, fast: bool | None = None,
                   index=None) -> ConvertedColumn:
    """Convert one column of TupleData values.

    ``kinds``: 'n'/'u'/'t'/'b' per value (string array or list; 'n' and 'u' give null —
    the caller tracks unchanged TOAST 'u' itself); ``data``: the values' bytes (binary
    array or list). ``binary``: for unknown types, whether the column is binary (default:
    True when any value has kind 'b'). ``ndim``: for arrays, the list depth (default: the
    largest dimensionality in the data, at least 1). Raises :class:`ConversionError`
    naming the value index and the type. ``index`` (int64 numpy array, -1 = null): convert
    elements ``index`` of kinds/data instead of all of them, read in place by the fast
    converters (the columns of change rows inside the flat tuple children).
    """
    kinds = _to_kind_array(kinds)
    data = _to_binary_array(data)
    if len(kinds) != len(data):
        raise ValueError(f"kinds has {len(kinds)} values but data has {len(data)}")
    r = _resolve(type_oid, type_modifier, registry)
    if fast is None:
        fast = not _NO_EXT
    spec = _fast_spec(r) if fast else None
    if index is not None:
        index = np.ascontiguousarray(index, dtype=np.int64)
        if spec is None:
            kinds, data, index = *_take_at(kinds, data, index), None
    if spec is not None:
        from . import _convert
        res = _fast_result(_convert.convert_columns_fast([spec], kinds, data, [index])[0], r, kinds, data, index)
        if isinstance(res, ConversionError):
            raise res
        if res is not None:
            return res
        if index is not None:   # a value the fast converter leaves to Python (SLOW)
            kinds, data = _take_at(kinds, data, index)
    if binary is None:
        binary = r.conv == "unknown" and bool(pa.compute.any(pa.compute.equal(kinds, "b")).as_py())
    return _convert_py(kinds, data, r, binary, ndim)


def convert_value(kind: str, data: bytes | None, type_oid: int, type_modifier: int = -1,
                  registry: TypeRegistry | None = None, *, fast: bool | None = None):
    """One value as a Python object: None for 'n'/'u', :class:`Special` for a value Arrow
    holds as null plus a marker, else the Arrow value's ``as_py()``; a :class:`Physical`
    int (days or µs since 1970) when Python cannot hold it (dates/timestamps BC or after 9999). For arrays with a special
    marker, a tuple ``(list, Special(marker))``."""
    col = convert_column([kind], [data], type_oid, type_modifier, registry, fast=fast)
    sp = col.special[0].as_py() if col.special is not None else None
    scalar = col.values[0]
    if sp is not None and not scalar.is_valid:
        return Special(sp)
    try:
        v = scalar.as_py()
    except (ValueError, OverflowError):
        phys = pa.int32() if pa.types.is_date32(scalar.type) else pa.int64()
        return Physical(scalar.cast(phys).as_py())
    return (v, Special(sp)) if sp is not None else v
