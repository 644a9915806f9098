"""Arrays in text form (``array_out``: braces, quoting, an optional bounds prefix) and in
binary form (``array_send``), each element read by its type's parser. An array comes out
as nested lists plus the marker of what lists cannot hold: lower bounds other than 1 and
special elements."""

from __future__ import annotations

import re
import struct
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import one_array, validity
from .errors import Noted, Sited, Special
from .facts import BINARY_PARSERS, DELIMITERS, MAXDIM, TEXT_PARSERS
from .typeinfo import binary_as_bytes, text_as_str

__all__ = ["parse_text_array", "parse_binary_array", "value_ndims", "mixed_dims_note"]


_ARRAY_DIMS = re.compile(rb"((?:\[-?[0-9]+:-?[0-9]+\])+)=")
_TOO_DEEP = f"more than {MAXDIM} dimensions (PostgreSQL's most)"


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
    if isinstance(v, Noted):
        elem_specials.append((idx, v.note))
        return v.value
    if isinstance(v, Sited):     # no companion column holds an element's SRID
        if v.srid:
            elem_specials.append((idx, f"srid={v.srid}"))
        return v.value
    return v


def _as_sent(b, tm):
    return bytes(b)


def parse_text_array(s, r, as_sent=False):
    """(nested lists of the elements, marker), ndim. ``as_sent``: the elements are left
    as their bytes (unquoted), for a converter of the whole column of elements."""
    elem = r.elem
    conv_fn = _as_sent if as_sent else TEXT_PARSERS.get(elem.conv, text_as_str)
    delim = DELIMITERS.get(elem.conv, b",")
    bounds = None
    m = _ARRAY_DIMS.match(s)
    pos = 0
    if m:
        bounds = [tuple(int(x) for x in d.split(b":")) for d in re.findall(rb"\[(-?[0-9]+:-?[0-9]+)\]", m[1])]
        if len(bounds) > MAXDIM:
            raise ValueError(f"bad array text: bounds prefix of {len(bounds)} dimensions, {_TOO_DEEP}")
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
            if depth > MAXDIM:
                fail(_TOO_DEEP)
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
            if depth and s[pos:pos + 1] == delim:
                pos += 1
            if depth == 0:
                break
            counts[-1] += 1
            continue
        if c == delim:
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
            while j < n and s[j:j + 1] not in (delim, b"}"):
                j += 1
            tok = s[pos:j].strip()
            pos = j
            if tok.upper() == b"NULL":
                flat.append(None)
            else:
                flat.append(_elem(conv_fn, tok, elem, especials, len(flat)))
        counts[-1] += 1
        if s[pos:pos + 1] == delim:
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


def parse_binary_array(b, r, as_sent=False):
    """As :func:`parse_text_array`, of the send form."""
    elem = r.elem
    conv_fn = _as_sent if as_sent else BINARY_PARSERS.get(elem.conv, binary_as_bytes)
    if len(b) < 12:
        raise ValueError("array send form shorter than its header")
    ndim, hasnull, elemoid = struct.unpack_from(">iiI", b)
    if ndim > MAXDIM:
        raise ValueError(f"array header says {ndim} dimensions, {_TOO_DEEP}")
    if ndim < 0 or hasnull not in (0, 1) or len(b) < 12 + 8 * ndim:
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



def value_ndims(kinds, data) -> np.ndarray:
    """Each array value's number of dimensions, read from its first bytes without parsing
    it: text, its leading braces (after a bounds prefix); binary, its ndim field. 0 for an
    empty array, -1 where there is no value (null, unchanged TOAST) or too few bytes to say.
    A column's arrays are typed as deep as its deepest (PostgreSQL does not record a
    column's dimensionality); this finds it before any value is converted."""
    kinds, data = one_array(kinds), one_array(data)
    n = len(data)
    out = np.full(n, -1, np.int64)
    if not n:
        return out
    if not pa.types.is_binary(data.type):
        data = data.cast(pa.binary())
    is_t = pc.fill_null(pc.equal(kinds, "t"), False).to_numpy(zero_copy_only=False)
    is_b = pc.fill_null(pc.equal(kinds, "b"), False).to_numpy(zero_copy_only=False)
    if data.null_count:
        ok = validity(data)
        is_t, is_b = is_t & ok, is_b & ok
    offs = np.frombuffer(data.buffers()[1], np.int32, count=data.offset + n + 1)[data.offset:].astype(np.int64)
    buf = np.frombuffer(data.buffers()[2], np.uint8) if data.buffers()[2] is not None else np.zeros(0, np.uint8)
    start, length = offs[:-1], offs[1:] - offs[:-1]

    def byte(at, k):     # byte k of each value at rows ``at`` (0 past its end)
        inside = length[at] > k
        got = np.zeros(len(at), np.uint8)
        got[inside] = buf[start[at][inside] + k]
        return got
    b_rows = np.flatnonzero(is_b & (length >= 4))
    if len(b_rows):
        out[b_rows] = sum(byte(b_rows, k).astype(np.int64) << (8 * (3 - k)) for k in range(4))
        out[b_rows[out[b_rows] > MAXDIM]] = -1       # not an array's header: the converter says why
    t_rows = np.flatnonzero(is_t & (length > 0))
    for i in t_rows[byte(t_rows, 0) == ord("[")]:    # a bounds prefix, '[1:2][3:4]=': rare
        at = bytes(buf[start[i]:start[i] + length[i]]).find(b"=") + 1
        at = at if at > 0 else length[i]
        start[i], length[i] = start[i] + at, length[i] - at
    braces = np.zeros(len(t_rows), np.int64)
    going = np.ones(len(t_rows), bool)
    for k in range(MAXDIM + 1):
        going &= byte(t_rows, k) == ord("{")
        braces += going
    empty = (braces == 1) & (byte(t_rows, 1) == ord("}"))
    # deeper than MAXDIM (braces counted to MAXDIM + 1): not an array's text, the converter says why
    out[t_rows] = np.where(empty, 0, np.where((braces > 0) & (braces <= MAXDIM), braces, -1))
    return out


def mixed_dims_note(dims) -> str:
    """The ``__special`` of a column whose arrays have different numbers of dimensions: it
    stays as sent (its text or binary form) on every path, since no one list type holds it."""
    return "arrays of " + " and ".join(str(d) for d in sorted(dims)) + " dimensions in one column: kept as sent"
