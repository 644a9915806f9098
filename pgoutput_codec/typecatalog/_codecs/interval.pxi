# interval (typecatalog/interval.py): interval_send's microseconds, days and months, or
# interval_out's text under IntervalStyle postgres (another style is left to the Python
# parsers: SLOW), to Arrow's month_day_nano_interval. +/-infinity are specials. Reads the
# clock with datetime.pxi's _time_part.

cdef enum:
    C_INTERVAL = 13


cdef int _interval_text(const uint8_t* p, Py_ssize_t n,
                        int64_t* months, int64_t* days, int64_t* us) noexcept nogil:
    """IntervalStyle postgres: '[N year[s]] [N mon[s]] [N day[s]] [[+-]H:MM:SS[.f]]'.

    -2: not this style (an empty text too: the Python parsers judge it); -1: malformed;
    -3: months or days beyond int32; -4: hours beyond int64 microseconds.
    Every field is checked before it is scaled or added, so nothing wraps."""
    cdef Py_ssize_t i = 0, j
    cdef int64_t v, t
    cdef int rc
    cdef bint neg, fields = False, clock = False
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
        if i < n and p[i] == 58:      # the time part: one, then a space or the end
            i = j
            rc = _time_part(p, n, &i, 16, &t)
            if rc < 0:
                return rc
            if clock or (i < n and p[i] != 32):
                return -1
            us[0] = -t if neg else t
            fields = clock = True
            continue
        if v > <int64_t>I32_MAX + 1:     # -2147483648 days is still a field
            return -3
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
        # |v| <= 2^31 and the sums stay in int32 after each field: no int64 can wrap
        if months[0] < I32_MIN or months[0] > I32_MAX or days[0] < I32_MIN or days[0] > I32_MAX:
            return -3
        fields = True
    return 0 if fields else -2


cdef inline int interval_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n,
                               bint binary) noexcept nogil:
    cdef Reader r
    cdef int64_t v, months, days, us
    cdef int32_t m32, d32
    cdef int rc
    cdef uint8_t* o
    if binary:
        if n != 16:
            c.err = b"binary interval must be 16 bytes"
            return FAIL
        reader_init(&r, p, n)
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
        if rc == -3:
            c.err = b"interval months/days out of int32 range"
            return FAIL
        if rc == -4:
            c.err = b"interval time part overflows int64 nanoseconds"
            return FAIL
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


cdef void interval_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, interval_value)


register(C_INTERVAL, "INTERVAL", interval_range, 16)
