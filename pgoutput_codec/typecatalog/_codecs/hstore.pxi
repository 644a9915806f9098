# hstore (typecatalog/hstore.py) to map<string, string>, in two passes: each value is
# checked and written to the column's variable-width output in hstore_send's form
# (int32 count; per pair int32 key length, key, int32 value length or -1, value; lengths
# big-endian), from the send form as it is or from hstore_out's text; then hstore_split
# (FINISH) cuts the whole column into the map's offsets, keys and values at once. The
# helpers ext_be32/ext_put_be32 serve the other extension families too.

cdef enum:
    C_HSTORE = 50


cdef inline int32_t ext_be32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return <int32_t>pgc_ext_bswap32(v)


cdef inline void ext_put_be32(uint8_t* p, int32_t v) noexcept nogil:
    cdef uint32_t u = pgc_ext_bswap32(<uint32_t>v)
    memcpy(p, &u, 4)


cdef extern from *:
    """
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define pgc_ext_bswap16(x) (x)
    #define pgc_ext_bswap32(x) (x)
    #define pgc_ext_bswap64(x) (x)
    #else
    #define pgc_ext_bswap16(x) __builtin_bswap16(x)
    #define pgc_ext_bswap32(x) __builtin_bswap32(x)
    #define pgc_ext_bswap64(x) __builtin_bswap64(x)
    #endif
    """
    uint16_t pgc_ext_bswap16(uint16_t x) noexcept nogil
    uint32_t pgc_ext_bswap32(uint32_t x) noexcept nogil
    uint64_t pgc_ext_bswap64(uint64_t x) noexcept nogil


cdef int _hstore_send(Conv* c, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Check a send form (lengths in bounds, keys not null, UTF-8) and copy it."""
    cdef Py_ssize_t pos = 4
    cdef int32_t count, k, ln
    if n < 4:
        c.err = b"hstore send form shorter than its lengths"
        return FAIL
    count = ext_be32(p)
    if count < 0:
        c.err = b"hstore send form with a negative pair count"
        return FAIL
    for k in range(count):
        if n - pos < 4:
            c.err = b"hstore send form shorter than its lengths"
            return FAIL
        ln = ext_be32(p + pos)
        pos += 4
        if ln < 0:
            c.err = b"hstore send form with a null key"
            return FAIL
        if ln > n - pos:
            c.err = b"hstore send form shorter than its strings"
            return FAIL
        if not utf8_valid(p + pos, ln):
            c.err = b"invalid UTF-8"
            return FAIL
        pos += ln
        if n - pos < 4:
            c.err = b"hstore send form shorter than its lengths"
            return FAIL
        ln = ext_be32(p + pos)
        pos += 4
        if ln < -1:
            c.err = b"hstore send form with a negative value length"
            return FAIL
        if ln > 0:
            if ln > n - pos:
                c.err = b"hstore send form shorter than its strings"
                return FAIL
            if not utf8_valid(p + pos, ln):
                c.err = b"invalid UTF-8"
                return FAIL
            pos += ln
    if pos != n:
        c.err = b"hstore send form longer than its pairs"
        return FAIL
    memcpy(c.vout + c.vpos, p, n)
    c.vpos += n
    return OK


cdef Py_ssize_t _hstore_quoted(Conv* c, const uint8_t* p, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """The quoted string at p[i] unescaped to the output after a 4-byte length slot (filled
    here); the position after its closing quote, or -1 (c.err)."""
    cdef uint8_t* lenp = c.vout + c.vpos
    cdef Py_ssize_t start
    if i >= n or p[i] != 34:
        c.err = b"hstore: expected '\"'"
        return -1
    i += 1
    c.vpos += 4
    start = c.vpos
    while True:
        if i >= n:
            c.err = b"hstore: unterminated quoted string"
            return -1
        if p[i] == 34:
            break
        if p[i] == 92:
            i += 1
            if i >= n:
                c.err = b"hstore: unterminated quoted string"
                return -1
        c.vout[c.vpos] = p[i]
        c.vpos += 1
        i += 1
    if not utf8_valid(c.vout + start, c.vpos - start):
        c.err = b"invalid UTF-8"
        return -1
    ext_put_be32(lenp, <int32_t>(c.vpos - start))
    return i + 1


cdef int hstore_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Py_ssize_t j = 0, at = c.vpos
    cdef int32_t count = 0
    if binary:
        return _hstore_send(c, p, n)
    # the send form is at most 6 bytes longer than the text (a pair's two lengths take
    # the room of its quotes, ", " and "=>"; the count 4): the output has 64 spare bytes
    c.vpos += 4
    while j < n:
        if count:
            if j + 1 >= n or p[j] != 44 or p[j + 1] != 32:
                c.err = b"hstore: expected ', '"
                c.vpos = at
                return FAIL
            j += 2
        j = _hstore_quoted(c, p, n, j)
        if j < 0:
            c.vpos = at
            return FAIL
        if j + 1 >= n or p[j] != 61 or p[j + 1] != 62:
            c.err = b"hstore: expected '=>'"
            c.vpos = at
            return FAIL
        j += 2
        if n - j >= 4 and p[j] == 78 and p[j + 1] == 85 and p[j + 2] == 76 and p[j + 3] == 76:
            ext_put_be32(c.vout + c.vpos, -1)
            c.vpos += 4
            j += 4
        else:
            j = _hstore_quoted(c, p, n, j)
            if j < 0:
                c.vpos = at
                return FAIL
        count += 1
    ext_put_be32(c.vout + at, count)
    return OK


cdef void hstore_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, hstore_value)


def hstore_split(typ, Py_ssize_t n, validity, Py_ssize_t null_count, offsets, data):
    """The map<string, string> of ``n`` hstore values in checked send form (``data``, value
    i at ``offsets[i]:offsets[i+1]``), keys and values cut out in C."""
    cdef const int32_t[::1] offs = np.frombuffer(offsets, np.int32, n + 1)
    cdef const uint8_t[::1] d = np.frombuffer(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
    cdef Py_ssize_t i, pos, end, npairs = 0, kbytes = 0, vbytes = 0, p = 0, kp = 0, vp = 0, vnull = 0
    cdef int32_t count, k, ln
    with nogil:
        for i in range(n):
            pos = offs[i]
            if offs[i + 1] == pos:
                continue
            count = ext_be32(&d[pos])
            pos += 4
            npairs += count
            for k in range(count):
                ln = ext_be32(&d[pos])
                kbytes += ln
                pos += 4 + ln
                ln = ext_be32(&d[pos])
                pos += 4
                if ln > 0:
                    vbytes += ln
                    pos += ln
    if kbytes > 0x7FFFFFFF or vbytes > 0x7FFFFFFF:
        raise ValueError("hstore column exceeds 2 GiB of keys or values; convert it in smaller chunks")
    moffs_a = np.empty(n + 1, np.int32)
    koffs_a = np.empty(npairs + 1, np.int32)
    voffs_a = np.empty(npairs + 1, np.int32)
    kdata_a = np.empty(max(kbytes, 1), np.uint8)
    vdata_a = np.empty(max(vbytes, 1), np.uint8)
    vvalid_a = np.zeros((npairs + 7) // 8 + 1, np.uint8)
    cdef int32_t[::1] moffs = moffs_a
    cdef int32_t[::1] koffs = koffs_a
    cdef int32_t[::1] voffs = voffs_a
    cdef uint8_t[::1] kdata = kdata_a
    cdef uint8_t[::1] vdata = vdata_a
    cdef uint8_t[::1] vvalid = vvalid_a
    with nogil:
        koffs[0] = 0
        voffs[0] = 0
        for i in range(n):
            moffs[i] = <int32_t>p
            pos = offs[i]
            if offs[i + 1] == pos:
                continue
            count = ext_be32(&d[pos])
            pos += 4
            for k in range(count):
                ln = ext_be32(&d[pos])
                pos += 4
                if ln:
                    memcpy(&kdata[kp], &d[pos], ln)
                kp += ln
                pos += ln
                koffs[p + 1] = <int32_t>kp
                ln = ext_be32(&d[pos])
                pos += 4
                if ln >= 0:
                    vvalid[p >> 3] |= <uint8_t>(1 << (p & 7))
                    if ln:
                        memcpy(&vdata[vp], &d[pos], ln)
                    vp += ln
                    pos += ln
                else:
                    vnull += 1
                voffs[p + 1] = <int32_t>vp
                p += 1
        moffs[n] = <int32_t>p
    keys = pa.Array.from_buffers(pa.string(), npairs, [None, pa.py_buffer(koffs_a), pa.py_buffer(kdata_a)])
    items = pa.Array.from_buffers(pa.string(), npairs, [pa.py_buffer(vvalid_a) if vnull else None,
                                                        pa.py_buffer(voffs_a), pa.py_buffer(vdata_a)], vnull)
    entries = pa.StructArray.from_arrays([keys, items], fields=[typ.key_field, typ.item_field])
    arr = pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(moffs_a)], null_count, children=[entries])
    return arr, None


register(C_HSTORE, "HSTORE", hstore_range, VARIABLE)
FINISH[C_HSTORE] = hstore_split
