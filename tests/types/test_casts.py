"""The server's ``ALTER COLUMN … TYPE`` casts (pgoutput_codec/casts.py) on the shapes a
real archive gives them but the conformance test's one table does not: arrays sliced
out of a batch (an offset), nulls between the values, digits past a decimal's width,
and rounding checked against an independent reference over many values. What the
server makes of each value is tests/conformance/test_retyped_columns.py's."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from pgoutput_codec.typecatalog.casts import cast_value
from pgoutput_codec.typecatalog import arrow_type

NUMERIC_12_1 = (1700, ((12 << 16) | 1) + 4)
PG_EPOCH = dt.datetime(2000, 1, 1)


def _away(d: decimal.Decimal, places: int) -> decimal.Decimal:
    return d.quantize(decimal.Decimal(1).scaleb(-places), decimal.ROUND_HALF_UP)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-10**12, 10**12)), max_size=40), st.integers(0, 5),
       st.integers(0, 3))
def test_timestamps_round_half_away_from_zero_counted_from_2000(us, precision, cut):
    """``AdjustTimestampForTypmod`` rounds the microseconds since 2000-01-01, so a half
    before 2000 rounds down in time and after it up: the reference is decimal
    arithmetic on that count, over a slice of the array."""
    arr = pa.array([0] * cut + us, pa.timestamp("us")).slice(cut)
    got, special = cast_value(arr, (1114, -1), (1114, precision), arr.type)
    assert special is None
    epoch = int((PG_EPOCH - dt.datetime(1970, 1, 1)).total_seconds()) * 10**6
    want = [None if v is None else
            int(_away(decimal.Decimal(v - epoch) / 10**6, precision) * 10**6) + epoch for v in us]
    assert got.cast(pa.int64()).to_pylist() == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.decimals(-10**8, 10**8, places=3, allow_nan=False)), max_size=30))
def test_numeric_scale_shrinks_half_away_from_zero(values):
    arr = pa.array(values, pa.decimal128(12, 3))
    got, _ = cast_value(arr, (1700, ((12 << 16) | 3) + 4), NUMERIC_12_1, pa.decimal128(12, 1))
    assert got.to_pylist() == [None if v is None else _away(v, 1) for v in values]


def test_a_sliced_interval_array_keeps_its_nulls_and_rounds_its_time_part():
    mdn = pa.array([pa.MonthDayNano([0, 0, 1_500_000_000]), None, pa.MonthDayNano([14, 3, -2_500_000_000]),
                    pa.MonthDayNano([-13, -1, 3_600_000_000_000 + 1_000])], pa.month_day_nano_interval())
    got, _ = cast_value(mdn.slice(1), (1186, -1), (1186, (0x7FFF << 16) | 0), mdn.type)
    assert got.to_pylist() == [None, pa.MonthDayNano([14, 3, -3_000_000_000]),
                               pa.MonthDayNano([-13, -1, 3_600_000_000_000])]
    year = (1 << 2) << 16 | 0xFFFF     # interval YEAR: months cut toward zero, days and time gone
    got, _ = cast_value(mdn.slice(1), (1186, -1), (1186, year), mdn.type)
    assert got.to_pylist() == [None, pa.MonthDayNano([12, 0, 0]), pa.MonthDayNano([-12, 0, 0])]


def test_a_sliced_numeric_array_column_rounds_each_element():
    arr = pa.array([[decimal.Decimal("9.99")], None, [decimal.Decimal("2.35"), None, decimal.Decimal("-0.05")], []],
                   pa.list_(pa.decimal128(10, 4)))
    to = pa.list_(pa.decimal128(10, 1))
    got, _ = cast_value(arr.slice(1), (1231, ((10 << 16) | 4) + 4), (1231, ((10 << 16) | 1) + 4), to)
    assert got.to_pylist() == [None, [decimal.Decimal("2.4"), None, decimal.Decimal("-0.1")], []]


def test_numeric_text_past_a_decimal_s_width_and_nan():
    """An unconstrained numeric is text: digits past what a decimal holds, or an
    exponent, are read one by one; NaN fits any ``numeric(p,s)``, held as null plus
    ``NaN``; a value the typmod cannot hold is refused (the caller notes it)."""
    text = pa.array(["1.5e-7", "12345678901234567890.1234567890123456789012345678901234567890125", None, " NaN "])
    got, special = cast_value(text, (1700, -1), (1700, ((38 << 16) | 8) + 4), pa.decimal128(38, 8))
    assert got.to_pylist() == [decimal.Decimal("0.00000015"), decimal.Decimal("12345678901234567890.12345679"),
                               None, None]
    assert special.to_pylist() == [None, None, None, "NaN"]
    with pytest.raises(pa.ArrowInvalid):
        cast_value(pa.array(["123456789012.5"]), (1700, -1), NUMERIC_12_1, pa.decimal128(12, 1))


def test_floats_into_numerics_go_through_their_significant_digits():
    got, special = cast_value(pa.array([float("nan"), 1.005, None, -0.0]), (701, -1), NUMERIC_12_1,
                              pa.decimal128(12, 1))
    assert got.to_pylist() == [None, decimal.Decimal("1.0"), None, decimal.Decimal("0.0")]
    assert special.to_pylist() == ["NaN", None, None, None]
    got, _ = cast_value(pa.array([1.0005, 0.1], pa.float32()), (700, -1), (1700, -1), pa.string())
    assert got.to_pylist() == ["1.0005", "0.1"]       # 6 digits of a float4, not its binary value
    with pytest.raises(pa.ArrowInvalid):
        cast_value(pa.array([float("inf")]), (701, -1), NUMERIC_12_1, pa.decimal128(12, 1))


# (OID, typmod) of the types the casts know, as the catalog holds them
_TYPES = [(16, -1), (21, -1), (23, -1), (20, -1), (700, -1), (701, -1), (1700, -1), (1700, ((12 << 16) | 2) + 4),
          (1700, ((5 << 16) | 0) + 4), (25, -1), (1043, 9), (1042, 7), (1114, -1), (1114, 0), (1184, 3),
          (1083, -1), (1083, 1), (1186, -1), (1186, ((1 << 10) << 16) | 0xFFFF), (1186, (0x7FFF << 16) | 2),
          (1082, -1), (869, -1), (1231, ((10 << 16) | 1) + 4), (1231, -1), (114, -1), (3802, -1), (1266, -1), (1266, 2)]


def _values(oid, typmod, arrow):
    """Values of ``arrow`` (some null) such as a crafted archive could give a type."""
    if pa.types.is_list(arrow):
        vt = arrow.value_type
        one = st.decimals(-10**6, 10**6, places=vt.scale if pa.types.is_decimal(vt) else 3, allow_nan=False)
        one = one if pa.types.is_decimal(vt) else one.map(str)
        return st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), one), max_size=3)), max_size=6)
    if pa.types.is_decimal(arrow):
        bound = 10 ** (arrow.precision - arrow.scale) - 1
        one = st.decimals(-bound, bound, places=arrow.scale, allow_nan=False, allow_infinity=False)
    elif pa.types.is_integer(arrow):
        bits = arrow.bit_width - 1
        one = st.integers(-(2 ** bits), 2 ** bits - 1)
    elif pa.types.is_floating(arrow):
        one = st.floats(width=arrow.bit_width)
    elif pa.types.is_boolean(arrow):
        one = st.booleans()
    elif pa.types.is_string(arrow):
        one = st.one_of(st.text(max_size=8), st.decimals(allow_nan=True).map(str),
                        st.floats().map(repr), st.sampled_from([" 12 ", "+7", "NaN", "1e400", "-0", "::1", "1.2.3.4",
                                                                '"\\ud83d"', '{"a": [1, {"b": 1e2}]}', "[" * 2000,
                                                                "23:59:59.99+02", "12:00:00.25-05:30"]))
    elif pa.types.is_timestamp(arrow):
        one = st.integers(-210_000_000_000 * 10**6, 200_000_000_000 * 10**6)
    elif pa.types.is_time(arrow):
        one = st.integers(0, 86_400 * 10**6)
    elif pa.types.is_interval(arrow):
        one = st.builds(lambda m, d, us: pa.MonthDayNano([m, d, us * 1000]), st.integers(-2**31, 2**31 - 1),
                        st.integers(-2**31, 2**31 - 1), st.integers(-2**62 // 1000, 2**62 // 1000))
    else:   # date
        one = st.integers(-2_000_000, 2_000_000)
    return st.lists(st.one_of(st.none(), one), max_size=8)


@st.composite
def _cases(draw):
    src, dst = draw(st.sampled_from(_TYPES)), draw(st.sampled_from(_TYPES))
    arrow = arrow_type(*src)
    values = draw(_values(*src, arrow))
    cut = draw(st.integers(0, min(2, len(values))))
    return src, dst, pa.array(values, arrow).slice(cut), arrow_type(*dst)


@settings(max_examples=600, deadline=None)
@given(_cases())
def test_any_value_of_any_type_casts_or_is_refused_by_an_error_the_caller_keeps(case):
    """Bad input never crashes: whatever a crafted archive sends under an earlier type,
    the cast gives the column's type, one value per value, or raises one of the errors
    :func:`~pgoutput_codec.typecatalog.retyped.with_earlier_types` turns into a null and a note."""
    src, dst, arr, to = case
    try:
        got, special = cast_value(arr, src, dst, to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return
    assert got.type == to and len(got) == len(arr)
    if pa.types.is_time(to):   # 24:00:00 is a time of PostgreSQL's, past Arrow's range
        us = got.cast(pa.int64()).to_pylist()
        assert all(v is None or 0 <= v <= 86_400 * 10**6 for v in us), us
    else:
        got.validate(full=True)
    assert special is None or len(special) == len(arr)
