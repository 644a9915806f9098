# cython: language_level=3
"""Column converters for the common builtin types: Arrow buffers in, Arrow buffers out.

One call (``convert_columns_fast``) converts columns of TupleData values (``kinds`` string
array of 'n'/'u'/'t'/'b', ``data`` binary array, each column's values picked by an index)
to the Arrow layout that :mod:`pgoutput_codec.typecatalog` names for the type. No Python
object is made per value. Which type uses which converter code is a fact of
``typecatalog/facts.py`` (the ``fast`` column of its table), not of this module.

Each value converter returns ``OK``, ``SPECIAL`` (the value is null in Arrow and
``special`` holds +/-infinity or NaN), ``FAIL`` (the static message in ``Conv.err``) or
``SLOW`` (a legal form this module does not parse, e.g. bytea 'escape' output or a
non-default IntervalStyle: the caller converts the whole column in Python).
Binary forms follow PostgreSQL's ``*_send`` functions (``src/backend/utils/adt/``);
text forms follow the ``*_out`` functions under DateStyle ISO and IntervalStyle postgres.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.stdlib cimport strtod, strtof
from libc.string cimport memcpy

from pgoutput_codec._arrowbuf cimport bit, buffer_address as _addr
from pgoutput_codec._builders cimport hand_off, is_arange_offsets, pool_buffer
from pgoutput_codec._memory cimport pool_free, pool_malloc, pool_realloc
from pgoutput_codec._reader cimport (
    Reader, read_i16, read_i32, read_i64, read_u16, read_u32, reader_init, utf8_valid,
)

import numpy as np
import pyarrow as pa


cdef extern from *:
    """
    typedef __int128 pgc_i128;
    /* 10^38 */
    static const pgc_i128 PGC_DEC38 =
        (((pgc_i128)5421010862427522170LL) << 64) + (pgc_i128)687399551400673280ULL;
    static inline pgc_i128 pgc_pow10(int n) { pgc_i128 r = 1; while (n-- > 0) r *= 10; return r; }
    static inline void pgc_store_i128(void *dst, pgc_i128 v) {
        unsigned long long lo = (unsigned long long)v; long long hi = (long long)(v >> 64);
        memcpy(dst, &lo, 8); memcpy((char *)dst + 8, &hi, 8);   /* Arrow decimal128: little-endian */
    }
    """
    ctypedef long long pgc_i128
    const pgc_i128 PGC_DEC38
    pgc_i128 pgc_pow10(int n) noexcept nogil
    void pgc_store_i128(void* dst, pgc_i128 v) noexcept nogil


# converter codes (typecatalog.facts repeats them as F_BOOL…)
cpdef enum Code:
    C_BOOL = 1
    C_INT2 = 2
    C_INT4 = 3
    C_INT8 = 4
    C_OID = 5
    C_FLOAT4 = 6
    C_FLOAT8 = 7
    C_NUMERIC = 8      # decimal128(p, s) from the typmod
    C_DATE = 9
    C_TIME = 10
    C_TIMESTAMP = 11
    C_TIMESTAMPTZ = 12
    C_INTERVAL = 13
    C_TEXT = 14        # text-like: raw bytes in both forms, UTF-8 checked
    C_BYTEA = 15
    C_UUID = 16        # canonical 36-character string
    C_JSONB = 17       # text; the binary form has a version byte 1

# value results
cdef enum:
    OK = 0
    SPECIAL = 1
    FAIL = -1
    SLOW = -2
    NOMEM = -3         # a column's output could not grow

# special codes (typecatalog.markers.SPECIAL_NAMES)
cdef enum:
    S_POS_INF = 1
    S_NEG_INF = 2
    S_NAN = 3

DEF_WIDTH = {C_INT2: 2, C_INT4: 4, C_INT8: 8, C_OID: 4, C_FLOAT4: 4, C_FLOAT8: 8, C_NUMERIC: 16,
             C_DATE: 4, C_TIME: 8, C_TIMESTAMP: 8, C_TIMESTAMPTZ: 8, C_INTERVAL: 16}

cdef int64_t UNIX_EPOCH_DAYS = 10957              # 1970-01-01 -> 2000-01-01
cdef int64_t UNIX_EPOCH_US = 946684800000000
cdef int64_t US_PER_DAY = 86400000000
cdef int64_t I64_MAX = 0x7FFFFFFFFFFFFFFF
cdef int64_t I64_MIN = -I64_MAX - 1
cdef int64_t I64_MIN_DIV10 = -922337203685477580   # INT64_MIN / 10, truncated
cdef int32_t I32_MAX = 0x7FFFFFFF
cdef int32_t I32_MIN = -I32_MAX - 1


cdef struct Conv:
    int code
    int precision
    int scale
    uint8_t* out        # fixed-width output (or bool bitmap)
    uint8_t* vout       # variable-width output bytes
    Py_ssize_t vpos
    int special
    const char* err


# ---------------------------------------------------------------- text helpers

cdef inline bint _digit(uint8_t c) noexcept nogil:
    return c >= 48 and c <= 57


cdef int _parse_i64(const uint8_t* p, Py_ssize_t n, int64_t lo, int64_t hi, int64_t* out) noexcept nogil:
    """[+-]digits, range-checked; accumulates negatively so INT64_MIN parses."""
    cdef Py_ssize_t i = 0
    cdef bint neg = False
    cdef int64_t v = 0
    cdef int d
    if n > 0 and (p[0] == 45 or p[0] == 43):
        neg = p[0] == 45
        i = 1
    if i == n:
        return -1
    if n - i <= 18:
        # up to 18 digits cannot overflow: no check per digit
        while i < n:
            d = p[i] - 48
            if d < 0 or d > 9:
                return -1
            v = v * 10 - d
            i += 1
    while i < n:
        if not _digit(p[i]):
            return -1
        d = p[i] - 48
        # v * 10 - d >= INT64_MIN, without a division per digit
        if v < I64_MIN_DIV10 or (v == I64_MIN_DIV10 and d > 8):
            return -1
        v = v * 10 - d
        i += 1
    if not neg:
        if v == I64_MIN:
            return -1
        v = -v
    if v < lo or v > hi:
        return -1
    out[0] = v
    return 0


cdef int _uint(const uint8_t* p, Py_ssize_t n, Py_ssize_t* i, int mindigits, int maxdigits,
               int64_t* out) noexcept nogil:
    """``mindigits`` to ``maxdigits`` digits at p[i] (the *_out functions zero-pad)."""
    cdef int64_t v = 0
    cdef int k = 0
    while i[0] < n and _digit(p[i[0]]):
        if k == maxdigits:
            return -1
        v = v * 10 + (p[i[0]] - 48)
        i[0] += 1
        k += 1
    if k < mindigits:
        return -1
    out[0] = v
    return 0


cdef inline bint _eq(const uint8_t* p, Py_ssize_t n, const char* lit, Py_ssize_t ln) noexcept nogil:
    cdef Py_ssize_t i
    if n != ln:
        return False
    for i in range(n):
        if p[i] != <uint8_t>lit[i]:
            return False
    return True


cdef int _infinity(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    if _eq(p, n, b"infinity", 8):
        return S_POS_INF
    if _eq(p, n, b"-infinity", 9):
        return S_NEG_INF
    return 0


cdef int64_t _days_from_civil(int64_t y, int64_t m, int64_t d) noexcept nogil:
    """Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's algorithm);
    ``y`` is astronomical (1 BC = 0), as PostgreSQL's date2j."""
    cdef int64_t era, yoe, doy, doe
    if m <= 2:
        y -= 1
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


cdef int _mdays(int64_t y, int64_t m) noexcept nogil:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    if m == 4 or m == 6 or m == 9 or m == 11:
        return 30
    return 31


cdef int _date_part(const uint8_t* p, Py_ssize_t n, Py_ssize_t* i,
                    int64_t* y, int64_t* m, int64_t* d) noexcept nogil:
    """YYYY-MM-DD (the year may have more than four digits)."""
    if _uint(p, n, i, 4, 7, y) < 0 or i[0] >= n or p[i[0]] != 45:
        return -1
    i[0] += 1
    if _uint(p, n, i, 2, 2, m) < 0 or i[0] >= n or p[i[0]] != 45:
        return -1
    i[0] += 1
    if _uint(p, n, i, 2, 2, d) < 0:
        return -1
    if m[0] < 1 or m[0] > 12 or d[0] < 1:
        return -1
    return 0


cdef int _time_part(const uint8_t* p, Py_ssize_t n, Py_ssize_t* i, int maxh, int64_t* us) noexcept nogil:
    """HH:MM:SS[.ffffff] -> microseconds; ``maxh`` hour digits, 2 for a clock time."""
    cdef int64_t h, mi, s, f = 0
    cdef int k = 0
    if _uint(p, n, i, 2, maxh, &h) < 0 or i[0] >= n or p[i[0]] != 58:
        return -1
    i[0] += 1
    if _uint(p, n, i, 2, 2, &mi) < 0 or i[0] >= n or p[i[0]] != 58:
        return -1
    i[0] += 1
    if _uint(p, n, i, 2, 2, &s) < 0 or mi > 59 or s > 60:
        return -1
    if i[0] < n and p[i[0]] == 46:
        i[0] += 1
        while i[0] < n and _digit(p[i[0]]):
            if k == 6:
                return -1
            f = f * 10 + (p[i[0]] - 48)
            k += 1
            i[0] += 1
        if k == 0:
            return -1
        while k < 6:
            f *= 10
            k += 1
    if maxh == 2 and (h > 24 or (h == 24 and (mi != 0 or s != 0 or f != 0))):
        return -1                # a clock (not an interval): 24:00:00 is the last, as datetime.c
    us[0] = ((h * 60 + mi) * 60 + s) * 1000000 + f
    return 0


cdef int _bc_suffix(const uint8_t* p, Py_ssize_t n, Py_ssize_t* i, int64_t* y) noexcept nogil:
    """Optional ' BC' (year Y BC is astronomical 1 - Y), then the end of the value.
    There is no year 0 in AD/BC notation: datetime.c's ValidateDate refuses it either way."""
    if y[0] == 0:
        return -1
    if i[0] + 3 == n and p[i[0]] == 32 and p[i[0] + 1] == 66 and p[i[0] + 2] == 67:
        y[0] = 1 - y[0]
        i[0] = n
    return 0 if i[0] == n else -1


cdef int _date_text(const uint8_t* p, Py_ssize_t n, int64_t* days) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef int64_t y, m, d
    if _date_part(p, n, &i, &y, &m, &d) < 0:
        return -1
    if _bc_suffix(p, n, &i, &y) < 0 or d > _mdays(y, m):
        return -1
    days[0] = _days_from_civil(y, m, d)
    return 0


cdef int _timestamp_text(const uint8_t* p, Py_ssize_t n, bint tz, int64_t* out) noexcept nogil:
    """'YYYY-MM-DD HH:MM:SS[.f][+HH[:MM[:SS]]][ BC]' -> µs since 1970 UTC."""
    cdef Py_ssize_t i = 0
    cdef int64_t y, m, d, us, oh, om = 0, osec = 0, off = 0, days
    cdef int sign
    if _date_part(p, n, &i, &y, &m, &d) < 0 or i >= n or p[i] != 32:
        return -1
    i += 1
    if _time_part(p, n, &i, 2, &us) < 0:
        return -1
    if tz:
        if i >= n or (p[i] != 43 and p[i] != 45):
            return -1
        sign = 1 if p[i] == 43 else -1
        i += 1
        if _uint(p, n, &i, 2, 2, &oh) < 0:
            return -1
        if i < n and p[i] == 58:
            i += 1
            if _uint(p, n, &i, 2, 2, &om) < 0:
                return -1
            if i < n and p[i] == 58:
                i += 1
                if _uint(p, n, &i, 2, 2, &osec) < 0:
                    return -1
        off = sign * ((oh * 60 + om) * 60 + osec)
    if _bc_suffix(p, n, &i, &y) < 0 or d > _mdays(y, m):
        return -1
    days = _days_from_civil(y, m, d)
    if days > 106751991 or days < -106751991:
        return -3
    us -= off * 1000000             # |us| < 2^37 here
    days *= US_PER_DAY
    if (us > 0 and days > I64_MAX - us) or (us < 0 and days < I64_MIN - us):
        return -3
    out[0] = days + us
    return 0


cdef int _interval_text(const uint8_t* p, Py_ssize_t n,
                        int64_t* months, int64_t* days, int64_t* us) noexcept nogil:
    """IntervalStyle postgres: '[N year[s]] [N mon[s]] [N day[s]] [[+-]H:MM:SS[.f]]'."""
    cdef Py_ssize_t i = 0, j
    cdef int64_t v, t
    cdef bint neg
    months[0] = 0
    days[0] = 0
    us[0] = 0
    while i < n:
        if p[i] == 32:
            i += 1
            continue
        neg = False
        if p[i] == 45 or p[i] == 43:
            neg = p[i] == 45
            i += 1
        j = i
        if _uint(p, n, &i, 1, 18, &v) < 0:
            return -2
        if i < n and p[i] == 58:      # the time part
            i = j
            if _time_part(p, n, &i, 16, &t) < 0:
                return -1
            us[0] = -t if neg else t
            continue
        if neg:
            v = -v
        if i >= n or p[i] != 32:
            return -2
        i += 1
        j = i
        while i < n and p[i] != 32:
            i += 1
        if _eq(p + j, i - j, b"year", 4) or _eq(p + j, i - j, b"years", 5):
            months[0] += v * 12
        elif _eq(p + j, i - j, b"mon", 3) or _eq(p + j, i - j, b"mons", 4):
            months[0] += v
        elif _eq(p + j, i - j, b"day", 3) or _eq(p + j, i - j, b"days", 4):
            days[0] += v
        else:
            return -2
    if months[0] < I32_MIN or months[0] > I32_MAX or days[0] < I32_MIN or days[0] > I32_MAX:
        return -1
    return 0


cdef int _numeric_text(const uint8_t* p, Py_ssize_t n, int scale, pgc_i128* out) noexcept nogil:
    """Decimal text (no exponent, as numeric_out prints) -> unscaled integer at ``scale``."""
    cdef Py_ssize_t i = 0
    cdef bint neg = False, dot = False
    cdef int frac = 0, ndig = 0, e
    cdef pgc_i128 m = 0, q
    if n > 0 and p[0] == 45:
        neg = True
        i = 1
    while i < n:
        if _digit(p[i]):
            if m > (PGC_DEC38 - 1 - (p[i] - 48)) // 10:
                return -1
            m = m * 10 + (p[i] - 48)
            ndig += 1
            if dot:
                frac += 1
        elif p[i] == 46 and not dot:
            dot = True
        else:
            return -1
        i += 1
    if ndig == frac or (dot and frac == 0):   # numeric_out prints digits on both sides of '.'
        return -1
    e = scale - frac
    if e > 0:
        if e > 38:
            if m != 0:
                return -1
        else:
            q = pgc_pow10(e)
            if m > (PGC_DEC38 - 1) // q:
                return -1
            m *= q
    elif e < 0:
        if -e > 38:
            if m != 0:
                return -1
        else:
            q = pgc_pow10(-e)
            if m % q != 0:
                return -1
            m //= q
    out[0] = -m if neg else m
    return 0


cdef int _numeric_binary(Reader* r, int scale, pgc_i128* out, int* special) noexcept nogil:
    """numeric_send: ndigits, weight, sign, dscale, base-10000 digits."""
    cdef int16_t ndigits, weight, dscale, dg
    cdef uint16_t sign
    cdef int k, e
    cdef pgc_i128 m = 0, q
    if (read_i16(r, &ndigits, b"") < 0 or read_i16(r, &weight, b"") < 0
            or read_u16(r, &sign, b"") < 0 or read_i16(r, &dscale, b"") < 0):
        return -1
    if sign == 0xC000:
        special[0] = S_NAN
        return 1
    if sign == 0xD000:
        special[0] = S_POS_INF
        return 1
    if sign == 0xF000:
        special[0] = S_NEG_INF
        return 1
    if (sign != 0 and sign != 0x4000) or ndigits < 0 or dscale < 0 or dscale > 0x3FFF:
        return -1
    # digit k is worth dg * 10^(4*(weight-k)); at the column scale that is 10^e
    for k in range(ndigits):
        if read_i16(r, &dg, b"") < 0 or dg < 0 or dg > 9999:
            return -1
        # numeric_recv truncates (toward zero) the digits its dscale hides; so do we
        e = -dscale - 4 * (weight - k)
        if e >= 4:
            dg = 0
        elif e > 0:
            dg -= dg % <int16_t>pgc_pow10(e)
        if dg == 0:
            continue
        e = 4 * (weight - k) + scale
        if e >= 0:
            if e > 38:
                return -1
            q = pgc_pow10(e)
            if dg > (PGC_DEC38 - 1) // q:
                return -1
            q *= dg
        else:
            if -e >= 4:
                return -1        # a nonzero digit below the column's scale
            q = pgc_pow10(-e)
            if dg % q != 0:
                return -1
            q = dg // q
        if q > PGC_DEC38 - 1 - m:
            return -1
        m += q
    out[0] = -m if sign == 0x4000 else m
    return 0


cdef inline int _hexval(uint8_t c) noexcept nogil:
    if c >= 48 and c <= 57:
        return c - 48
    if c >= 97 and c <= 102:
        return c - 87
    if c >= 65 and c <= 70:
        return c - 55
    return -1


cdef const char* HEX = b"0123456789abcdef"


# ---------------------------------------------------------------- one value

cdef inline void _store_int(Conv* c, Py_ssize_t i, int64_t v) noexcept nogil:
    """Value i of an int2/int4/oid/int8 column (range already checked)."""
    cdef int32_t v32
    cdef int16_t v16
    if c.code == C_INT2:
        v16 = <int16_t>v
        memcpy(c.out + 2 * i, &v16, 2)
    elif c.code == C_INT4 or c.code == C_OID:
        v32 = <int32_t>v
        memcpy(c.out + 4 * i, &v32, 4)
    else:
        memcpy(c.out + 8 * i, &v, 8)


cdef inline int _int_text(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """An integer column's value in text form (the column loop calls this directly, not
    through convert_one's dispatch: integers are the most common non-text columns)."""
    cdef int64_t v
    cdef int rc
    if c.code == C_INT2:
        rc = _parse_i64(p, n, -32768, 32767, &v)
    elif c.code == C_INT4:
        rc = _parse_i64(p, n, I32_MIN, I32_MAX, &v)
    elif c.code == C_OID:
        rc = _parse_i64(p, n, 0, 0xFFFFFFFF, &v)
    else:
        rc = _parse_i64(p, n, I64_MIN, I64_MAX, &v)
    if rc < 0:
        c.err = b"not an integer in range"
        return FAIL
    _store_int(c, i, v)
    return OK


cdef int convert_one(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Reader r
    cdef int64_t v, months, days, us
    cdef int32_t v32, m32, d32
    cdef int16_t v16
    cdef uint32_t u32
    cdef double dv
    cdef float fv
    cdef char buf[128]
    cdef char* endp
    cdef pgc_i128 dec
    cdef int rc, k, h1, h2
    cdef Py_ssize_t j
    cdef uint8_t* o
    cdef int code = c.code
    reader_init(&r, p, n)

    if code == C_BOOL:
        if binary:
            if n != 1 or p[0] > 1:
                c.err = b"bool send form must be one byte 0 or 1"
                return FAIL
            v = p[0]
        elif n == 1 and (p[0] == 116 or p[0] == 102):
            v = p[0] == 116
        else:
            c.err = b"bool text must be 't' or 'f'"
            return FAIL
        if v:
            c.out[i >> 3] |= <uint8_t>(1 << (i & 7))
        return OK

    if code == C_INT2 or code == C_INT4 or code == C_INT8 or code == C_OID:
        if binary:
            if code == C_INT2 and n == 2:
                read_i16(&r, &v16, b"")
                v = v16
            elif code == C_INT4 and n == 4:
                read_i32(&r, &v32, b"")
                v = v32
            elif code == C_OID and n == 4:
                read_u32(&r, &u32, b"")
                v = u32
            elif code == C_INT8 and n == 8:
                read_i64(&r, &v, b"")
            else:
                c.err = b"binary integer of the wrong length"
                return FAIL
        else:
            return _int_text(c, i, p, n)
        _store_int(c, i, v)
        return OK

    if code == C_FLOAT4 or code == C_FLOAT8:
        if binary:
            if code == C_FLOAT4 and n == 4:
                memcpy(c.out + 4 * i, p, 4)
                for k in range(2):     # big-endian to little-endian in place
                    o = c.out + 4 * i
                    o[k], o[3 - k] = o[3 - k], o[k]
                return OK
            if code == C_FLOAT8 and n == 8:
                o = c.out + 8 * i
                for k in range(8):
                    o[k] = p[7 - k]
                return OK
            c.err = b"binary float of the wrong length"
            return FAIL
        if n == 0 or n >= 127 or not _float_chars(p, n):
            c.err = b"not a float"
            return FAIL
        memcpy(buf, p, n)
        buf[n] = 0
        if code == C_FLOAT4:
            fv = strtof(buf, &endp)
            if endp != buf + n or buf[0] == 32:
                c.err = b"not a float"
                return FAIL
            memcpy(c.out + 4 * i, &fv, 4)
        else:
            dv = strtod(buf, &endp)
            if endp != buf + n or buf[0] == 32:
                c.err = b"not a float"
                return FAIL
            memcpy(c.out + 8 * i, &dv, 8)
        return OK

    if code == C_NUMERIC:
        if binary:
            rc = _numeric_binary(&r, c.scale, &dec, &c.special)
            if rc == 1:
                return SPECIAL
            if rc < 0 or r.pos != n:
                c.err = b"bad numeric send form or value out of the column's precision/scale"
                return FAIL
        else:
            if _eq(p, n, b"NaN", 3):
                c.special = S_NAN
                return SPECIAL
            if _eq(p, n, b"Infinity", 8):
                c.special = S_POS_INF
                return SPECIAL
            if _eq(p, n, b"-Infinity", 9):
                c.special = S_NEG_INF
                return SPECIAL
            if _numeric_text(p, n, c.scale, &dec) < 0:
                c.err = b"not a decimal number within the column's precision/scale"
                return FAIL
        if c.precision < 38 and (dec >= pgc_pow10(c.precision) or dec <= -pgc_pow10(c.precision)):
            c.err = b"numeric value exceeds the column's precision"
            return FAIL
        pgc_store_i128(c.out + 16 * i, dec)
        return OK

    if code == C_DATE:
        if binary:
            if n != 4:
                c.err = b"binary date must be 4 bytes"
                return FAIL
            read_i32(&r, &v32, b"")
            if v32 == I32_MAX or v32 == I32_MIN:
                c.special = S_POS_INF if v32 == I32_MAX else S_NEG_INF
                return SPECIAL
            v = <int64_t>v32 + UNIX_EPOCH_DAYS
        else:
            c.special = _infinity(p, n)
            if c.special:
                return SPECIAL
            if _date_text(p, n, &v) < 0:
                c.err = b"not an ISO date"
                return FAIL
        if v > I32_MAX or v < I32_MIN:
            c.err = b"date outside the date32 range"
            return FAIL
        v32 = <int32_t>v
        memcpy(c.out + 4 * i, &v32, 4)
        return OK

    if code == C_TIME:
        if binary:
            if n != 8:
                c.err = b"binary time must be 8 bytes"
                return FAIL
            read_i64(&r, &v, b"")
        else:
            j = 0
            if _time_part(p, n, &j, 2, &v) < 0 or j != n:
                c.err = b"not a time of day"
                return FAIL
        if v < 0 or v > US_PER_DAY:
            c.err = b"time of day out of range"
            return FAIL
        memcpy(c.out + 8 * i, &v, 8)
        return OK

    if code == C_TIMESTAMP or code == C_TIMESTAMPTZ:
        if binary:
            if n != 8:
                c.err = b"binary timestamp must be 8 bytes"
                return FAIL
            read_i64(&r, &v, b"")
            if v == I64_MAX or v == I64_MIN:
                c.special = S_POS_INF if v == I64_MAX else S_NEG_INF
                return SPECIAL
            if v > I64_MAX - UNIX_EPOCH_US:
                c.err = b"timestamp beyond the Arrow timestamp[us] range (after 294246 AD)"
                return FAIL
            v += UNIX_EPOCH_US
        else:
            c.special = _infinity(p, n)
            if c.special:
                return SPECIAL
            rc = _timestamp_text(p, n, code == C_TIMESTAMPTZ, &v)
            if rc == -3:
                c.err = b"timestamp beyond the Arrow timestamp[us] range"
                return FAIL
            if rc < 0:
                if n > 0 and not _digit(p[0]):
                    return SLOW       # DateStyle other than ISO
                c.err = b"not an ISO timestamp"
                return FAIL
        memcpy(c.out + 8 * i, &v, 8)
        return OK

    if code == C_INTERVAL:
        if binary:
            if n != 16:
                c.err = b"binary interval must be 16 bytes"
                return FAIL
            read_i64(&r, &us, b"")
            read_i32(&r, &d32, b"")
            read_i32(&r, &m32, b"")
            if us == I64_MAX and d32 == I32_MAX and m32 == I32_MAX:
                c.special = S_POS_INF
                return SPECIAL
            if us == I64_MIN and d32 == I32_MIN and m32 == I32_MIN:
                c.special = S_NEG_INF
                return SPECIAL
            months = m32
            days = d32
        else:
            c.special = _infinity(p, n)
            if c.special:
                return SPECIAL
            rc = _interval_text(p, n, &months, &days, &us)
            if rc == -2:
                return SLOW           # IntervalStyle other than postgres
            if rc < 0:
                c.err = b"not an interval"
                return FAIL
        if us > I64_MAX // 1000 or us < I64_MIN // 1000:
            c.err = b"interval time part overflows int64 nanoseconds"
            return FAIL
        m32 = <int32_t>months
        d32 = <int32_t>days
        v = us * 1000
        o = c.out + 16 * i
        memcpy(o, &m32, 4)
        memcpy(o + 4, &d32, 4)
        memcpy(o + 8, &v, 8)
        return OK

    # variable width ------------------------------------------------------
    o = c.vout + c.vpos
    if code == C_TEXT or code == C_JSONB:
        if code == C_JSONB and binary:
            if n < 1 or p[0] != 1:
                c.err = b"jsonb send form must start with version byte 1"
                return FAIL
            p += 1
            n -= 1
        if not utf8_valid(p, n):
            c.err = b"invalid UTF-8"
            return FAIL
        memcpy(o, p, n)
        c.vpos += n
        return OK

    if code == C_BYTEA:
        if binary:
            memcpy(o, p, n)
            c.vpos += n
            return OK
        if n < 2 or p[0] != 92 or p[1] != 120:
            return SLOW               # bytea_output = 'escape'
        if n & 1:
            c.err = b"odd number of hex digits in bytea"
            return FAIL
        j = 2
        while j < n:
            h1 = _hexval(p[j])
            h2 = _hexval(p[j + 1])
            if h1 < 0 or h2 < 0:
                c.err = b"bad hex digit in bytea"
                return FAIL
            o[0] = <uint8_t>(h1 * 16 + h2)
            o += 1
            j += 2
        c.vpos += (n - 2) // 2
        return OK

    if code == C_UUID:
        if binary:
            if n != 16:
                c.err = b"binary uuid must be 16 bytes"
                return FAIL
            k = 0
            for j in range(16):
                if j == 4 or j == 6 or j == 8 or j == 10:
                    o[k] = 45
                    k += 1
                o[k] = HEX[p[j] >> 4]
                o[k + 1] = HEX[p[j] & 15]
                k += 2
            c.vpos += 36
            return OK
        if n != 36:
            c.err = b"not a canonical uuid"
            return FAIL
        for j in range(36):
            if j == 8 or j == 13 or j == 18 or j == 23:
                if p[j] != 45:
                    c.err = b"not a canonical uuid"
                    return FAIL
                o[j] = 45
            else:
                h1 = _hexval(p[j])
                if h1 < 0:
                    c.err = b"not a canonical uuid"
                    return FAIL
                o[j] = HEX[h1]
        c.vpos += 36
        return OK

    c.err = b"unknown converter code"
    return FAIL


# ---------------------------------------------------------------- one column

cdef bint _float_chars(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Only what float8out/float4out print (digits, '.', e/E, signs; Infinity, NaN):
    strtod alone would also take hex floats, 'inf' and 'nan', which the Python twin
    (and the server's output) never has."""
    cdef Py_ssize_t k, s = 1 if n and (p[0] == 45 or p[0] == 43) else 0
    if _eq(p + s, n - s, b"Infinity", 8) or _eq(p, n, b"NaN", 3):
        return True
    for k in range(n):
        if not (_digit(p[k]) or p[k] == 46 or p[k] == 101 or p[k] == 69 or p[k] == 43 or p[k] == 45):
            return False
    return True


cdef inline bint _valid(const uint8_t* bitmap, Py_ssize_t i) noexcept nogil:
    return bitmap == NULL or bit(bitmap, i)


cdef struct Col:
    Conv c
    const int64_t* ix       # element of each output value (-1: null); NULL: value i = element i
    int64_t add             # added to ix[i] >= 0 (columns sharing one row-offset array)
    uint8_t* vbits
    int32_t* offs_out       # variable-width types
    int8_t* specials
    bint variable
    bint any_special
    bint done               # failed or needs Python: skipped from then on
    int rc
    Py_ssize_t nvalid
    Py_ssize_t bad
    const char* why
    Py_ssize_t vcap         # capacity of c.vout (a _memory block, grown on demand)


cdef struct Src:
    const uint8_t* kvalid
    const int32_t* koffs
    const uint8_t* kdata
    const uint8_t* dvalid
    const int32_t* doffs
    const uint8_t* ddata
    const uint8_t* dend      # end of the data buffer: values may be read 16 bytes at a time before it
    bint kident              # kinds offsets are 0, 1, 2, …: element e's kind is kdata[e]
    Py_ssize_t koff
    Py_ssize_t doff


cdef inline bint _ascii16(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Whether the n (<= 16) bytes at p are ASCII: from 8 bytes on, two overlapping 8-byte
    loads inside the value (any byte order)."""
    cdef uint64_t w0, w1
    cdef uint8_t acc = 0
    cdef Py_ssize_t k
    if n >= 8:
        memcpy(&w0, p, 8)
        memcpy(&w1, p + n - 8, 8)
        return ((w0 | w1) & <uint64_t>0x8080808080808080) == 0
    for k in range(n):
        acc |= p[k]
    return acc < 0x80


cdef inline int _kind_of(const Src* s, Py_ssize_t e, uint8_t* k) noexcept nogil:
    """The kind byte of element e ('n' for e < 0 or a null kind); -1 when the kind is
    not one character. Kinds on the shared 0,1,2,… offsets are read without them."""
    cdef Py_ssize_t ks
    if e < 0 or not _valid(s.kvalid, s.koff + e):
        k[0] = 110
        return 0
    if s.kident:
        k[0] = s.kdata[s.koff + e]
        return 0
    ks = s.koffs[s.koff + e]
    if s.koffs[s.koff + e + 1] - ks != 1:
        return -1
    k[0] = s.kdata[ks]
    return 0


cdef inline void _fail_col(Col* col, Py_ssize_t i, int rc, const char* why) noexcept nogil:
    """Stop a column at value i: rc FAIL (why names it), SLOW or NOMEM."""
    col.bad = i
    col.why = why
    col.rc = rc
    col.done = True


cdef int _ensure(Col* col, Py_ssize_t need) noexcept nogil:
    """Room for ``need`` more output bytes of a variable-width column (grown by doubling:
    the first size is an estimate, so the values need not be measured in a pass first)."""
    cdef Py_ssize_t cap
    cdef void* q
    if col.c.vpos + need <= col.vcap:
        return 0
    cap = 2 * col.vcap
    if cap < col.c.vpos + need + 64:
        cap = col.c.vpos + need + 64
    q = pool_realloc(col.c.vout, cap)
    if q == NULL:
        return -1
    col.c.vout = <uint8_t*>q
    col.vcap = cap
    return 0


cdef void _text_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    """C_TEXT values i0..i1: the most common column type, without convert_one's dispatch
    (text and send forms are the same bytes; only UTF-8 is checked).

    The column's cursors live in locals for the loop: every byte stored through the output
    pointer may alias the Col struct, so the compiler would reload its fields after each
    copy."""
    cdef Py_ssize_t i, e, dn
    cdef uint8_t k
    cdef const uint8_t* p
    cdef const int64_t* ix = col.ix
    cdef int64_t add = col.add
    cdef uint8_t* vout = col.c.vout
    cdef Py_ssize_t vpos = col.c.vpos
    cdef Py_ssize_t vcap = col.vcap
    cdef uint8_t* vbits = col.vbits
    cdef int32_t* offs_out = col.offs_out
    cdef Py_ssize_t nvalid = 0
    cdef const char* why = NULL
    cdef bint nomem = False
    cdef const uint8_t* dvalid = s.dvalid
    cdef const int32_t* doffs = s.doffs + s.doff
    cdef const uint8_t* ddata = s.ddata
    cdef const uint8_t* dend = s.dend
    cdef Py_ssize_t doff = s.doff
    for i in range(i0, i1):
        e = ix[i] if ix != NULL else i
        if e >= 0:
            e += add
        if _kind_of(s, e, &k) < 0:
            why = b"tuple column kind is not one character"
            break
        if k == 116 or k == 98:
            if not _valid(dvalid, doff + e):
                why = b"kind 't'/'b' with null data"
                break
            p = ddata + doffs[e]
            dn = doffs[e + 1] - doffs[e]
            if vpos + dn + 16 > vcap:
                col.c.vpos = vpos
                if _ensure(col, dn + 16) < 0:
                    why = b"out of memory"
                    nomem = True
                    break
                vout = col.c.vout
                vcap = col.vcap
            if dn <= 16 and p + 16 <= dend:
                # short values (most): two 8-byte loads answer "ASCII?" and a fixed
                # 16-byte move copies (the output has 20 spare bytes per value)
                if not (_ascii16(p, dn) or utf8_valid(p, dn)):
                    why = b"invalid UTF-8"
                    break
                memcpy(vout + vpos, p, 16)
            else:
                if not utf8_valid(p, dn):
                    why = b"invalid UTF-8"
                    break
                memcpy(vout + vpos, p, dn)
            vpos += dn
            vbits[i >> 3] |= <uint8_t>(1 << (i & 7))
            nvalid += 1
        elif k != 110 and k != 117:
            why = b"tuple column kind is not n/u/t/b"
            break
        if vpos > 0x7FFFFFFF:
            why = b"column exceeds 2 GiB of string data; convert it in smaller chunks"
            break
        offs_out[i + 1] = <int32_t>vpos
    col.c.vpos = vpos
    col.nvalid += nvalid
    if why != NULL:
        _fail_col(col, i, NOMEM if nomem else FAIL, why)


cdef void _convert_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    """Values i0..i1 of one column (stops the column at the first failure or SLOW)."""
    cdef Py_ssize_t i, e, dn
    cdef uint8_t k
    cdef int rc
    cdef int code = col.c.code
    cdef bint ints = code == C_INT2 or code == C_INT4 or code == C_INT8 or code == C_OID
    if code == C_TEXT:
        _text_range(col, s, i0, i1)
        return
    for i in range(i0, i1):
        e = col.ix[i] if col.ix != NULL else i
        if e >= 0:
            e += col.add
        if _kind_of(s, e, &k) < 0:
            _fail_col(col, i, FAIL, b"tuple column kind is not one character")
            return
        if k == 116 or k == 98:
            if not _valid(s.dvalid, s.doff + e):
                _fail_col(col, i, FAIL, b"kind 't'/'b' with null data")
                return
            dn = s.doffs[s.doff + e + 1] - s.doffs[s.doff + e]
            if k == 116 and ints:
                rc = _int_text(&col.c, i, s.ddata + s.doffs[s.doff + e], dn)
            elif col.variable and _ensure(col, dn + 64) < 0:
                rc = NOMEM
            else:
                rc = convert_one(&col.c, i, s.ddata + s.doffs[s.doff + e], dn, k == 98)
            if rc == OK:
                col.vbits[i >> 3] |= <uint8_t>(1 << (i & 7))
                col.nvalid += 1
            elif rc == SPECIAL:
                col.specials[i] = <int8_t>col.c.special
                col.any_special = True
            else:
                _fail_col(col, i, rc, col.c.err)
                return
        elif k != 110 and k != 117:
            _fail_col(col, i, FAIL, b"tuple column kind is not n/u/t/b")
            return
        if col.variable:
            if col.c.vpos > 0x7FFFFFFF:
                _fail_col(col, i, FAIL, b"column exceeds 2 GiB of string data; convert it in smaller chunks")
                return
            col.offs_out[i + 1] = <int32_t>col.c.vpos


# Rows per block of the multi-column loop: a block's values of every column stay in the
# cache (~130 bytes per ten-column row) instead of the whole tuple children being read
# once per column. Measured on 200k ten-column rows: ~10% faster than one column after
# the other; 256, 512 and 2048 rows per block the same within noise. What remains is
# per value (perf: loads of the kind byte through the kinds' offsets, the memcpy).
cdef enum:
    BLOCK = 2048


def convert_columns_fast(specs, kinds, data, indexes):
    """Convert several columns of one flat tuple child at once, row block by row block.

    ``specs``: (code, precision, scale) per column; ``kinds``/``data``: the ``pa.string()``
    kinds and ``pa.binary()`` values of the flat child; ``indexes``: per column an int64
    numpy array (element of each output value, -1 = null), a tuple ``(offsets, k)``
    (element ``offsets[i] + k``; offsets -1 = null: columns of one row layout share
    ``offsets``) or None (value i = element i).
    Returns per column ``(array, special_codes or None)``, ``None`` when a value needs the
    Python converters (SLOW), or ``ConvertFailure(index, message)`` (returned, not raised:
    the other columns are still good)."""
    cdef Py_ssize_t nsrc = len(kinds), ncols = len(specs), j, n = -1, span, b0, b1
    if len(data) != nsrc:
        raise ValueError(f"kinds has {nsrc} values but data has {len(data)}")
    if len(indexes) != ncols:
        raise ValueError("one index (or None) per column")
    kb = kinds.buffers()
    db = data.buffers()
    cdef Src src
    src.koff = kinds.offset
    src.doff = data.offset
    src.kvalid = _addr(kb[0]) if kinds.null_count else NULL
    src.koffs = <const int32_t*>_addr(kb[1])
    src.kdata = _addr(kb[2])
    src.kident = is_arange_offsets(kb[1])
    src.dvalid = _addr(db[0]) if data.null_count else NULL
    src.doffs = <const int32_t*>_addr(db[1])
    src.ddata = _addr(db[2])
    cdef Py_ssize_t dsize = db[2].size if db[2] is not None else 0
    src.dend = src.ddata + dsize
    cols = <Col*>PyMem_Calloc(max(ncols, 1), sizeof(Col))
    if cols == NULL:
        raise MemoryError()
    keep = []          # Python owners of every buffer the Col structs point into
    owners = []        # the index arrays
    checked = {}       # id(index array) -> (max, min): columns often share one
    cdef const int64_t[::1] ixv
    cdef Col* col
    cdef uint8_t* p
    cdef int code
    try:
        for j in range(ncols):
            col = &cols[j]
            code, col.c.precision, col.c.scale = specs[j]
            col.c.code = code
            col.c.err = b""
            ix = indexes[j]
            add = 0
            if isinstance(ix, tuple):      # (row offsets, position): element = offset + position
                ix, add = ix
            if ix is not None:
                ix = np.ascontiguousarray(ix, dtype=np.int64)
                lim = checked.get(id(ix))
                if lim is None:
                    lim = checked[id(ix)] = (int(ix.max()), int(ix.min())) if len(ix) else (-1, -1)
                if len(ix) and (lim[0] + add >= nsrc or lim[1] < -1 or add < 0):
                    raise IndexError(f"index out of range for {nsrc} values")
                ixv = ix
                col.ix = &ixv[0] if len(ix) else NULL
                col.add = add
                owners.append(ix)
                m = len(ix)
            else:
                col.ix = NULL
                m = nsrc
            if n < 0:
                n = m
            elif m != n:
                raise ValueError("every column must have the same number of values")
            col.variable = code in (C_TEXT, C_JSONB, C_BYTEA, C_UUID)
        if n < 0:
            n = nsrc
        # first output size of variable-width columns: exact when the values are the
        # child's own, else the child's average value size per value, grown on demand
        avg = (src.doffs[src.doff + nsrc] - src.doffs[src.doff]) / nsrc if nsrc else 0
        for j in range(ncols):
            col = &cols[j]
            code = col.c.code
            if col.ix == NULL:
                span = (src.doffs[src.doff + n] - src.doffs[src.doff]) if n else 0
            else:
                span = <Py_ssize_t>(avg * n * 1.125)
            validity = pool_buffer((n + 7) // 8, True, &col.vbits)
            specials = pool_buffer(n, True, &p)
            col.specials = <int8_t*>p
            vout = None
            if code == C_BOOL:
                out = pool_buffer((n + 7) // 8 + 1, True, &col.c.out)
            elif col.variable:
                out = pool_buffer(4 * (n + 1), False, &p)       # offsets
                col.offs_out = <int32_t*>p
                col.offs_out[0] = 0
                col.vcap = span + 20 * n + 64
                col.c.vout = <uint8_t*>pool_malloc(col.vcap)
                if col.c.vout == NULL:
                    raise MemoryError()
            else:
                out = pool_buffer(n * DEF_WIDTH[code] + 1, False, &col.c.out)
            keep.append((validity, specials, out, vout))
            del validity, specials, out, vout
        keep.append(owners)
        with nogil:
            b0 = 0
            while b0 < n:
                b1 = min(b0 + BLOCK, n)
                for j in range(ncols):
                    if not cols[j].done:
                        _convert_range(&cols[j], &src, b0, b1)
                b0 = b1
        for j in range(ncols):
            if cols[j].rc == NOMEM:
                raise MemoryError()
        results = []
        for j in range(ncols):
            validity, specials, out, vout = keep[j]
            if cols[j].variable:
                vout = hand_off(cols[j].c.vout, cols[j].c.vpos)   # Arrow owns the block now
                cols[j].c.vout = NULL
            results.append(_finish(&cols[j], n, validity, specials, out, vout))
        return results
    finally:
        for j in range(ncols):
            if cols[j].variable and cols[j].c.vout != NULL:
                pool_free(cols[j].c.vout)
        PyMem_Free(cols)


cdef object _finish(Col* col, Py_ssize_t n, validity, specials, out, vout):
    cdef int code = col.c.code
    if col.rc == FAIL:
        return ConvertFailure(col.bad, col.why.decode())
    if col.rc == SLOW:
        return None
    null_count = n - col.nvalid
    vbuf = validity if null_count else None
    if code == C_BOOL:
        arr = pa.Array.from_buffers(pa.bool_(), n, [vbuf, out], null_count)
    elif col.variable:
        typ = pa.binary() if code == C_BYTEA else pa.string()
        arr = pa.Array.from_buffers(typ, n, [vbuf, out, vout[:col.c.vpos]], null_count)
    else:
        typ = {C_INT2: pa.int16(), C_INT4: pa.int32(), C_INT8: pa.int64(), C_OID: pa.uint32(),
               C_FLOAT4: pa.float32(), C_FLOAT8: pa.float64(), C_DATE: pa.date32(),
               C_TIME: pa.time64("us"), C_TIMESTAMP: pa.timestamp("us"),
               C_TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
               C_INTERVAL: pa.month_day_nano_interval()}.get(code)
        if code == C_NUMERIC:
            typ = pa.decimal128(col.c.precision, col.c.scale)
        arr = pa.Array.from_buffers(typ, n, [vbuf, out[:n * DEF_WIDTH[code]]], null_count)
    codes = np.frombuffer(specials, dtype=np.int8, count=n) if col.any_special else None
    return arr, codes


class ConvertFailure(ValueError):
    """Returned with (index, message); typecatalog.columns adds the type and the value."""

    def __init__(self, index, message):
        super().__init__(index, message)
        self.index = index
        self.message = message
