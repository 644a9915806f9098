# text-like types (typecatalog/text.py), written to the column's variable-width output
# at c.vout + c.vpos: text, varchar, bpchar, name, json, xml and enums (C_TEXT: the text
# and send forms are the same bytes, UTF-8 checked), jsonb (its send form has a version
# byte 1), uuid (uuid_send's 16 bytes or uuid_out's text, to the canonical 36-character
# lower-case string). C_TEXT columns are converted by the column loop's own fast path
# (_text_range in _convert.pyx: registered as plain text), which does what text_value does.

cdef enum:
    C_TEXT = 14
    C_UUID = 16
    C_JSONB = 17

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


cdef inline int uuid_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef uint8_t* o = c.vout + c.vpos
    cdef Py_ssize_t j
    cdef int k, h1
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


register(C_TEXT, "TEXT", text_value, VARIABLE, True)
register(C_UUID, "UUID", uuid_value, VARIABLE)
register(C_JSONB, "JSONB", text_value, VARIABLE)
