"""Enums: ``dictionary<int32, string>`` whose dictionary is the type's labels in sort
order. Both forms of an enum value (``enum_out`` and ``enum_send``) are its label's bytes,
so a column converts as one lookup of its label bytes against the labels
(``pc.index_in``), no Python object per value; :func:`py_enum` is the per-value twin.

A type's versions (an archive's catalog records the labels in force at each LSN, older
definitions in ``UserType.earlier``) share one dictionary: the newest labels in their sort
order, then the labels only older versions had, oldest version first (values written under
an older definition keep their label). A value that is no label of any version is refused:
null, with the note :data:`NOT_A_LABEL`, and the column stays typed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .errors import REFUSED

__all__ = ["ENUM_ARROW", "KindError", "check_kinds", "NOT_A_LABEL", "labels_of", "convert_enum", "py_enum"]

#: every enum column's Arrow type
ENUM_ARROW = pa.dictionary(pa.int32(), pa.string())

#: the note of a value that is no label of the type's catalog
NOT_A_LABEL = REFUSED + "not a label of the enum in the type catalog"


def labels_of(user) -> tuple:
    """The labels of a :class:`~.registry.UserType` enum and of its earlier definitions:
    the newest in sort order, then those only older versions had."""
    out = list(user.labels)
    seen = set(out)
    for old in user.earlier:
        for label in old.labels:
            if label not in seen:
                seen.add(label)
                out.append(label)
    return tuple(out)


def _dictionary(labels):
    return pa.array(labels, pa.string())


def convert_enum(kinds, data, labels):
    """(values, special) of a column of enum values: ``kinds`` a ``pa.string()`` array of
    'n'/'u'/'t'/'b', ``data`` the ``pa.binary()`` label bytes. Raises ValueError naming the
    first value whose kind is not n/u/t/b or which has no bytes, as ``(index, reason)``."""
    present = pc.fill_null(pc.is_in(kinds, pa.array(["t", "b"])), False)
    check_kinds(kinds, data, present)
    if not labels:
        return _as_seen(data, present), None
    idx = pc.index_in(data, value_set=pa.array([x.encode() for x in labels], pa.binary()))
    idx = pc.if_else(present, idx, pa.scalar(None, pa.int32()))
    missing = pc.and_(present, pc.is_null(idx))
    values = pa.DictionaryArray.from_arrays(idx.cast(pa.int32()), _dictionary(labels))
    special = None
    if pc.any(missing).as_py():
        special = pc.if_else(missing, pa.scalar(NOT_A_LABEL), pa.scalar(None, pa.string()))
    return values, special


def _as_seen(data, present):
    """An enum whose labels the registry does not know (registered without them): the
    labels its values carry, in order of first appearance, as the dictionary."""
    data = pc.if_else(present, data, pa.scalar(None, pa.binary()))
    try:
        text = data.cast(pa.string())
    except pa.ArrowInvalid:
        bad = next(i for i, (p, v) in enumerate(zip(present.to_pylist(), data.to_pylist(), strict=True))
                   if p and not _utf8(v))
        raise KindError(bad, "enum label is not valid UTF-8") from None
    return pc.dictionary_encode(text).cast(ENUM_ARROW)


def _utf8(b):
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class KindError(ValueError):
    """A value whose tuple column kind is not n/u/t/b, or 't'/'b' with no bytes."""

    def __init__(self, index, reason):
        super().__init__(reason)
        self.index = index


def check_kinds(kinds, data, present):
    """Raise :class:`KindError` for the first value whose kind is not n/u/t/b or that has
    kind 't'/'b' and no bytes (``present``: kind is 't' or 'b')."""
    bad = pc.invert(pc.fill_null(pc.is_in(kinds, pa.array(["n", "u", "t", "b"])), True))
    empty = pc.and_(present, pc.is_null(data))
    either = pc.or_(bad, empty)
    if pc.any(either).as_py():
        at = pc.index(either, True).as_py()
        raise KindError(at, "tuple column kind is not n/u/t/b" if bad[at].as_py() else "kind 't'/'b' with null data")


def py_enum(kinds, data, labels):
    """The per-value twin of :func:`convert_enum` (same result, same errors)."""
    pairs = list(zip(kinds.to_pylist(), data.to_pylist(), strict=True))
    for i, (k, raw) in enumerate(pairs):     # the kinds first, as the vectorized one
        _py_check(i, k, raw)
    if not labels:
        seen = {}
        for i, (k, raw) in enumerate(pairs):
            if k in ("t", "b"):
                if not _utf8(raw):
                    raise KindError(i, "enum label is not valid UTF-8")
                seen.setdefault(raw.decode(), len(seen))
        labels = tuple(seen)
    where = {x.encode(): i for i, x in enumerate(labels)}
    idx, notes = [], []
    for i, (k, raw) in enumerate(zip(kinds.to_pylist(), data.to_pylist(), strict=True)):
        if k is None or k in ("n", "u"):
            idx.append(None)
            notes.append(None)
            continue
        _py_check(i, k, raw)
        at = where.get(raw)
        idx.append(at)
        notes.append(None if at is not None else NOT_A_LABEL)
    values = pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), _dictionary(labels))
    special = pa.array(notes, pa.string()) if any(n is not None for n in notes) else None
    return values, special


def _py_check(i, k, raw):
    if k is None or k in ("n", "u"):
        return
    if k not in ("t", "b"):
        raise KindError(i, "tuple column kind is not n/u/t/b")
    if raw is None:
        raise KindError(i, "kind 't'/'b' with null data")
