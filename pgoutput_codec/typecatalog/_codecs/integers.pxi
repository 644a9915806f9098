# bool, int2, int4, int8, oid (typecatalog/integers.py): fixed-width values (boolsend,
# int2send…; boolout, int4out…). bool is a bit per value.

cdef enum:
    C_BOOL = 1
    C_INT2 = 2
    C_INT4 = 3
    C_INT8 = 4
    C_OID = 5

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
    """An integer column's value in text form."""
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


cdef void bool_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, bool_value)


cdef void int_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, int_value)


register(C_BOOL, "BOOL", bool_range, BITS)
register(C_INT2, "INT2", int_range, 2)
register(C_INT4, "INT4", int_range, 4)
register(C_INT8, "INT8", int_range, 8)
register(C_OID, "OID", int_range, 4)
