# bytea (typecatalog/bytea.py): the raw send form, or byteaout's hex text (the escape
# form is left to the Python parsers: SLOW), to Arrow's binary at c.vout + c.vpos.

cdef enum:
    C_BYTEA = 15


cdef inline int bytea_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n,
                            bint binary) noexcept nogil:
    cdef uint8_t* o = c.vout + c.vpos
    cdef Py_ssize_t j
    cdef int h1, h2
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


cdef void bytea_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, bytea_value)


register(C_BYTEA, "BYTEA", bytea_range, VARIABLE)
