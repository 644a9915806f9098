"""Ranges and multiranges, built-in (int4range, int8range, numrange, daterange, tsrange,
tstzrange and their multiranges) and user-defined (``CREATE TYPE … AS RANGE``): a range is
``struct<lower: T, upper: T, lower_inc: bool, upper_inc: bool, empty: bool>`` with T the
subtype's Arrow type, an unbounded side a null bound (a bound that is a special value of
its subtype, a date ``infinity``, is no unbounded side: the bound is null and the column's
note says ``lower=infinity``); an empty range has both bounds null and ``empty`` true. A
multirange is a ``list`` of that struct.

Text forms: ``range_out`` (``[1,5)``, ``empty``, ``(,5]``, bounds quoted when they hold
special characters, ``""`` and a backslash escaping inside quotes) and ``multirange_out``
(``{[1,3),[5,7)}``). Send forms: ``range_send`` (a flags byte: 0x01 empty, 0x02 lower
inclusive, 0x04 upper inclusive, 0x08 lower unbounded, 0x10 upper unbounded; then per
present bound int32 length + the subtype's send form) and ``multirange_send`` (int32
count, then per range int32 length + its send form).

A column is split (:mod:`.nested`): the bounds of all its values (two child values per
range, kind 'n' for an absent bound) are converted by the subtype's converter."""

from __future__ import annotations

import struct

import pyarrow as pa

from .nested import Split, split_values
from .typeinfo import Converter, TypeInfo

__all__ = ["CONVERTERS", "TYPES", "SUBTYPE", "MULTIRANGE_OF", "EMPTY", "LOWER_INC", "UPPER_INC", "LOWER_INF",
           "UPPER_INF", "range_arrow", "parse_text_range", "parse_binary_range", "parse_text_multirange",
           "parse_binary_multirange", "split_ranges", "split_multiranges"]

EMPTY, LOWER_INC, UPPER_INC, LOWER_INF, UPPER_INF = 0x01, 0x02, 0x04, 0x08, 0x10

#: (OID, name, array OID, subtype OID, multirange OID, multirange name, multirange array OID)
_RANGES = [(3904, "int4range", 3905, 23, 4451, "int4multirange", 6150),
           (3906, "numrange", 3907, 1700, 4532, "nummultirange", 6151),
           (3908, "tsrange", 3909, 1114, 4533, "tsmultirange", 6152),
           (3910, "tstzrange", 3911, 1184, 4534, "tstzmultirange", 6153),
           (3912, "daterange", 3913, 1082, 4535, "datemultirange", 6155),
           (3926, "int8range", 3927, 20, 4536, "int8multirange", 6157)]

#: built-in range OID -> subtype OID
SUBTYPE = {r[0]: r[3] for r in _RANGES}
#: built-in multirange OID -> range OID
MULTIRANGE_OF = {r[4]: r[0] for r in _RANGES}

# typed by the registry from the subtype (arrow_of); read column-wise (columns.py)
CONVERTERS = [Converter("range", None, None, fast_args=lambda tm: None),
              Converter("multirange", None, None, fast_args=lambda tm: None)]

TYPES = ([TypeInfo(oid, name, array_oid, "range") for oid, name, array_oid, *_ in _RANGES]
         + [TypeInfo(m, mname, marr, "multirange") for *_, m, mname, marr in _RANGES])


def range_arrow(sub: pa.DataType) -> pa.DataType:
    """The Arrow type of a range of subtype ``sub``."""
    return pa.struct([pa.field("lower", sub), pa.field("upper", sub), pa.field("lower_inc", pa.bool_()),
                      pa.field("upper_inc", pa.bool_()), pa.field("empty", pa.bool_())])


def _text_bound(s, pos, n):
    """A bound of ``range_out`` text from ``pos``: (bytes or None for unbounded, next pos)."""
    if pos < n and s[pos] in (0x2C, 0x29, 0x5D):   # ',', ')', ']' at once: unbounded
        return None, pos
    buf, inq = bytearray(), False
    while True:
        if pos >= n:
            raise ValueError("range text ends inside a bound")
        c = s[pos]
        if c == 0x5C:
            if pos + 1 >= n:
                raise ValueError("range text ends after a backslash")
            buf.append(s[pos + 1])
            pos += 2
        elif c == 0x22:
            if inq and pos + 1 < n and s[pos + 1] == 0x22:
                buf.append(0x22)
                pos += 2
            else:
                inq = not inq
                pos += 1
        elif not inq and c in (0x2C, 0x29, 0x5D):
            return bytes(buf), pos
        else:
            buf.append(c)
            pos += 1


def parse_text_range(s: bytes):
    """(flags, lower bytes or None, upper bytes or None) of a ``range_out`` text; raises
    ValueError."""
    if s == b"empty":
        return EMPTY, None, None
    n = len(s)
    if n < 3 or s[0] not in (0x5B, 0x28):
        raise ValueError("range text must start with '[' or '('")
    flags = LOWER_INC if s[0] == 0x5B else 0
    lower, pos = _text_bound(s, 1, n)
    if pos >= n or s[pos] != 0x2C:
        raise ValueError("range text has no ',' between its bounds")
    upper, pos = _text_bound(s, pos + 1, n)
    if pos != n - 1 or s[pos] == 0x2C:
        raise ValueError("bytes after the range's closing bracket")
    if s[pos] == 0x5D:
        flags |= UPPER_INC
    if lower is None:
        flags = (flags & ~LOWER_INC) | LOWER_INF
    if upper is None:
        flags = (flags & ~UPPER_INC) | UPPER_INF
    return flags, lower, upper


def parse_binary_range(b: bytes):
    """(flags, lower bytes or None, upper bytes or None) of a ``range_send`` form."""
    if not b:
        raise ValueError("empty range send form")
    flags, pos, bounds = b[0] & 0x1F, 1, []   # other bits are no part of a value (as range_recv)
    if flags & EMPTY:
        if len(b) != 1:
            raise ValueError("trailing bytes in empty range send form")
        return EMPTY, None, None
    for has in (not flags & LOWER_INF, not flags & UPPER_INF):
        if not has:
            bounds.append(None)
            continue
        bound, pos = _prefixed(b, pos, "range bound")
        bounds.append(bound)
    if pos != len(b):
        raise ValueError("trailing bytes in range send form")
    return flags, bounds[0], bounds[1]


def parse_text_multirange(s: bytes) -> list:
    """The ranges of a ``multirange_out`` text, each its ``range_out`` bytes."""
    n = len(s)
    if n < 2 or s[0] != 0x7B:
        raise ValueError("multirange text must start with '{'")
    if s == b"{}":
        return []
    out, pos = [], 1
    while True:
        start = pos
        if s[start:start + 5] == b"empty":
            pos += 5
        else:
            if pos >= n or s[pos] not in (0x5B, 0x28):
                raise ValueError("multirange text: a range must start with '[' or '('")
            pos += 1
            inq = False
            while True:
                if pos >= n:
                    raise ValueError("multirange text ends inside a range")
                c = s[pos]
                if c == 0x5C:
                    pos += 2
                    continue
                if c == 0x22:
                    inq = not inq
                elif not inq and c in (0x29, 0x5D):
                    pos += 1
                    break
                pos += 1
        out.append(bytes(s[start:pos]))
        if pos >= n:
            raise ValueError("multirange text ends without '}'")
        if s[pos] == 0x7D:
            pos += 1
            break
        if s[pos] != 0x2C:
            raise ValueError("multirange text: ranges must be separated by ','")
        pos += 1
    if pos != n:
        raise ValueError("bytes after the multirange's '}'")
    return out


def parse_binary_multirange(b: bytes) -> list:
    """The ranges of a ``multirange_send`` form, each its ``range_send`` bytes."""
    if len(b) < 4:
        raise ValueError("multirange send form shorter than its count")
    (count,) = struct.unpack_from(">i", b)
    if count < 0 or count > (len(b) - 4) // 5:
        raise ValueError("bad multirange range count")
    pos, out = 4, []
    for _ in range(count):
        item, pos = _prefixed(b, pos, "multirange range")
        out.append(item)
    if pos != len(b):
        raise ValueError("trailing bytes in multirange send form")
    return out


def _prefixed(b, pos, what):
    """The Int32-length-prefixed bytes at ``pos`` of a send form and the position after them."""
    if len(b) < pos + 4:
        raise ValueError(f"{what} length missing")
    (n,) = struct.unpack_from(">i", b, pos)
    if n < 0 or len(b) < pos + 4 + n:
        raise ValueError(f"bad {what} length")
    return bytes(b[pos + 4:pos + 4 + n]), pos + 4 + n


def _one_range(k, raw):
    f, lo, hi = (parse_binary_range if k == "b" else parse_text_range)(raw)
    return f, [(0, lo), (0, hi)]


def _one_multirange(k, raw):
    return 0, [(0, r) for r in (parse_binary_multirange if k == "b" else parse_text_multirange)(raw)]


def split_ranges(kinds, data, refuse=False) -> Split:
    """The plain-Python splitter of a range column (twin of ``_convert.split_ranges``):
    two parts per range, its lower and upper bound ('n' where unbounded or empty)."""
    return split_values(kinds, data, _one_range, refuse)


def split_multiranges(kinds, data, refuse=False) -> Split:
    """The plain-Python splitter of a multirange column (twin of
    ``_convert.split_multiranges``): its ranges, each as sent."""
    return split_values(kinds, data, _one_multirange, refuse)
