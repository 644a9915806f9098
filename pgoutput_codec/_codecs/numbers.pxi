# bool, int2/int4/int8/oid, float4/float8: fixed-width values (boolsend, int2send…,
# float8send; boolout, int4out…, float8out).

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


cdef inline int bool_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef uint8_t v
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


cdef inline int int_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Reader r
    cdef int64_t v
    cdef int32_t v32
    cdef int16_t v16
    cdef uint32_t u32
    cdef int code = c.code
    if not binary:
        return _int_text(c, i, p, n)
    reader_init(&r, p, n)
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
    _store_int(c, i, v)
    return OK


cdef extern from *:
    """
    #include <errno.h>
    static inline void pgc_clear_errno(void) { errno = 0; }
    static inline int pgc_erange(void) { return errno == ERANGE; }
    """
    # (a Cython assignment to errno inside a function would make a local of that name)
    void pgc_clear_errno() noexcept nogil
    int pgc_erange() noexcept nogil


cdef inline int float_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n,
                            bint binary) noexcept nogil:
    cdef double dv
    cdef float fv
    cdef char buf[128]
    cdef char* endp
    cdef int k
    cdef uint8_t* o
    cdef int code = c.code
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
    pgc_clear_errno()
    # as float4in/float8in: a finite text that overflows to infinity or underflows to
    # zero is out of range (a denormal is a value), never a silently different number
    if code == C_FLOAT4:
        fv = strtof(buf, &endp)
        if endp != buf + n or buf[0] == 32:
            c.err = b"not a float"
            return FAIL
        if pgc_erange() and (fv == 0 or isinf(fv)):
            c.err = b"out of range for type real"
            return FAIL
        memcpy(c.out + 4 * i, &fv, 4)
    else:
        dv = strtod(buf, &endp)
        if endp != buf + n or buf[0] == 32:
            c.err = b"not a float"
            return FAIL
        if pgc_erange() and (dv == 0 or isinf(dv)):
            c.err = b"out of range for type double precision"
            return FAIL
        memcpy(c.out + 8 * i, &dv, 8)
    return OK
