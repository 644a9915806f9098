# text-like types, written to the column's variable-width output at c.vout + c.vpos:
# text, varchar, bpchar, name, json, xml and enums (C_TEXT: the text and send forms are
# the same bytes, UTF-8 checked), jsonb (its send form has a version byte 1), bytea
# (byteaout's hex text, or the raw send form). C_TEXT columns are converted by the column
# loop's own fast path (_text_range in _convert.pyx), which does what text_value does.

cdef inline int text_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    """C_TEXT and C_JSONB."""
    cdef uint8_t* o = c.vout + c.vpos
    if c.code == C_JSONB and binary:
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
