# date, time, timestamp, timestamptz (typecatalog/datetime.py): date_send/time_send/
# timestamp_send (counted from 2000-01-01) and the *_out text under DateStyle ISO, to
# Arrow's date32, time64[us] and timestamp[us] (counted from 1970-01-01). +/-infinity
# are specials.

cdef enum:
    C_DATE = 9
    C_TIME = 10
    C_TIMESTAMP = 11
    C_TIMESTAMPTZ = 12

# the most hours whose microseconds, plus 59:59.999999, still fit in int64 (an
# interval's time part, interval.pxi)
cdef int64_t MAX_INTERVAL_HOURS = 2562047787

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
    if h > MAX_INTERVAL_HOURS:
        return -4                # the microseconds would not fit in int64
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


cdef inline int date_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Reader r
    cdef int64_t v
    cdef int32_t v32
    if binary:
        if n != 4:
            c.err = b"binary date must be 4 bytes"
            return FAIL
        reader_init(&r, p, n)
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


cdef inline int time_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Reader r
    cdef int64_t v
    cdef Py_ssize_t j = 0
    if binary:
        if n != 8:
            c.err = b"binary time must be 8 bytes"
            return FAIL
        reader_init(&r, p, n)
        read_i64(&r, &v, b"")
    elif _time_part(p, n, &j, 2, &v) < 0 or j != n:
        c.err = b"not a time of day"
        return FAIL
    if v < 0 or v > US_PER_DAY:
        c.err = b"time of day out of range"
        return FAIL
    memcpy(c.out + 8 * i, &v, 8)
    return OK


cdef inline int timestamp_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n,
                                bint binary) noexcept nogil:
    """timestamp and timestamptz (held in UTC: the same microseconds)."""
    cdef Reader r
    cdef int64_t v
    cdef int rc
    if binary:
        if n != 8:
            c.err = b"binary timestamp must be 8 bytes"
            return FAIL
        reader_init(&r, p, n)
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
        rc = _timestamp_text(p, n, c.code == C_TIMESTAMPTZ, &v)
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


cdef void date_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, date_value)


cdef void time_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, time_value)


cdef void timestamp_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, timestamp_value)


register(C_DATE, "DATE", date_range, 4)
register(C_TIME, "TIME", time_range, 8)
register(C_TIMESTAMP, "TIMESTAMP", timestamp_range, 8)
register(C_TIMESTAMPTZ, "TIMESTAMPTZ", timestamp_range, 8)
