"""Values sent under an earlier type of their column (``ALTER TABLE … ALTER COLUMN …
TYPE`` within the archive).

pgoutput sends nothing for the ``ALTER`` and not the rows it rewrites; the table's next
change comes with a Relation giving the new type. So one column holds values sent under
several types, in binary mode in several encodings (``int4`` is 4 bytes, ``int8`` 8).
Each is read by the type it was sent under (``tables._locate``'s ``variants``), then cast
to the column's newest type as the server's rewrite cast it (:mod:`pgoutput_codec.typecatalog.casts`:
rounded, fitted to the typmod); a value the cast cannot hold is null, with what was
sent in ``<column>__special``. Key values are compared by their newest type's text form
(:func:`text_form`, ``tables._canonical_keys``). Observed on PostgreSQL 15, 16 and 18:
tests/conformance/test_retyped_columns.py, docs/conformance.md item 20.
"""

from __future__ import annotations

import datetime
import decimal
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .casts import cast_value
from .columns import convert_column, materialize, take_at
from .errors import ConversionError

__all__ = ["cast_each", "retyped_names", "text_form", "with_earlier_types"]


def retyped_names(column_lists: list) -> set:
    """The columns some of ``column_lists`` (Relation versions' columns) give another type
    (type OID or modifier) than others do."""
    types: dict = {}
    for cols in column_lists:
        for c in cols or ():
            types.setdefault(c["name"], set()).add((c["type_oid"], c["type_modifier"]))
    return {name for name, ts in types.items() if len(ts) > 1}


def with_earlier_types(values, special, kinds, data, col: dict, earlier: list, registry=None):
    """Column ``col``'s converted ``values``/``special`` with the values its earlier
    Relation versions sent under other types (``ALTER COLUMN … TYPE``) put in: each read
    by its own type, then cast to the column's (``int4`` binary is 4 bytes, ``int8`` 8;
    read by the newest type, such a value would fail, and the whole column stay raw). A
    value the cast cannot hold (text ``'abc'`` into ``int4``: PostgreSQL rewrote it by
    the ``USING`` expression, which is not sent) is null, and ``__special`` says what was
    sent, so nothing is lost. Values their own type cannot read as a whole are read by
    the column's."""
    n = len(values)
    special = special if special is not None else pa.nulls(n, pa.string())
    zone = getattr(registry, "timezone", None)
    for (oid, typmod), idx, r in earlier:
        sent = f"sent as type OID {oid}" + (f" (typmod {typmod})" if typmod != -1 else "")
        idx = materialize(idx)
        at = idx >= 0
        mask = pa.array(at)
        src = (oid, typmod)
        if isinstance(r, ConversionError):
            try:   # read as the column's type: there is nothing left to cast
                src, r = (col["type_oid"], col["type_modifier"]), convert_column(
                    kinds, data, col["type_oid"], col["type_modifier"], registry, index=idx)
            except ConversionError:
                pass
        if isinstance(r, ConversionError):
            _, d = take_at(kinds, data, idx)
            raw = [f"{sent} by an earlier definition of {col['name']!r} "
                   f"({r}): {v!r}" if a else None for a, v in zip(at, d.to_pylist(), strict=True)]
            values = pc.if_else(mask, pa.nulls(n, values.type), values)
            special = pc.if_else(mask, pa.array(raw, pa.string()), special)
            continue
        notes = r.special if r.special is not None else pa.nulls(n, pa.string())
        if pa.types.is_dictionary(values.type):   # an enum: through the labels
            values, special = _to_labels(values, special, r.values, notes, at, sent, col)
            continue
        texts = _texts_at(kinds, data, idx) if pa.types.is_string(values.type) else None
        try:
            cast, marks = cast_value(r.values, src, (col["type_oid"], col["type_modifier"]), values.type, texts, zone)
            notes = notes if marks is None else pc.coalesce(marks, notes)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
            cast, notes = cast_each(r.values, notes, values.type, at, col, sent, src, texts, zone)
        values = pc.if_else(mask, cast, values)
        special = pc.if_else(mask, notes, special)
    return values, special


def _to_labels(values, special, got, notes, at, sent, col):
    """Values of an earlier type put into an enum column by their labels. Another enum's
    (an enum dropped and created again, the column with it): its labels the column's enum
    lacks are added to the dictionary after the column's own, so each value keeps the
    label it was sent with. A text type's (``ALTER COLUMN … TYPE`` to the enum): a value
    that is no label of the column's enum is null with what was sent."""
    labels = values.dictionary
    text = got.cast(pa.string()) if not pa.types.is_string(got.type) else got
    if pa.types.is_dictionary(got.type):
        sent_labels = pc.unique(text.filter(pa.array(at)).drop_null())
        extra = pc.filter(sent_labels, pc.invert(pc.is_in(sent_labels, value_set=labels)))
        if len(extra):
            labels = pa.concat_arrays([labels, extra])
    idx = pc.index_in(text, value_set=labels)
    lost = np.asarray(at) & text.is_valid().to_numpy(zero_copy_only=False) & idx.is_null().to_numpy(
        zero_copy_only=False)
    mask = pa.array(at)
    indices = pc.if_else(mask, idx.cast(values.indices.type), values.indices)
    if lost.any():
        said = [f"{sent} by an earlier definition of {col['name']!r}: {v!r} is not a label of its enum"
                if x else None for x, v in zip(lost, text.to_pylist(), strict=True)]
        notes = pc.coalesce(pa.array(said, pa.string()), notes)
    return pa.DictionaryArray.from_arrays(indices, labels), pc.if_else(mask, notes, special)


def cast_each(arr: pa.Array, special: pa.Array, to: pa.DataType, rows: np.ndarray, col: dict, sent: str,
              src: tuple, texts=None, timezone=None):
    """``arr`` cast value by value at ``rows`` (:func:`~pgoutput_codec.typecatalog.casts.cast_value`):
    (values, notes), a value the cast refuses null with a note that holds it."""
    out, notes = [None] * len(arr), special.to_pylist()
    dst = (col["type_oid"], col["type_modifier"])
    for i in np.flatnonzero(rows):
        v = arr[int(i)]
        if not v.is_valid:
            continue
        one = None if texts is None else texts.slice(int(i), 1)
        try:
            value, mark = cast_value(arr.slice(int(i), 1), src, dst, to, one, timezone)
            out[i] = value[0].as_py()
            notes[i] = mark[0].as_py() if mark is not None else notes[i]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError) as e:
            notes[i] = (f"{sent} by an earlier definition of {col['name']!r}: "
                        f"{v.as_py()!r} does not convert to {to} ({e})")
    return pa.array(out, to), pa.array(notes, pa.string())


def _texts_at(kinds, data, idx) -> pa.Array:
    """The values at ``idx`` that were sent as text, as strings (null elsewhere): the
    text a cast to ``text`` gives (the type's output function) where it was sent."""
    k, d = take_at(kinds, data, idx)
    sent = pc.equal(k, "t")
    return pc.if_else(sent, d, pa.nulls(len(d), d.type)).cast(pa.string())


def text_form(v) -> bytes | None:
    """A typed key value as PostgreSQL's text form (what the type's parser reads back)."""
    if v is None or isinstance(v, bool):
        return None if v is None else (b"t" if v else b"f")
    if isinstance(v, decimal.Decimal):
        return format(v, "f").encode()
    if isinstance(v, (int, float, str, uuid.UUID)):
        return (v if isinstance(v, str) else repr(v) if isinstance(v, float) else str(v)).encode()
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ").encode()
    if isinstance(v, datetime.date):
        return v.isoformat().encode()
    return None
