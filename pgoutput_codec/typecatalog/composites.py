"""Composite types (row types, and domains over them): a ``struct`` of the attributes,
each typed as its own type (recursively: a composite in a composite is a struct in a
struct).

Text form (``record_out``): ``(1,"a b",,"")``: attributes separated by commas; an empty
unquoted attribute is NULL; ``"..."`` quotes, ``""`` inside quotes and a backslash escape
the next character. Send form (``record_send``): int32 count, then per attribute its type
OID (uint32), int32 length (-1: NULL) and that many bytes of the attribute's send form.

A column is split (:mod:`.nested`): the attributes of all its values become one flat
column converted attribute by attribute by the attribute type's converter.

Versions: an archive's catalog may hold several definitions of one type (an attribute
added mid-archive; ``UserType.earlier``). The struct is their union (every attribute any
version had, in order of first appearance, typed as the newest version types it). Each
value is read with the definition whose shape it has: its attribute count, and in the send
form also the attribute type OIDs; of several that fit, the newest. Two definitions of the
same count differing only in attribute types cannot be told apart in text form (the newest
is used). An attribute the value's definition lacks is null."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from .nested import Split, split_values

__all__ = ["parse_text_record", "parse_binary_record", "split_records", "versions_of", "union_attributes",
           "version_of_values"]


def parse_text_record(s: bytes) -> list:
    """The attributes of a ``record_out`` text (bytes each, None for NULL); raises
    ValueError."""
    n = len(s)
    if n < 2 or s[0] != 0x28:
        raise ValueError("composite text must start with '('")
    out, pos = [], 1
    while True:
        buf = bytearray()
        quoted = False
        inq = False
        while True:
            if pos >= n:
                raise ValueError("composite text ends inside an attribute")
            c = s[pos]
            if c == 0x5C:          # backslash: the next byte as it is
                if pos + 1 >= n:
                    raise ValueError("composite text ends after a backslash")
                buf.append(s[pos + 1])
                pos += 2
            elif c == 0x22:        # quote
                if inq and pos + 1 < n and s[pos + 1] == 0x22:
                    buf.append(0x22)
                    pos += 2
                else:
                    inq = not inq
                    quoted = True
                    pos += 1
            elif not inq and c in (0x2C, 0x29):   # ',' or ')'
                break
            else:
                buf.append(c)
                pos += 1
        out.append(bytes(buf) if buf or quoted else None)
        if s[pos] == 0x29:
            pos += 1
            break
        pos += 1
    if pos != n:
        raise ValueError("bytes after the composite's ')'")
    return out


def parse_binary_record(b: bytes) -> list:
    """The attributes of a ``record_send`` form, ``(type OID, bytes or None)`` each;
    raises ValueError."""
    if len(b) < 4:
        raise ValueError("composite send form shorter than its count")
    (count,) = struct.unpack_from(">i", b)
    if count < 0:
        raise ValueError("negative attribute count")
    if count > (len(b) - 4) // 8:
        raise ValueError("composite send form shorter than its attributes")
    pos, out = 4, []
    for _ in range(count):
        if len(b) < pos + 8:
            raise ValueError("composite send form shorter than its attributes")
        oid, length = struct.unpack_from(">Ii", b, pos)
        pos += 8
        if length == -1:
            out.append((oid, None))
            continue
        if length < 0 or len(b) < pos + length:
            raise ValueError("bad attribute length")
        out.append((oid, bytes(b[pos:pos + length])))
        pos += length
    if pos != len(b):
        raise ValueError("trailing bytes in composite send form")
    return out


def split_records(kinds, data, refuse=False) -> Split:
    """The plain-Python splitter of a column of composite values (the twin of
    ``_convert.split_records``)."""
    return split_values(kinds, data, _one_record, refuse)


def _one_record(k, raw):
    return 0, [(0, a) for a in parse_text_record(raw)] if k == "t" else parse_binary_record(raw)


def versions_of(user) -> list:
    """A composite's definitions, oldest first: ``attributes`` of each."""
    return [tuple(v.attributes) for v in (*user.earlier, user)]


def union_attributes(user) -> list:
    """Names of the union of a composite's definitions in order of first appearance, each
    with the (type OID, typmod) its newest definition gives it."""
    order, newest = [], {}
    for attrs in versions_of(user):
        for name, oid, typmod in attrs:
            if name not in newest:
                order.append(name)
            newest[name] = (oid, typmod)
    return [(name, *newest[name]) for name in order]


def version_of_values(split: Split, binary: np.ndarray, versions: list):
    """Per value the index of the definition it is read with (-1: a null value, or one no
    definition fits), and the reason of each value no definition fits ({index: reason})."""
    counts = split.counts
    n = len(counts)
    starts = np.zeros(n, np.int64)
    if n:
        starts[1:] = np.cumsum(np.maximum(counts, 0))[:-1]
    out = np.full(n, -1, np.int64)
    by_count = np.full(n, -1, np.int64)
    for v, attrs in enumerate(versions):
        fits = counts == len(attrs)
        by_count[fits] = v
        same = fits & binary
        for j, (_, oid, _) in enumerate(attrs):
            if not same.any():
                break
            same &= split.oids[np.where(same, starts + j, 0)] == oid
        out[fits & ~binary] = v
        out[same] = v
    # a send form whose attribute OIDs no definition names: read with one of its count
    out[(out < 0) & (by_count >= 0)] = by_count[(out < 0) & (by_count >= 0)]
    shapes = sorted({len(a) for a in versions})
    bad = {int(i): f"composite value of {counts[i]} attributes; the type's definitions have {shapes}"
           for i in np.flatnonzero((out < 0) & (counts >= 0))}
    return out, bad


def starts_of(counts: np.ndarray) -> np.ndarray:
    """Per value the position of its first part in the flat child column."""
    starts = np.zeros(len(counts), np.int64)
    if len(counts):
        starts[1:] = np.cumsum(np.maximum(counts, 0))[:-1]
    return starts


def struct_of(children, names, valid) -> pa.StructArray:
    """The struct array of child arrays (one value per parent value), null where not ``valid``."""
    mask = pa.array(~valid)
    return pa.StructArray.from_arrays(children, names=names, mask=mask)
