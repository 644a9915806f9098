# Extension types read as strings (typecatalog/extensiontext.py), written to the column's
# variable-width output: ltree, lquery, ltxtquery (C_LTREE: the send form is a version
# byte 1 and the text) and the isn types (C_ISN: text only, they have no send form).
# citext is text (C_TEXT).

cdef enum:
    C_LTREE = 48
    C_ISN = 49


cdef inline int exttext_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n,
                              bint binary) noexcept nogil:
    if binary:
        if c.code == C_ISN:
            c.err = b"the isn types have no send form (pgoutput sends them as text)"
            return FAIL
        if n < 1 or p[0] != 1:
            c.err = b"send form must start with version byte 1"
            return FAIL
        p += 1
        n -= 1
    if not utf8_valid(p, n):
        c.err = b"invalid UTF-8"
        return FAIL
    memcpy(c.vout + c.vpos, p, n)
    c.vpos += n
    return OK


cdef void exttext_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, exttext_value)


register(C_LTREE, "LTREE", exttext_range, VARIABLE)
register(C_ISN, "ISN", exttext_range, VARIABLE)
