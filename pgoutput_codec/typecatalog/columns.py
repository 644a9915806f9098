"""Whole columns of TupleData values converted to Arrow: :func:`convert_column`,
:func:`convert_columns` (several columns of one flat tuple child at once),
:func:`convert_value` (one value). The compiled converters (``_convert.pyx``) take the
types that have one (:data:`.facts.TYPES`' ``fast``) and leave what they cannot hold to
the Python parsers, which ``fast=False`` or ``PGOUTPUT_CODEC_NO_EXTENSIONS=1`` use for
everything."""

from __future__ import annotations

import decimal
import struct
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._native import USING_EXTENSIONS
from ..threads import run_pieces
from .arrays import parse_binary_array, parse_text_array
from .composites import split_records, starts_of, struct_of, version_of_values, versions_of
from .enums import KindError, convert_enum, labels_of, py_enum
from .errors import REFUSED, SPECIAL_NAMES, ConversionError, Noted, Physical, Sited, Special
from .geometry import srid_column
from .nested import Split, SplitError, child_column, join_notes, prefixed, split_from_lists
from .ranges import EMPTY, LOWER_INC, LOWER_INF, UPPER_INC, UPPER_INF, split_multiranges, split_ranges
from .facts import BINARY_PARSERS, CONVERTERS, TEXT_PARSERS
from .registry import TypeRegistry, arrow_of, resolve
from .typeinfo import binary_as_bytes, text_as_str

if USING_EXTENSIONS:   # PGOUTPUT_CODEC_NO_EXTENSIONS: the Python parsers only, this imports without the compiled module
    from . import _convert

__all__ = ["ConvertedColumn", "convert_column", "convert_columns", "convert_resolved", "convert_value", "materialize",
           "take_at"]


class ConvertedColumn(NamedTuple):
    """``values``: the Arrow column. ``special``: None when no value is special, else a
    ``pa.string()`` array, null for ordinary values, and for the others what the null
    (or list) in ``values`` stands for: ``infinity`` / ``-infinity`` / ``NaN``, or for
    arrays the bounds prefix when a lower bound is not 1 (``[0:2]``) and special
    elements by flat index (``2=infinity``), ';'-separated. ``srid``: for a geometry or
    geography column whose typmod fixes no SRID (:func:`.geometry.srid_column`), each
    value's SRID (int32, null where the value is, 0 where it has none); else None."""

    values: pa.Array
    special: pa.Array | None
    srid: pa.Array | None = None


def _py_value(kind, raw, r):
    """One value in Arrow-ready form (ints for dates/times, Decimal, MonthDayNano, nested
    lists) plus its special marker; raises ValueError on bad input."""
    if r.conv == "array":
        out, ndim = (parse_binary_array if kind == "b" else parse_text_array)(raw, r)
        return out.value, out.special, ndim
    table = BINARY_PARSERS if kind == "b" else TEXT_PARSERS
    fn = table.get(r.conv) or (text_as_str if kind == "t" else binary_as_bytes)
    v = fn(raw, r.typmod)
    if isinstance(v, Special):
        return None, str(v), 1
    if isinstance(v, Noted):
        return v.value, v.note, 1
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


def _reason(exc) -> str:
    return exc.message if hasattr(exc, "message") else str(exc)


def _fail(exc, index, r, kind, raw):
    msg = _reason(exc)
    shown = bytes(raw[:40]) if raw is not None else None
    err = ConversionError(f"value {index} ({r.name}, type OID {r.oid}, kind '{kind}') {shown!r}: {msg}",
                          index, r.oid, r.name, kind, shown)
    err.reason = msg   # what a nested value's converter says of the part it names
    return err


def _convert_py(kinds, data, r, binary, ndim, refuse=False):
    """``refuse``: a value that does not convert is null, its special :data:`REFUSED` and
    the reason, instead of failing the column."""
    values, specials, ndims = [], [], []
    srids = [None] * len(kinds) if srid_column(r.conv, r.typmod) else None
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
            if not refuse:
                raise _fail(e, i, r, k, raw) from None
            v, sp, nd = None, REFUSED + _reason(e), None
        if r.conv == "unknown" and binary and k == "t":
            v = bytes(raw)
        if isinstance(v, Sited):
            if srids is not None:
                srids[i] = v.srid
            v = v.value
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
    typ = arrow_of(r, binary, ndim or 1)
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
    return ConvertedColumn(arr, sp, None if srids is None else pa.array(srids, pa.int32()))


def srid_notes(col: ConvertedColumn) -> ConvertedColumn:
    """``col`` with its values' non-zero SRIDs as markers (``srid=3857``) and no
    ``srid``: a geometry inside a composite, where no companion column sits."""
    if col.srid is None:
        return col
    noted = pc.if_else(pc.fill_null(pc.not_equal(col.srid, 0), False),
                       pc.binary_join_element_wise("srid=", col.srid.cast(pa.string()), ""),
                       pa.scalar(None, pa.string()))
    if noted.null_count == len(noted):
        return ConvertedColumn(col.values, col.special)
    if col.special is not None:
        noted = pc.coalesce(pc.binary_join_element_wise(col.special, noted, ";"), col.special, noted)
    return ConvertedColumn(col.values, noted)


def _depth(v):
    d = 0
    while isinstance(v, list):
        d += 1
        if not v:
            break
        v = v[0]
    return d


def materialize(index) -> np.ndarray:
    """An index as one int64 array: ``(offsets, k)`` means ``offsets + k`` (-1 stays -1)."""
    if isinstance(index, tuple):
        base, k = index
        base = np.asarray(base, dtype=np.int64)
        return np.where(base >= 0, base + k, -1)
    return np.ascontiguousarray(index, dtype=np.int64)


def take_at(kinds, data, index):
    """kinds/data at ``index`` (-1 = an absent value: kind 'n')."""
    take = pa.array(index, pa.int64(), mask=index < 0)
    return pc.fill_null(kinds.take(take), "n"), data.take(take)


def _fast_spec(r):
    """(code, precision, scale, Arrow type) of the compiled converter for a resolved
    type, or None."""
    if not USING_EXTENSIONS or not r.fast:
        return None
    args = CONVERTERS[r.conv].fast_args(r.typmod)
    if args is None:
        return None
    return r.fast, *args, arrow_of(r, False)


def _fast_result(res, r, kinds, data, index):
    """A compiled converter's per-column result as ConvertedColumn / ConversionError /
    None (SLOW: convert in Python)."""
    if isinstance(res, _convert.ConvertFailure):
        at = res.index if index is None else int(materialize(index)[res.index])
        raw, kind = (data[at].as_py(), kinds[at].as_py()) if at >= 0 else (None, None)
        return _fail(res, res.index, r, kind, raw)
    if res is None:
        return None
    arr, codes, *sited = res
    sp = None
    if isinstance(codes, pa.Array):   # a nested family's own markers (_convert.FINISH)
        sp = codes
    elif codes is not None:
        names = pa.array([None, *SPECIAL_NAMES[1:]], pa.string())
        sp = names.take(pa.array(codes, pa.int8()))
    return ConvertedColumn(arr, sp, sited[0] if sited else None)


def _raise_at(e, r, kinds, data, prefix=""):
    """A :class:`ConversionError` at the value a :class:`KindError`/:class:`SplitError` names."""
    i = e.index
    return _fail(ValueError(prefix + (e.reason if hasattr(e, "reason") else str(e))), i, r,
                 kinds[i].as_py(), data[i].as_py())


def _enum_column(kinds, data, r, registry, fast, refuse, binary):
    """An enum column: its label bytes looked up in its labels (:mod:`.enums`)."""
    try:
        values, special = (convert_enum if fast else py_enum)(kinds, data, labels_of(r.user))
    except KindError as e:
        raise _raise_at(e, r, kinds, data) from None
    return ConvertedColumn(values, special)


def _split(name, kinds, data, fast, refuse, r):
    """A column of nested values of type ``r`` split (:mod:`.nested`): by the compiled
    splitter where there is one (not when refusing value by value: it stops at the first
    bad value). A value that does not split is a :class:`ConversionError` naming it."""
    compiled = getattr(_convert, "split_" + name, None) if fast and not refuse and USING_EXTENSIONS else None
    try:
        if compiled is not None:
            counts, flags, kind_bytes, offsets, values, oids = compiled(kinds, data)
            return Split(counts, flags, *child_column(kind_bytes, offsets, values), oids)
        return _PY_SPLITTERS[name](kinds, data, refuse)
    except SplitError as e:
        raise _raise_at(e, r, kinds, data) from None


_PY_SPLITTERS = {"records": split_records, "ranges": split_ranges, "multiranges": split_multiranges}


def _part(split, r, part, registry, fast, refuse, binary, index, parent, kinds, data, what):
    """Part ``what`` of each value (``index`` into the split's child column, -1: null) as a
    ConvertedColumn aligned with the parent values; a failure names the parent value."""
    try:
        return srid_notes(convert_resolved(split.kinds, split.data, part, registry, binary=binary, fast=fast,
                                           index=index, refuse=refuse))
    except ConversionError as e:
        if e.index is None:
            raise
        i = e.index
        raise _fail(ValueError(f"{what}: {getattr(e, 'reason', e)}"), i, parent, kinds[i].as_py(),
                    data[i].as_py()) from None


def _refused_notes(split):
    if split.notes is None or not any(x is not None for x in split.notes):
        return None
    return pa.array([None if x is None else REFUSED + x for x in split.notes], pa.string())


def _composite_column(kinds, data, r, registry, fast, refuse, binary):
    """A composite column: a struct of its attributes, each value read with the definition
    whose shape it has (:mod:`.composites`)."""
    split = _split("records", kinds, data, fast, refuse, r)
    try:
        versions = versions_of(r.user)
        is_b = pc.fill_null(pc.equal(kinds, "b"), False).to_numpy(zero_copy_only=False)
        version, unfit = version_of_values(split, is_b, versions)
        if unfit and not refuse:
            first = min(unfit)
            raise SplitError(first, unfit[first])
    except SplitError as e:
        raise _raise_at(e, r, kinds, data) from None
    starts = starts_of(split.counts)
    valid = split.counts >= 0
    if unfit:
        valid[list(unfit)] = False
        split = split._replace(notes=[unfit.get(i, x) for i, x in enumerate(split.notes or [None] * len(valid))])
    children, notes = [], [_refused_notes(split)]
    for name, part in r.fields:
        # per type the attribute had in the definitions: where each value has it
        by_type = {}
        for v, attrs in enumerate(versions):
            at = next((j for j, a in enumerate(attrs) if a[0] == name), None)
            if at is not None:
                index = by_type.setdefault(attrs[at][1:], np.full(len(version), -1, np.int64))
                chosen = version == v
                index[chosen] = starts[chosen] + at
        if not by_type:
            by_type[(part.oid, part.typmod)] = np.full(len(version), -1, np.int64)
        col = None
        for (oid, typmod), index in by_type.items():
            own = part if (oid, typmod) == (part.oid, part.typmod) else resolve(oid, typmod, registry)
            got = _part(split, r, own, registry, fast, refuse, binary, index, r, kinds, data, f"attribute {name}")
            if own is not part:   # a value of an older definition: as the newest types the attribute
                got = _cast_part(got, arrow_of(part, binary), index >= 0, name)
            col = got if col is None else _merge(col, got, index >= 0)
        children.append(col.values)
        notes.append(prefixed(col.special, name + "="))
    values = struct_of(children, [n for n, _ in r.fields], valid)
    return ConvertedColumn(values, join_notes(len(values), notes))


def _cast_part(col, typ, where, name):
    """An attribute's values read by an older definition's type, cast to the newest's; a
    value the cast cannot hold is null with the note of what it was."""
    if col.values.type == typ:
        return col
    try:
        return ConvertedColumn(col.values.cast(typ), col.special)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        values, notes = [], col.special.to_pylist() if col.special is not None else [None] * len(col.values)
        for i, v in enumerate(col.values):
            try:
                values.append(v.cast(typ))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                values.append(pa.scalar(None, typ))
                notes[i] = f"{REFUSED}an earlier definition's {v.type} value {v.as_py()!r} is no {typ}"
        return ConvertedColumn(pa.array([v.as_py() for v in values], typ),
                               pa.array(notes, pa.string()) if any(x is not None for x in notes) else None)


def _merge(a, b, where):
    """Values of ``b`` where ``where``, else of ``a`` (ConvertedColumns of one type)."""
    mask = pa.array(where)
    values = pc.if_else(mask, b.values, a.values)
    if a.special is None and b.special is None:
        return ConvertedColumn(values, None)
    n = len(where)
    sa = a.special if a.special is not None else pa.nulls(n, pa.string())
    sb = b.special if b.special is not None else pa.nulls(n, pa.string())
    return ConvertedColumn(values, pc.if_else(mask, sb, sa))


def _range_column(kinds, data, r, registry, fast, refuse, binary):
    """A range column: struct<lower, upper, lower_inc, upper_inc, empty> (:mod:`.ranges`)."""
    split = _split("ranges", kinds, data, fast, refuse, r)
    valid = split.counts >= 0
    starts = starts_of(split.counts)
    flags = split.flags
    children, notes = [], [_refused_notes(split)]
    for side, (at, inf) in (("lower", (0, LOWER_INF)), ("upper", (1, UPPER_INF))):
        present = valid & (flags & (EMPTY | inf) == 0)
        col = _part(split, r, r.elem, registry, fast, refuse, binary, np.where(present, starts + at, -1), r,
                    kinds, data, f"{side} bound")
        children.append(col.values)
        notes.append(prefixed(col.special, side + "="))
    for bit in (LOWER_INC, UPPER_INC, EMPTY):
        children.append(pa.array((flags & bit) != 0, pa.bool_()))
    values = struct_of(children, ["lower", "upper", "lower_inc", "upper_inc", "empty"], valid)
    return ConvertedColumn(values, join_notes(len(values), notes))


def _multirange_column(kinds, data, r, registry, fast, refuse, binary):
    """A multirange column: a list of its ranges (:mod:`.ranges`)."""
    split = _split("multiranges", kinds, data, fast, refuse, r)
    valid = split.counts >= 0
    inner = _part(split, r, r.elem, registry, fast, refuse, binary, None, r, kinds, data, "range")
    return _listed(inner, split.counts, valid, r, kinds, data)


def _listed(inner, counts, valid, r, kinds, data):
    """Values of ``counts[i]`` consecutive items of ``inner`` each (a ConvertedColumn of
    the flat items), the notes of the items by position (``1=lower=infinity``)."""
    offsets = np.zeros(len(counts) + 1, np.int64)
    offsets[1:] = np.cumsum(np.maximum(counts, 0))
    if offsets[-1] > 0x7FFFFFFF:
        raise ConversionError(f"{r.name} (type OID {r.oid}): more than 2**31 items in one column", None,
                              r.oid, r.name)
    values = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), inner.values, mask=pa.array(~valid))
    special = None
    if inner.special is not None:
        owner = np.repeat(np.arange(len(counts)), np.maximum(counts, 0))
        found = {}
        for k, sp in enumerate(inner.special.to_pylist()):
            if sp is not None:
                i = int(owner[k])
                found.setdefault(i, []).append(f"{k - offsets[i]}={sp}")
        special = pa.array([";".join(found[i]) if i in found else None for i in range(len(counts))], pa.string())
    return ConvertedColumn(values, special)


def _nested_inside(r):
    return r.conv in _NESTED or (r.conv == "array" and r.elem.conv in _NESTED)


def _nested_array_column(kinds, data, r, registry, fast, refuse, binary, ndim):
    """An array whose elements are converted column-wise (enums, composites, ranges,
    multiranges): each array's structure read per value, its elements as sent, then all
    elements of the column converted at once and put back in their lists."""
    klist, dlist = kinds.to_pylist(), data.to_pylist()
    n = len(klist)
    trees, notes, depths = [None] * n, [None] * n, [0] * n
    for i, (k, raw) in enumerate(zip(klist, dlist, strict=True)):
        if k in (None, "n", "u"):
            continue
        if k not in ("t", "b"):
            raise _fail(ValueError("tuple column kind is not n/u/t/b"), i, r, k, raw)
        if raw is None:
            raise _fail(ValueError("kind 't'/'b' with null data"), i, r, k, raw)
        try:
            out, nd = (parse_binary_array if k == "b" else parse_text_array)(raw, r, as_sent=True)
        except (ValueError, struct.error) as e:
            if not refuse:
                raise _fail(e, i, r, k, raw) from None
            notes[i] = REFUSED + _reason(e)
            continue
        trees[i], notes[i], depths[i] = out.value, out.special, nd
    if ndim is None:
        ndim = max([d for d in depths if d] or [1])
    bad = [i for i, d in enumerate(depths) if d not in (0, ndim)]
    if bad:
        i = bad[0]
        raise _fail(ValueError(f"array has {depths[i]} dimensions, the column is converted with"
                               f" ndim={ndim} (pass ndim=)"), i, r, klist[i], dlist[i])
    parts, owner, firsts = [], [], []

    def leaves(v, i):
        if isinstance(v, list):
            return [leaves(x, i) for x in v]
        if v is None:
            return None
        owner.append(i)
        parts.append((klist[i], v))
        return len(parts) - 1

    shaped = []
    for i, t in enumerate(trees):
        firsts.append(len(parts))
        shaped.append(None if t is None else leaves(t, i))
    split = split_from_lists([], [], parts, np.zeros(len(parts), np.uint32))
    try:
        inner = srid_notes(convert_resolved(split.kinds, split.data, r.elem, registry, binary=binary, fast=fast,
                                            refuse=refuse))
    except ConversionError as e:
        if e.index is None:
            raise
        i = owner[e.index]
        raise _fail(ValueError(f"element {e.index - firsts[i]}: {getattr(e, 'reason', e)}"), i, r, klist[i],
                    dlist[i]) from None
    index_type = pa.int64()
    for _ in range(ndim):
        index_type = pa.list_(index_type)
    positions = pa.array(shaped, index_type)
    leaf = positions
    for _ in range(ndim):
        leaf = leaf.flatten()
    values = _with_leaves(positions, inner.values.take(leaf), ndim)
    if inner.special is not None:
        sp = inner.special.to_pylist()
        for k, note in enumerate(sp):
            if note is not None:
                i = owner[k]
                notes[i] = ";".join(x for x in (notes[i], f"{k - firsts[i]}={note}") if x)
    special = pa.array(notes, pa.string()) if any(x is not None for x in notes) else None
    return ConvertedColumn(values, special)


def _with_leaves(lists, leaves, depth):
    """``lists`` (nested ``depth`` deep) with its innermost values replaced by ``leaves``."""
    if depth == 0:
        return leaves
    inner = _with_leaves(lists.values, leaves, depth - 1)
    return pa.ListArray.from_arrays(lists.offsets, inner, mask=lists.is_null() if lists.null_count else None)


#: converter name -> converter of a whole column of the types converted column-wise
_NESTED = {"enum": _enum_column, "composite": _composite_column, "range": _range_column,
           "multirange": _multirange_column}


def convert_columns(kinds, data, types: list, registry: TypeRegistry | None = None, *, indexes: list,
                    fast: bool | None = None, workers: int = 1) -> list:
    """Several columns of one flat TupleData child at once (the columns of change rows):
    ``types``: (type_oid, type_modifier) per column; ``indexes``: per column the element
    of each value (int64 numpy array, -1 = null; or ``(offsets, k)``: element
    ``offsets[i] + k``, offsets -1 = null). The compiled converters run over all
    columns together, row block by row block (one pass over the values, where column
    after column reads them once per column). Returns per column a
    :class:`ConvertedColumn`, or the :class:`ConversionError` of that column (returned,
    not raised: one bad column does not lose the others). ``workers``: threads
    converting groups of the columns at once (the converters release the GIL)."""
    kinds = _to_kind_array(kinds)
    data = _to_binary_array(data)
    if fast is None:
        fast = USING_EXTENSIONS
    resolved = [resolve(oid, tm, registry) for oid, tm in types]
    specs = [_fast_spec(r) if fast else None for r in resolved]
    out = [None] * len(types)
    quick = [j for j, sp in enumerate(specs) if sp is not None]
    if quick:
        # columns dealt round-robin to the threads: each pass reads its columns' values
        groups = [quick[g::workers] for g in range(min(workers, len(quick)))]
        done = run_pieces(lambda cols: _convert.convert_columns_fast([specs[j] for j in cols], kinds, data,
                                                                     [indexes[j] for j in cols]), groups, workers)
        for cols, res in zip(groups, done, strict=True):
            for j, rj in zip(cols, res, strict=True):
                out[j] = _fast_result(rj, resolved[j], kinds, data, indexes[j])
    for j in range(len(resolved)):
        if out[j] is None and _nested_inside(resolved[j]):   # vectorized in convert_column
            try:
                out[j] = convert_column(kinds, data, *types[j], registry, fast=fast, index=materialize(indexes[j]))
            except ConversionError as e:
                out[j] = e
        elif out[j] is None:
            k, d = take_at(kinds, data, materialize(indexes[j]))
            try:
                out[j] = convert_column(k, d, *types[j], registry, fast=False)
            except ConversionError as e:
                out[j] = e
    return out


def convert_column(kinds, data, type_oid: int, type_modifier: int = -1, registry: TypeRegistry | None = None,
                   *, binary: bool | None = None, ndim: int | None = None, fast: bool | None = None,
                   index=None, refuse: bool = False) -> ConvertedColumn:
    """Convert one column of TupleData values.

    ``kinds``: 'n'/'u'/'t'/'b' per value (string array or list; 'n' and 'u' give null —
    the caller tracks unchanged TOAST 'u' itself); ``data``: the values' bytes (binary
    array or list). ``binary``: for unknown types, whether the column is binary (default:
    True when any value has kind 'b'). ``ndim``: for arrays, the list depth (default: the
    largest dimensionality in the data, at least 1). Raises :class:`ConversionError`
    naming the value index and the type. ``index`` (int64 numpy array, -1 = null): convert
    elements ``index`` of kinds/data instead of all of them, read in place by the fast
    converters (the columns of change rows inside the flat tuple children). ``refuse``: a
    value that does not convert (out of range, malformed) is null with the special
    :data:`REFUSED` + the reason and the others keep the column's type, value by value
    in Python (the compiled converters stop at the first); what is wrong with the column
    as a whole (arrays of different dimensionality) still raises.
    """
    kinds = _to_kind_array(kinds)
    data = _to_binary_array(data)
    if len(kinds) != len(data):
        raise ValueError(f"kinds has {len(kinds)} values but data has {len(data)}")
    r = resolve(type_oid, type_modifier, registry)
    if fast is None:
        fast = USING_EXTENSIONS
    return convert_resolved(kinds, data, r, registry, binary=binary, ndim=ndim, fast=fast, index=index,
                            refuse=refuse)


def convert_resolved(kinds, data, r, registry, *, binary=None, ndim=None, fast=True, index=None, refuse=False):
    """:func:`convert_column` of a :class:`~.registry.Resolved` type (``kinds``/``data``
    Arrow arrays already): the converter of a nested value's parts."""
    if r.conv in _NESTED or (r.conv == "array" and _nested_inside(r)):
        if index is not None:
            kinds, data = take_at(kinds, data, np.ascontiguousarray(index, dtype=np.int64))
        if binary is None:
            binary = bool(pc.any(pc.equal(kinds, "b")).as_py())
        if r.conv == "array":
            return _nested_array_column(kinds, data, r, registry, fast, refuse, binary, ndim)
        return _NESTED[r.conv](kinds, data, r, registry, fast, refuse, binary)
    spec = _fast_spec(r) if fast and not refuse else None
    if index is not None:
        index = np.ascontiguousarray(index, dtype=np.int64)
        if spec is None:
            kinds, data, index = *take_at(kinds, data, index), None
    if spec is not None:
        res = _fast_result(_convert.convert_columns_fast([spec], kinds, data, [index])[0], r, kinds, data, index)
        if isinstance(res, ConversionError):
            raise res
        if res is not None:
            return res
        if index is not None:   # a value the fast converter leaves to Python (SLOW)
            kinds, data = take_at(kinds, data, index)
    if binary is None:
        binary = r.conv == "unknown" and bool(pc.any(pc.equal(kinds, "b")).as_py())
    return _convert_py(kinds, data, r, binary, ndim, refuse)


def convert_value(kind: str, data: bytes | None, type_oid: int, type_modifier: int = -1,
                  registry: TypeRegistry | None = None, *, fast: bool | None = None):
    """One value as a Python object: None for 'n'/'u', :class:`Special` for a value Arrow
    holds as null plus a marker, else the Arrow value's ``as_py()``; a :class:`Physical`
    int (days or µs since 1970) when Python cannot hold it (dates/timestamps BC or after 9999). For arrays with a special
    marker, a tuple ``(list, Special(marker))``."""
    col = srid_notes(convert_column([kind], [data], type_oid, type_modifier, registry, fast=fast))
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
