"""What the converters of nested values (composites, ranges, multiranges) share. A column
of nested values is *split*: each value's parts (a composite's attributes, a range's
bounds, a multirange's ranges) become one flat child column of TupleData values (kind +
bytes, as sent) plus, per value, how many parts it has; the child column is converted by
the converter of the part's type (compiled for the built-in types), and the parent's
Arrow array is built around it. The splitters of ``_codecs/composites.pxi`` and
``_codecs/ranges.pxi`` make no Python object per value; the plain-Python splitters of
:mod:`.composites` and :mod:`.ranges` are their twins and oracles (same result, same
failing value)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Split", "SplitError", "child_column", "split_from_lists", "split_values", "join_notes", "prefixed"]


class SplitError(ValueError):
    """Value ``index`` of a column could not be split: ``reason`` says why."""

    def __init__(self, index, reason):
        super().__init__(reason)
        self.index = index
        self.reason = reason


class Split(NamedTuple):
    """A column of nested values split: ``counts`` (int64 per value: its parts, -1 for a
    null value), ``flags`` (uint8 per value: a range's flags byte, else zeros), the flat
    child column (``kinds`` ``pa.string()`` of 't'/'b'/'n', ``data`` ``pa.binary()``),
    ``oids`` (uint32 per part: the type OID a composite's send form names, else zeros)
    and ``notes`` (per value the reason it was refused, or None: only where asked)."""

    counts: np.ndarray
    flags: np.ndarray
    kinds: pa.Array
    data: pa.Array
    oids: np.ndarray
    notes: list | None = None


def child_column(kind_bytes: bytes, offsets: np.ndarray, data: bytes):
    """The (kinds, data) Arrow arrays of a child column: one kind byte per part, int32
    offsets into ``data``."""
    m = len(kind_bytes)
    kinds = pa.Array.from_buffers(pa.string(), m, [None, pa.py_buffer(np.arange(m + 1, dtype=np.int32).tobytes()),
                                                   pa.py_buffer(kind_bytes)])
    values = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(np.asarray(offsets, np.int32).tobytes()),
                                                    pa.py_buffer(data)])
    return kinds, values


def split_from_lists(counts, flags, parts, oids, notes=None) -> Split:
    """A :class:`Split` from per-value counts and flags and the flat parts, ``(kind,
    bytes or None)`` each (the plain-Python splitters' result)."""
    offsets = np.zeros(len(parts) + 1, np.int64)
    if parts:
        offsets[1:] = np.cumsum([len(b) if b is not None else 0 for _, b in parts])
    if len(parts) and offsets[-1] > 0x7FFFFFFF:
        raise SplitError(0, "nested values exceed 2 GiB in one column; convert it in smaller chunks")
    kinds, data = child_column("".join(k for k, _ in parts).encode(), offsets,
                               b"".join(b for _, b in parts if b is not None))
    return Split(np.asarray(counts, np.int64), np.asarray(flags, np.uint8), kinds, data,
                 np.asarray(oids, np.uint32), notes)


def split_values(kinds, data, one, refuse=False) -> Split:
    """The shared loop of the plain-Python splitters: per value ``one(kind, raw)`` ->
    (flags, parts) or ValueError, each part ``(oid, bytes or None)`` (oid 0 where the form
    names none). ``refuse``: a value that does not split is null with its reason in
    ``notes``, instead of failing the column."""
    counts, flags, parts, oids, notes = [], [], [], [], []
    for i, (k, raw) in enumerate(zip(kinds.to_pylist(), data.to_pylist(), strict=True)):
        if k is None or k in ("n", "u"):
            counts.append(-1)
            flags.append(0)
            notes.append(None)
            continue
        if k not in ("t", "b"):
            raise SplitError(i, "tuple column kind is not n/u/t/b")
        if raw is None:
            raise SplitError(i, "kind 't'/'b' with null data")
        try:
            f, got = one(k, raw)
        except ValueError as e:
            if not refuse:
                raise SplitError(i, str(e)) from None
            counts.append(-1)
            flags.append(0)
            notes.append(str(e))
            continue
        counts.append(len(got))
        flags.append(f)
        notes.append(None)
        for oid, part in got:
            parts.append(("n" if part is None else k, part))
            oids.append(oid)
    return split_from_lists(counts, flags, parts, oids, notes if refuse else None)


def prefixed(special, prefix):
    """A child column's notes prefixed (``lower=`` + ``infinity``), or None."""
    if special is None:
        return None
    return pc.binary_join_element_wise(pa.scalar(prefix), special, "")


def join_notes(n, parts):
    """Per value the non-null notes of ``parts`` (string arrays of length ``n`` or None)
    joined with ';', None where there is none."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    out = pc.binary_join_element_wise(*[pc.fill_null(p, "") for p in parts], ";",
                                      null_handling="emit_null")
    # ';' between the present notes only: drop the empty ones' separators
    out = pc.replace_substring_regex(out, r";{2,}", ";")
    out = pc.replace_substring_regex(out, r"^;|;$", "")
    return pc.if_else(pc.equal(out, ""), pa.scalar(None, pa.string()), out)
