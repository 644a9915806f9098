# text-like types (typecatalog/text.py), written to the column's variable-width output
# at c.vout + c.vpos: text, varchar, bpchar, name, json, xml and enums (C_TEXT: the text
# and send forms are the same bytes, UTF-8 checked), jsonb (its send form has a version
# byte 1), uuid (uuid_send's 16 bytes or uuid_out's text, to the canonical 36-character
# lower-case string). C_TEXT columns are converted by the column loop's own fast path
# (text_range: no call per value), which does what text_value does.

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


cdef void text_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    """Values i0..i1 of a plain-text converter (text-like columns, the most common type),
    without a call per value (text and send forms are the same bytes; only UTF-8 is
    checked).

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


cdef void jsonb_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, text_value)


cdef void uuid_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, uuid_value)


register(C_TEXT, "TEXT", text_range, VARIABLE)
register(C_UUID, "UUID", uuid_range, VARIABLE)
register(C_JSONB, "JSONB", jsonb_range, VARIABLE)
