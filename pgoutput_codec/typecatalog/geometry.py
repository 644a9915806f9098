"""PostGIS geometry and geography as ISO WKB (Arrow ``binary``), equal to
``ST_AsBinary``: little-endian (NDR), Z/M as the type code + 1000/2000/3000, no SRID.

The text form (``geometry_out``) is hex EWKB, the send form EWKB: PostGIS's extended
WKB, whose type word carries flags (Z 0x80000000, M 0x40000000, SRID 0x20000000, the
SRID then following it, on the outer geometry only). Every type PostGIS writes is read:
points, line strings, polygons, their multi types and collections, circular strings,
compound curves, curve polygons, multi curves and surfaces, polyhedral surfaces, TINs,
triangles, empty geometries (an empty point's coordinates are NaN), nested to any depth
up to 32, big- and little-endian.

The SRID: where the column's typmod fixes it (``geometry(Point,4326)``, and
``geography(Point)``, whose typmod PostGIS sets to 4326) the Arrow type is the GeoArrow
extension type ``geoarrow.wkb`` over binary with metadata ``{"crs": "EPSG:<srid>"}``
(:class:`GeoWKB`; the ``geoarrow`` package is not needed, and may be installed); a value
whose SRID is not that one says it in the column's special markers (``srid=3857``).
Where the typmod fixes none (``geometry``, ``geometry(Point)``, ``geography`` without
typmod, which holds any geodetic SRID) the column is ``binary`` and each value's SRID
goes in the converted column's ``srid`` (:func:`srid_column`: int32, 0 where the value
has none), which the table layer names ``<column>__srid``; inside an array or a
composite, where no companion column sits, a value's non-zero SRID is a marker
(``1=srid=3857``, ``attr=srid=3857``). In an array's text form the elements are
separated by ``:`` (the types' ``typdelim``).

Known by ``("postgis", "geometry" | "geography")``. The compiled twin is
``_codecs/geometry.pxi``."""

from __future__ import annotations

import json
import re
import struct

import numpy as np
import pyarrow as pa

from .errors import Noted, Sited
from .typeinfo import Converter, ExtensionType, fast_code

__all__ = ["CONVERTERS", "TYPES", "EXTENSION_TYPES", "GeoWKB", "typmod_srid", "column_srid", "wkb_type", "srid_column",
           "SRID_CONVS"]

_Z, _M, _SRID = 0x80000000, 0x40000000, 0x20000000
_POINTS = {2, 8}                        # line string, circular string: a count of points
_RINGS = {3, 17}                        # polygon, triangle: a count of rings of points
_PARTS = {4, 5, 6, 7, 9, 10, 11, 12, 15, 16}   # multi types, collections, curves, surfaces, TIN
_DEEPEST = 32
_HEX = re.compile(rb"(?:[0-9A-Fa-f]{2})*\Z")


class GeoWKB(pa.ExtensionType):
    """GeoArrow's ``geoarrow.wkb`` over binary, its CRS in the metadata."""

    def __init__(self, crs: str | None = None):
        self.crs = crs
        super().__init__(pa.binary(), "geoarrow.wkb")

    def __eq__(self, other):
        # pyarrow's own equality of an extension type looks at its name alone
        if isinstance(other, pa.ExtensionType):
            return other.extension_name == "geoarrow.wkb" and getattr(other, "crs", None) == self.crs
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(("geoarrow.wkb", self.crs))

    def __repr__(self):
        return f"GeoWKB(crs={self.crs!r})"

    def __arrow_ext_serialize__(self):
        return json.dumps({"crs": self.crs} if self.crs else {}).encode()

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        meta = json.loads(serialized.decode() or "{}")
        crs = meta.get("crs")
        return cls(crs if isinstance(crs, str) else None)


def _register():
    try:
        pa.register_extension_type(GeoWKB())
    except pa.ArrowKeyError:    # the geoarrow package (or a copy of this module) registered its own
        pass


_register()


def typmod_srid(tm: int) -> int:
    """The SRID a PostGIS typmod fixes (0: none)."""
    if tm < 0:
        return 0
    return ((tm & 0x0FFFFF00) - (tm & 0x10000000)) >> 8


def column_srid(geography: bool, tm: int) -> int:
    """The SRID every value of a column has, from its typmod; 0 where the typmod fixes
    none (a ``geography`` without typmod holds any geodetic SRID: 4326, 4269, …)."""
    return typmod_srid(tm)


#: the converters whose columns may carry their values' SRIDs in a ``__srid`` companion
SRID_CONVS = frozenset({"geometry", "geography"})


def srid_column(conv: str, tm: int) -> bool:
    """Whether a column of converter ``conv`` and typmod ``tm`` has a ``<column>__srid``
    companion (int32): a geometry or geography whose typmod fixes no SRID. Decided by
    the type alone, so a table's schema is known before its data."""
    return conv in SRID_CONVS and typmod_srid(tm) == 0


def wkb_type(srid: int) -> pa.DataType:
    return GeoWKB(f"EPSG:{srid}") if srid else pa.binary()


def _geometry(b, pos, out, depth):
    """The geometry at b[pos] appended to ``out`` as ISO WKB; (end position, SRID or None)."""
    if depth > _DEEPEST:
        raise ValueError(f"EWKB nested deeper than {_DEEPEST}")
    if pos + 5 > len(b):
        raise ValueError("EWKB shorter than its header")
    order = b[pos]
    if order > 1:
        raise ValueError("EWKB byte order is neither 0 nor 1")
    e = "<" if order else ">"
    (word,) = struct.unpack_from(e + "I", b, pos + 1)
    pos += 5
    base = word & 0x0FFFFFFF
    if base < 1 or base > 17 or base in (13, 14):
        raise ValueError(f"EWKB geometry type {base} is not one PostGIS writes")
    srid = None
    if word & _SRID:
        if depth:
            raise ValueError("EWKB SRID on a nested geometry")
        if pos + 4 > len(b):
            raise ValueError("EWKB shorter than its SRID")
        (srid,) = struct.unpack_from(e + "i", b, pos)
        pos += 4
    dims = 2 + bool(word & _Z) + bool(word & _M)
    out += struct.pack("<BI", 1, base + (1000 if word & _Z else 0) + (2000 if word & _M else 0))

    def count():
        nonlocal pos
        if pos + 4 > len(b):
            raise ValueError("EWKB shorter than its counts")
        (k,) = struct.unpack_from(e + "I", b, pos)
        pos += 4
        out.extend(struct.pack("<I", k))
        return k

    def points(k):
        nonlocal pos
        size = 8 * dims * k
        if size > len(b) - pos:
            raise ValueError("EWKB shorter than its coordinates")
        out.extend(np.frombuffer(b, e + "u8", dims * k, pos).astype("<u8").tobytes())
        pos += size

    if base == 1:
        points(1)
    elif base in _POINTS:
        points(count())
    elif base in _RINGS:
        for _ in range(count()):
            points(count())
    else:
        for _ in range(count()):
            pos, _ = _geometry(b, pos, out, depth + 1)
    return pos, srid


def _iso(b, srid0):
    out = bytearray()
    end, srid = _geometry(b, 0, out, 0)
    if end != len(b):
        raise ValueError("EWKB longer than its geometry")
    srid = srid or 0
    if not srid0:
        return Sited(bytes(out), srid)
    return bytes(out) if srid == srid0 else Noted(bytes(out), f"srid={srid}")


def _text(geography):
    def parse(s, tm):
        if not _HEX.match(s):
            raise ValueError("geometry text is not hex EWKB")
        return _iso(bytes.fromhex(s.decode("ascii")), column_srid(geography, tm))
    return parse


def _send(geography):
    def parse(b, tm):
        return _iso(bytes(b), column_srid(geography, tm))
    return parse


CONVERTERS = [
    Converter("geometry", _text(False), _send(False), lambda tm: wkb_type(column_srid(False, tm)), delimiter=b":"),
    Converter("geography", _text(True), _send(True), lambda tm: wkb_type(column_srid(True, tm)), delimiter=b":"),
]

TYPES: list = []

EXTENSION_TYPES = [
    ExtensionType("postgis", "geometry", "geometry", fast_code("GEOMETRY")),
    ExtensionType("postgis", "geography", "geography", fast_code("GEOMETRY")),
]
