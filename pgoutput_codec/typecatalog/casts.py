"""What ``ALTER TABLE … ALTER COLUMN … TYPE`` makes of a value, over Arrow arrays.

The server rewrites every row by the cast from the old type to the new, then fits the
new typmod; pgoutput sends none of it (docs/conformance.md item 20), so a value sent
before the ``ALTER`` is read by its own type (:mod:`pgoutput_codec.typecatalog.retyped`) and cast
here as the server cast it. Arrow's casts are not PostgreSQL's: Arrow refuses what
loses digits where the server rounds, and knows no typmod but a decimal's. The rules,
from the server's sources and seen on PostgreSQL 15, 16 and 18
(tests/conformance/test_retyped_columns.py, ``CASTS`` and ``ZONED``):

- to ``numeric(p,s)``: round half away from zero (``numeric.c`` ``apply_typmod``); from
  ``float8``/``float4`` through the text of its 15/6 significant digits first
  (``float8_numeric``: ``%.15g``), so ``1.005`` becomes ``1.01``, not ``1.00``;
- to ``int2/4/8``: a numeric rounds half away from zero, a float half to even
  (``rint``); text is read as ``int4in`` reads it (spaces around);
- to ``float4/8``: an integer or numeric to the nearest float (an Arrow cast refuses
  ``16777217`` into ``float4``; a numeric goes through its text, as ``numeric_float8``);
- ``timestamp(p)``/``timestamptz(p)``: the microseconds round half away from zero,
  counted from 2000-01-01 as the server counts them (``AdjustTimestampForTypmod``);
  ``time(p)`` rounds half up, ``23:59:59.99`` into ``time(1)`` is ``24:00:00``;
  ``interval`` fields and precision (``AdjustIntervalForTypmod``): the fields right of
  the last one named are cut, the time part's fraction rounds half away from zero;
- ``char(n)`` pads with spaces to n characters; ``char`` into ``text``/``varchar``
  loses its trailing spaces (``rtrim1``);
- to ``text``: the old type's output form (``true``, ``1e+20``, ``2024-01-02 03:04:05.5``);
  to ``bool``: an ``int4`` is ``<> 0``, text as ``boolin`` reads it (`` yes ``, ``of``);
  ``json`` to ``jsonb``: ``jsonb_out``'s text (keys sorted, duplicates gone, ``1e2`` → ``100``);
- between two catalog types with no cast (``int`` → ``time``) the ``ALTER`` had a
  ``USING`` the archive does not hold: refused, so the caller keeps the value in a note
  (Arrow's cast made ``-1`` a time of day Arrow itself calls invalid);
- ``timestamp``/``date`` ↔ ``timestamptz`` (and ``timestamptz`` → ``time``, ``text``) on
  the ``ALTER`` session's clock, ``TypeRegistry.timezone`` (UTC when not given): a time
  the fall back repeats is standard time, one the spring forward skips reads by the
  offset before it (``DetermineTimeZoneOffset``);
- ``timetz(p)`` rounds its clock half up, its zone kept; ``timetz`` → ``time`` drops it.

Not followed (README Limits): ``time`` → ``timetz`` takes the zone's offset on the day of
the ``ALTER``, which the archive does not hold (refused into a note); DateStyle and
IntervalStyle are ISO and postgres.
"""

from __future__ import annotations

import decimal
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .facts import ARRAY_ELEM, BY_OID
from .datetime import TIME_RE, fmt_offset, fmt_time_us, frac_us
from .floats import fmt_float8

__all__ = ["cast_checked", "cast_value", "to_bool"]

NUMERIC, FLOAT4, FLOAT8, BOOL = 1700, 700, 701, 16
INTS = frozenset((20, 21, 23))
BPCHAR = 1042
TEXTS = frozenset((25, 1043, BPCHAR, 19))
TIMESTAMP, TIMESTAMPTZ, TIMETZ = 1114, 1184, 1266
TIMESTAMPS = frozenset((TIMESTAMP, TIMESTAMPTZ))
TIME, INTERVAL, DATE, INET, JSONB = 1083, 1186, 1082, 869, 3802
# types whose text in the archive is not what the ALTER's cast to text gave: bool's and
# inet's cast is a function of its own, and a timestamptz was written on the capture
# session's clock, not the ALTER session's
OWN_TEXT_CASTS = frozenset((BOOL, INET, TIMESTAMPTZ))

_NUMBERS = frozenset((*INTS, FLOAT4, FLOAT8, NUMERIC))
_DATETIMES = frozenset((DATE, *TIMESTAMPS))
#: the casts PostgreSQL has between the types here (pg_cast; text to and from any type
#: by its input and output functions), by target: an ALTER between others needs USING
_CASTS_TO = {
    **{t: _NUMBERS | ({BOOL} if t == 23 else set()) for t in _NUMBERS},
    BOOL: {23},
    DATE: _DATETIMES, TIMESTAMP: _DATETIMES, TIMESTAMPTZ: _DATETIMES,
    TIME: {TIME, TIMETZ, *TIMESTAMPS},
    # time -> timetz takes the session zone's offset on the day of the ALTER, unknown
    TIMETZ: {TIMETZ},
}
# the server's timestamps count microseconds from 2000-01-01, and round there
_PG_EPOCH_US = 946_684_800 * 1_000_000
# datetime.h's field bits (INTERVAL_MASK) and the unit each cuts the time part to
_YEAR, _MONTH, _DAY = 1 << 2, 1 << 1, 1 << 3
_HOUR, _MINUTE, _SECOND = 1 << 10, 1 << 11, 1 << 12
_FULL_RANGE, _FULL_PRECISION = 0x7FFF, 0xFFFF


def cast_checked(arr: pa.Array, to: pa.DataType) -> pa.Array:
    """``arr`` as type ``to``, values checked. Arrow casts an integer to a decimal only
    when the decimal's precision holds every value of the integer type (int8 into
    ``numeric(20,2)`` needs 21 digits): such a cast goes through the widest decimal of
    ``to``'s scale, and the values are checked against ``to`` there."""
    try:
        return arr.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if not pa.types.is_decimal(to) or pa.types.is_decimal(arr.type) and arr.type.precision <= to.precision:
            raise
        wide = pa.decimal256(76, to.scale) if pa.types.is_decimal256(to) else pa.decimal128(38, to.scale)
        return arr.cast(wide).cast(to)


def cast_value(arr: pa.Array, src: tuple, dst: tuple, to: pa.DataType, texts: pa.Array | None = None,
               timezone: str | None = None):
    """``arr``, read by type ``src`` (OID, typmod), as the server's ``ALTER`` made it of
    type ``dst`` held as ``to``: (values, special), ``special`` the marker of a value the
    type holds as null plus a name (float ``NaN`` into ``numeric(p,s)``), or None.
    ``texts``: the values' text form where they were sent as text (None elsewhere), the
    exact ``… TYPE text`` result. ``timezone``: the ``ALTER`` session's ``TimeZone``
    (``TypeRegistry.timezone``), in which a ``timestamp`` meets a ``timestamptz``; UTC
    when not known. Raises Arrow's errors when a value does not fit (the caller casts
    value by value then, :func:`pgoutput_codec.typecatalog.retyped.cast_each`)."""
    (soid, smod), (doid, dmod) = src, dst
    if doid in ARRAY_ELEM and pa.types.is_list(arr.type) and pa.types.is_list(to):
        return _elementwise(arr, (ARRAY_ELEM.get(soid, soid), smod), (ARRAY_ELEM[doid], dmod), to,
                            timezone), None
    if soid != doid and doid in _CASTS_TO and soid in BY_OID and soid not in TEXTS and soid not in _CASTS_TO[doid]:
        # no cast: the ALTER had a USING expression, which the archive does not hold (a
        # domain's or an enum's OID is not in the catalog, and other targets than these
        # keep Arrow's cast: json -> jsonb, inet -> cidr...)
        raise pa.ArrowInvalid(f"no cast from type OID {soid} to {doid} to redo: the ALTER's needs what the "
                              "archive does not hold (its USING expression, or the day it ran)")
    special, zone = None, timezone or "UTC"
    if soid == TIMETZ and doid == TIME:
        arr = _timetz(arr, 1, keep_zone=False)   # timetz_time: the clock, the zone dropped
    elif soid == TIMESTAMPTZ and doid in (TIMESTAMP, DATE, TIME):
        arr = pc.local_timestamp(arr.cast(pa.timestamp("us", tz=zone)))   # the wall clock there
    elif soid in (TIMESTAMP, DATE) and doid == TIMESTAMPTZ:
        arr = _from_wall_clock(arr.cast(pa.timestamp("us")), zone)
    if doid == BOOL:
        arr = to_bool(arr)
    elif doid == NUMERIC:
        arr, special = _to_numeric(arr, soid, to)
    elif doid in INTS:
        arr = _to_int(arr, soid, to)
    elif doid in (FLOAT4, FLOAT8):
        arr = _to_float(arr, soid, to)
    elif doid in TEXTS and pa.types.is_string(to):
        arr = _to_text(arr, soid, doid, dmod, texts, zone)
    elif doid == JSONB and soid != JSONB and pa.types.is_string(to) and pa.types.is_string(arr.type):
        arr = _jsonb_text(arr)
    else:
        arr = cast_checked(arr, to)
    if doid in TIMESTAMPS and 0 <= dmod < 6:
        arr = _round_timestamps(arr, dmod)
    elif doid == TIME and 0 <= dmod < 6:
        arr = _round_times(arr, dmod)
    elif doid == TIMETZ and 0 <= dmod < 6 and pa.types.is_string(arr.type):
        arr = _timetz(arr, 10 ** (6 - dmod), keep_zone=True)
    elif doid == INTERVAL and dmod >= 0:
        arr = _fit_intervals(arr, dmod)
    return arr, special


def _elementwise(arr, src, dst, to, timezone):
    """An array's elements cast one type to the other, its shape kept (the typmod of an
    array column is its elements'). A NaN element of a ``numeric(p,s)[]`` has no place
    in a decimal list: the cast is refused, and the value kept in ``__special``."""
    flat = arr.values.slice(arr.offsets[0].as_py(), arr.offsets[-1].as_py() - arr.offsets[0].as_py())
    values, special = cast_value(flat, src, dst, to.value_type, timezone=timezone)
    if special is not None and special.null_count < len(special):
        raise pa.ArrowInvalid(f"{to} cannot hold NaN")
    offsets = pc.subtract(arr.offsets, arr.offsets[0])
    return pa.ListArray.from_arrays(offsets, values, type=to, mask=arr.is_null())


# ------------------------------------------------------------------ numbers

def to_bool(arr):
    """``int4`` → ``bool`` is ``<> 0``; text as ``boolin`` reads it."""
    if pa.types.is_integer(arr.type):
        return pc.not_equal(arr, 0)
    if not pa.types.is_string(arr.type):
        return arr.cast(pa.bool_())
    word = pc.utf8_lower(pc.utf8_trim_whitespace(arr))
    true, false = pc.is_in(word, pa.array(_TRUE)), pc.is_in(word, pa.array(_FALSE))
    if pc.any(pc.and_(pc.is_valid(arr), pc.invert(pc.or_(true, false)))).as_py():
        raise pa.ArrowInvalid("not a boolean (boolin reads t/f, true/false, yes/no, on/off, 1/0)")
    return pc.if_else(pc.is_valid(arr), true, pa.nulls(len(arr), pa.bool_()))


# boolin: any unique prefix of true/false/yes/no, on/off (two letters at least), 1/0
_TRUE = ["t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"]
_FALSE = ["f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"]


def _to_numeric(arr, soid, to):
    if soid in (FLOAT4, FLOAT8):
        return _numeric_of_floats(arr, 15 if soid == FLOAT8 else 6, to)
    special = None
    if pa.types.is_string(arr.type) and pa.types.is_decimal(to):
        nan = pc.fill_null(pc.match_substring_regex(arr, r"^\s*[Nn][Aa][Nn]\s*$"), False)
        if pc.any(nan).as_py():   # NaN fits any numeric(p,s): null, and named
            special = pc.if_else(nan, "NaN", pa.nulls(len(arr), pa.string()))
            arr = pc.if_else(nan, pa.nulls(len(arr), pa.string()), arr)
        arr = _decimals_of_text(arr)
    if pa.types.is_decimal(arr.type) and pa.types.is_decimal(to) and arr.type.scale > to.scale:
        arr = pc.round(arr, ndigits=to.scale, round_mode="half_towards_infinity")
    return cast_checked(arr, to), special


def _numeric_of_floats(arr, digits, to):
    """``float8_numeric``: the float's text in ``digits`` significant digits, read as a
    numeric, then fitted to the typmod. A float has no decimal digits to round in
    place: ``1.005`` is 1.00499999999999989…, whose 15 digits are ``1.005``."""
    dec = pa.types.is_decimal(to)
    quantum = decimal.Decimal(1).scaleb(-to.scale) if dec else None
    values, special = [], []
    for x in arr.to_pylist():
        if x is None or x != x or x in (float("inf"), float("-inf")):
            name = None if x is None else "NaN" if x != x else "Infinity" if x > 0 else "-Infinity"
            if dec and name is not None and name != "NaN":
                raise pa.ArrowInvalid(f"numeric({to.precision},{to.scale}) cannot hold {name}")
            values.append(name if not dec else None)
            special.append("NaN" if dec and name == "NaN" else None)
            continue
        d = decimal.Decimal(format(x, f".{digits}g"))
        d = abs(d) if d == 0 else d   # numeric has no -0
        try:
            values.append(d.quantize(quantum, decimal.ROUND_HALF_UP, _WIDE) if dec else format(d, "f"))
        except decimal.InvalidOperation:
            raise pa.ArrowInvalid(f"{x!r} does not fit {to}") from None
        special.append(None)
    out = pa.array(values, to)
    return out, (pa.array(special, pa.string()) if any(s is not None for s in special) else None)


_WIDE = decimal.Context(prec=80)   # past any decimal Arrow holds: what does not fit is refused


def _decimals_of_text(arr: pa.Array) -> pa.Array:
    """Numeric text (an unconstrained ``numeric``, or ``text``) as a decimal wide enough
    for every digit it has, so rounding sees them all."""
    arr = pc.utf8_trim_whitespace(arr)
    frac = pc.max(pc.utf8_length(pc.replace_substring_regex(arr, r"^[^.]*\.?", ""))).as_py() or 0
    try:
        return arr.cast(pa.decimal256(76, min(frac, 60)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    ds = []   # an exponent, or more digits than the decimal above holds: one by one
    for s in arr.to_pylist():
        try:
            d = decimal.Decimal(s) if s is not None else None
        except decimal.InvalidOperation:
            raise pa.ArrowInvalid(f"{s!r} is not a number") from None
        if d is not None and not d.is_finite():
            raise pa.ArrowInvalid(f"{s!r} is not a finite number")
        ds.append(d)
    scale = max([-d.as_tuple().exponent for d in ds if d is not None] + [0])
    return pa.array(ds, pa.decimal256(76, min(max(scale, 0), 76)))


def _to_int(arr, soid, to):
    if soid == NUMERIC and pa.types.is_string(arr.type):
        arr = _decimals_of_text(arr)
    elif pa.types.is_string(arr.type):
        # int4in skips spaces around the digits, and reads a sign Arrow does not
        arr = pc.replace_substring_regex(pc.utf8_trim_whitespace(arr), r"^\+", "")
    if pa.types.is_decimal(arr.type) and arr.type.scale > 0:
        arr = pc.round(arr, ndigits=0, round_mode="half_towards_infinity")
    elif pa.types.is_floating(arr.type):
        arr = pc.round(arr, round_mode="half_to_even")   # rint
    return cast_checked(arr, to)


def _to_float(arr, soid, to):
    if pa.types.is_integer(arr.type):
        return arr.cast(to, safe=False)        # the C conversion: the nearest float
    if pa.types.is_decimal(arr.type):
        arr = arr.cast(pa.string())            # numeric_float8 reads the numeric's text
    elif pa.types.is_string(arr.type):
        arr = pc.utf8_trim_whitespace(arr)
    return cast_checked(arr, to)


# ------------------------------------------------------------------ text

def _to_text(arr, soid, doid, dmod, texts, zone):
    if soid in OWN_TEXT_CASTS:
        texts = None            # their cast to text is not their output function
    if texts is not None and not pc.any(pc.and_(pc.is_valid(arr), pc.is_null(texts))).as_py():
        out = texts             # sent as text: that text is the output form
    else:
        if soid == BOOL and pa.types.is_boolean(arr.type):
            out = pc.if_else(arr, "true", "false")   # booltext, not boolout's 't'
        elif soid == INET:
            out = pc.if_else(pc.match_substring(arr, "/"), arr, pc.binary_join_element_wise(
                arr, pc.if_else(pc.match_substring(arr, ":"), "/128", "/32"), ""))   # network_show
        elif pa.types.is_floating(arr.type):
            out = _float_text(arr)
        elif soid in TIMESTAMPS:
            out = _timestamp_text(arr, soid, zone)
        elif pa.types.is_interval(arr.type):
            out = _interval_text(arr)
        elif pa.types.is_time(arr.type):      # time_out: 24:00:00 is a time, no fraction of zeros
            out = pa.array([None if v is None else fmt_time_us(v) for v in arr.cast(pa.int64()).to_pylist()],
                           pa.string())
        elif pa.types.is_binary(arr.type):    # byteaout's hex form
            out = pa.array([None if v is None else "\\x" + v.hex() for v in arr.to_pylist()], pa.string())
        else:
            out = cast_checked(arr, pa.string())
        if texts is not None:
            out = pc.if_else(pc.is_valid(texts), texts, out)
    if soid == BPCHAR and doid != BPCHAR:
        out = pc.utf8_rtrim(out, characters=" ")
    elif doid == BPCHAR and dmod >= 5:
        out = pc.utf8_rpad(pc.utf8_rtrim(out, characters=" "), width=dmod - 4, padding=" ")
    return out


def _float_text(arr):
    """``float8out``/``float4out``'s form (:func:`.typecatalog.floats.fmt_float8`), one by one: a
    float column altered to text is rare."""
    f4 = pa.types.is_float32(arr.type)
    return pa.array([None if x is None else fmt_float8(x, f4) for x in arr.to_pylist()], pa.string())


def _timestamp_text(arr, soid, zone):
    """``timestamp_out`` under DateStyle ISO: the fraction without trailing zeros; a
    timestamptz on ``zone``'s wall clock with its offset (``-04``, ``+05:30``,
    ``-04:56:02`` before standard time). Arrow's ``%S`` carries the unit's fraction,
    always six digits here."""
    wall = pc.local_timestamp(arr.cast(pa.timestamp("us", tz=zone))) if soid == TIMESTAMPTZ else arr
    out = pc.utf8_rtrim(pc.utf8_rtrim(pc.strftime(wall, format="%Y-%m-%d %H:%M:%S"), characters="0"),
                        characters=".")
    if soid != TIMESTAMPTZ:
        return out
    offset = pc.divide(pc.subtract(wall.cast(pa.int64()), arr.cast(pa.int64())), 1_000_000)
    kinds = pc.unique(offset)        # a zone has few offsets: each written once
    texts = pa.array([None if o is None else fmt_offset(o) for o in kinds.to_pylist()], pa.string())
    return pc.binary_join_element_wise(out, pc.take(texts, pc.index_in(offset, kinds)), "")


def _from_wall_clock(arr: pa.Array, zone: str) -> pa.Array:
    """Wall-clock times of ``zone`` as instants, as ``DetermineTimeZoneOffset`` reads
    them: a time the fall back repeats is the later (standard time), a time the spring
    forward skips is read by the offset before it (02:30 becomes 03:30 summer time)."""
    at = pc.assume_timezone(arr, zone, ambiguous="latest", nonexistent="earliest")
    offset = pc.subtract(pc.local_timestamp(at).cast(pa.int64()), at.cast(pa.int64()))
    return pc.subtract(arr.cast(pa.int64()), offset).cast(pa.timestamp("us", tz="UTC"))


def _jsonb_text(arr):
    """``json`` (or text) read as ``jsonb`` and written as ``jsonb_out`` writes it, one
    by one: keys by length then bytes, the last of a duplicate kept, numbers as
    ``numeric_out`` (``1e2`` is ``100``, ``-0`` is ``0``), ``", "`` and ``": "``."""
    def bad(word):
        raise ValueError(f"{word} is not JSON")

    out = []
    for text in arr.to_pylist():
        if text is None:
            out.append(None)
            continue
        try:
            value = json.loads(text, parse_float=decimal.Decimal, parse_int=decimal.Decimal, parse_constant=bad)
            out.append(_jsonb_out(value).encode().decode())   # a lone surrogate is no UTF-8
        except (ValueError, RecursionError) as e:   # UnicodeError is a ValueError
            raise pa.ArrowInvalid(f"not jsonb: {e}") from None
    return pa.array(out, pa.string())


def _jsonb_out(v) -> str:
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: (len(k.encode()), k.encode()))
        return "{" + ", ".join(f"{_json_string(k)}: {_jsonb_out(v[k])}" for k in keys) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_jsonb_out(x) for x in v) + "]"
    if isinstance(v, str):
        return _json_string(v)
    if isinstance(v, decimal.Decimal):
        return format(abs(v) if v == 0 else v, "f")
    return "null" if v is None else "true" if v else "false"


def _json_string(s: str) -> str:
    """``escape_json``: quotes, backslashes and control characters escaped, the rest as is."""
    out = ['"']
    for ch in s:
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out) + '"'


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _interval_text(arr):
    """``interval_out`` under IntervalStyle postgres (``EncodeInterval``), one by one: an
    ``ALTER`` of an interval column to text is rare, and Arrow has no such format."""
    out = []
    for v in arr.to_pylist():
        if v is None:
            out.append(None)
            continue
        months, days, us = v.months, v.days, v.nanoseconds // 1000
        parts, before = [], False
        for n, unit in ((int(months / 12), "year"), (months - int(months / 12) * 12, "mon"), (days, "day")):
            if n:
                parts.append(f"{'+' if before and n > 0 else ''}{n} {unit}{'' if n == 1 else 's'}")
                before = before or n < 0
        if us or not parts:
            parts.append(("-" if us < 0 else "+" if before else "") + fmt_time_us(abs(us)))
        out.append(" ".join(parts))
    return pa.array(out, pa.string())


# ------------------------------------------------------------------ typmods of time

def _with_storage(arr: pa.Array, fn) -> pa.Array:
    """``arr`` (timestamp/time, µs) with ``fn`` applied to its int64 storage."""
    store = arr.cast(pa.int64()) if not pa.types.is_int64(arr.type) else arr
    vals = fn(store.fill_null(0).to_numpy())
    return pa.array(vals, pa.int64(), mask=store.is_null().to_numpy(zero_copy_only=False)).cast(arr.type)


def _round_away(v: np.ndarray, scale: int) -> np.ndarray:
    half = scale // 2
    return np.where(v >= 0, (v + half) // scale * scale, -((-v + half) // scale * scale))


def _round_timestamps(arr, precision):
    scale = 10 ** (6 - precision)
    return _with_storage(arr, lambda v: _round_away(v - _PG_EPOCH_US, scale) + _PG_EPOCH_US)


def _round_up(v, scale: int):
    """Half up (``AdjustTimeForTypmod``: a time of day is never negative)."""
    return (v + scale // 2) // scale * scale


def _round_times(arr, precision):
    return _with_storage(arr, lambda v: _round_up(v, 10 ** (6 - precision)))


def _timetz(arr, scale: int, keep_zone: bool):
    """A ``timetz`` (held as its text) rounded half up to ``scale`` µs
    (``AdjustTimeForTypmod``, so ``23:59:59.99+02`` into ``timetz(1)`` is ``24:00:00+02``),
    as text with its zone, or as a ``time`` without it. One by one: rare."""
    out = []
    for text in arr.to_pylist():
        m = None if text is None else TIME_RE.match(text.encode())
        if text is not None and (m is None or not m[5]):
            raise pa.ArrowInvalid(f"{text!r} is not a time with time zone")
        if m is None:
            out.append(None)
            continue
        us = _round_up((int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])) * 1_000_000 + frac_us(m[4]), scale)
        off = (int(m[6]) * 3600 + int(m[7] or 0) * 60 + int(m[8] or 0)) * (1 if m[5] == b"+" else -1)
        out.append(fmt_time_us(us) + fmt_offset(off) if keep_zone else us)
    return pa.array(out, pa.string() if keep_zone else pa.int64()).cast(
        pa.string() if keep_zone else pa.time64("us"))


def _cut(v: np.ndarray, unit: int) -> np.ndarray:
    """C's division: toward zero."""
    return np.sign(v) * (np.abs(v) // unit) * unit


def _fit_intervals(arr, typmod):
    rng, precision = (typmod >> 16) & _FULL_RANGE, typmod & _FULL_PRECISION
    if not len(arr):
        return arr
    mdn = np.frombuffer(arr.buffers()[1], dtype=np.dtype([("m", "<i4"), ("d", "<i4"), ("ns", "<i8")]),
                        count=arr.offset + len(arr))[arr.offset:].copy()
    months, days, us = mdn["m"].astype(np.int64), mdn["d"], mdn["ns"] // 1000
    if rng != _FULL_RANGE:
        last = max(b for b in (_YEAR, _MONTH, _DAY, _HOUR, _MINUTE, _SECOND) if rng & b
                   and (b != _YEAR or not rng & _MONTH))
        if last == _YEAR:
            months = _cut(months, 12)
        if last in (_YEAR, _MONTH):
            days = np.zeros_like(days)
        if last in (_YEAR, _MONTH, _DAY):
            us = np.zeros_like(us)
        elif last == _HOUR:
            us = _cut(us, 3_600_000_000)
        elif last == _MINUTE:
            us = _cut(us, 60_000_000)
    if precision != _FULL_PRECISION and precision < 6:
        us = _round_away(us, 10 ** (6 - precision))
    mdn["m"], mdn["d"], mdn["ns"] = months, days, us * 1000
    valid = arr.is_valid().buffers()[1] if arr.null_count else None   # a fresh bitmap, offset 0
    return pa.Array.from_buffers(arr.type, len(arr), [valid, pa.py_buffer(mdn.tobytes())], arr.null_count)
