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
from .errors import REFUSED, SPECIAL_NAMES, ConversionError, Noted, Physical, Special
from .facts import BINARY_PARSERS, CONVERTERS, TEXT_PARSERS
from .registry import TypeRegistry, arrow_of, resolve
from .typeinfo import binary_as_bytes, text_as_str

if USING_EXTENSIONS:   # PGOUTPUT_CODEC_NO_EXTENSIONS: the Python parsers only, this imports without the compiled module
    from . import _convert

__all__ = ["ConvertedColumn", "convert_column", "convert_columns", "convert_value", "materialize", "take_at"]


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
    return ConversionError(f"value {index} ({r.name}, type OID {r.oid}, kind '{kind}') {shown!r}: {msg}",
                           index, r.oid, r.name, kind, shown)


def _convert_py(kinds, data, r, binary, ndim, refuse=False):
    """``refuse``: a value that does not convert is null, its special :data:`REFUSED` and
    the reason, instead of failing the column."""
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
            if not refuse:
                raise _fail(e, i, r, k, raw) from None
            v, sp, nd = None, REFUSED + _reason(e), None
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
    return ConvertedColumn(arr, sp)


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
    arr, codes = res
    sp = None
    if isinstance(codes, pa.Array):   # a nested family's own markers (_convert.FINISH)
        sp = codes
    elif codes is not None:
        names = pa.array([None, *SPECIAL_NAMES[1:]], pa.string())
        sp = names.take(pa.array(codes, pa.int8()))
    return ConvertedColumn(arr, sp)


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
        if out[j] is None:
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
