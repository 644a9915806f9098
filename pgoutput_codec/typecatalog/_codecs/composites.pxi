# Composites (typecatalog/composites.py): the splitter of a column of record_out texts
# and record_send forms into one flat child column of their attributes (kind + bytes),
# with per value its attribute count and per attribute the type OID its send form names.
# No Python object per value; typecatalog/composites.py's split_records is its twin (same
# result, same failing value and reason). The growable output shared with ranges.pxi
# (Parts) and the column source set-up (_split_source) are here.

from libc.stdlib cimport free as _c_free, realloc as _c_realloc
from libc.string cimport memcmp, memset


cdef struct GBuf:
    uint8_t* p
    Py_ssize_t len      # bytes
    Py_ssize_t cap


cdef int gb_need(GBuf* b, Py_ssize_t extra) noexcept nogil:
    """Room for ``extra`` more bytes (doubling)."""
    cdef Py_ssize_t cap
    cdef void* q
    if b.len + extra <= b.cap:
        return 0
    cap = 2 * b.cap
    if cap < b.len + extra + 64:
        cap = b.len + extra + 64
    q = _c_realloc(b.p, cap)
    if q == NULL:
        return -1
    b.p = <uint8_t*>q
    b.cap = cap
    return 0


cdef struct Parts:
    GBuf kinds          # one kind byte per part
    GBuf offs           # int32 end offset of each part in data
    GBuf data
    GBuf oids           # uint32 per part
    int64_t* counts     # per value: its parts, -1 for a null value
    uint8_t* flags      # per value (ranges)
    const char* why     # the reason of a failure
    Py_ssize_t bad      # the failing value


cdef enum:
    P_OK = 0
    P_FAIL = -1
    P_NOMEM = -3


cdef inline int part(Parts* s, uint8_t kind, uint32_t oid) noexcept nogil:
    """Close the part whose bytes were written to s.data since the previous one."""
    if gb_need(&s.kinds, 1) < 0 or gb_need(&s.offs, 4) < 0 or gb_need(&s.oids, 4) < 0:
        return P_NOMEM
    if s.data.len > 0x7FFFFFFF:
        s.why = b"nested values exceed 2 GiB in one column; convert it in smaller chunks"
        return P_FAIL
    s.kinds.p[s.kinds.len] = kind
    s.kinds.len += 1
    (<int32_t*>(s.offs.p + s.offs.len))[0] = <int32_t>s.data.len
    s.offs.len += 4
    (<uint32_t*>(s.oids.p + s.oids.len))[0] = oid
    s.oids.len += 4
    return P_OK


cdef inline int part_bytes(Parts* s, uint8_t kind, const uint8_t* p, Py_ssize_t n,
                           uint32_t oid) noexcept nogil:
    if gb_need(&s.data, n) < 0:
        return P_NOMEM
    memcpy(s.data.p + s.data.len, p, n)
    s.data.len += n
    return part(s, kind, oid)


cdef inline int fail_at(Parts* s, const char* why) noexcept nogil:
    s.why = why
    return P_FAIL


cdef inline uint32_t be_u32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return pgc_ext_bswap32(v)


# one value (kind 't' or 'b', its bytes): its parts appended, s.counts[i]/s.flags[i] set
ctypedef int (*split_fn)(Parts* s, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil


cdef int record_value(Parts* s, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Py_ssize_t pos, start, count = 0
    cdef int32_t cnt, length
    cdef uint32_t oid
    cdef uint8_t c
    cdef bint quoted, inq
    cdef int rc
    if binary:
        if n < 4:
            return fail_at(s, b"composite send form shorter than its count")
        cnt = <int32_t>be_u32(p)
        if cnt < 0:
            return fail_at(s, b"negative attribute count")
        if cnt > (n - 4) // 8:
            return fail_at(s, b"composite send form shorter than its attributes")
        pos = 4
        while count < cnt:
            if n < pos + 8:
                return fail_at(s, b"composite send form shorter than its attributes")
            oid = be_u32(p + pos)
            length = <int32_t>be_u32(p + pos + 4)
            pos += 8
            if length == -1:
                rc = part(s, 110, oid)
            elif length < 0 or n < pos + length:
                return fail_at(s, b"bad attribute length")
            else:
                rc = part_bytes(s, 98, p + pos, length, oid)
                pos += length
            if rc != P_OK:
                return rc
            count += 1
        if pos != n:
            return fail_at(s, b"trailing bytes in composite send form")
        s.counts[i] = count
        return P_OK
    if n < 2 or p[0] != 40:
        return fail_at(s, b"composite text must start with '('")
    if gb_need(&s.data, n) < 0:          # an attribute's bytes are never more than the text's
        return P_NOMEM
    pos = 1
    while True:
        start = s.data.len
        quoted = False
        inq = False
        while True:
            if pos >= n:
                return fail_at(s, b"composite text ends inside an attribute")
            c = p[pos]
            if c == 92:
                if pos + 1 >= n:
                    return fail_at(s, b"composite text ends after a backslash")
                s.data.p[s.data.len] = p[pos + 1]
                s.data.len += 1
                pos += 2
            elif c == 34:
                if inq and pos + 1 < n and p[pos + 1] == 34:
                    s.data.p[s.data.len] = 34
                    s.data.len += 1
                    pos += 2
                else:
                    inq = not inq
                    quoted = True
                    pos += 1
            elif not inq and (c == 44 or c == 41):
                break
            else:
                s.data.p[s.data.len] = c
                s.data.len += 1
                pos += 1
        rc = part(s, 116 if (s.data.len > start or quoted) else 110, 0)
        if rc != P_OK:
            return rc
        count += 1
        if p[pos] == 41:
            pos += 1
            break
        pos += 1
    if pos != n:
        return fail_at(s, b"bytes after the composite's ')'")
    s.counts[i] = count
    return P_OK


cdef object _split_column(kinds, data, split_fn fn):
    """Split every value of a column (kinds ``pa.string()``, data ``pa.binary()``) by
    ``fn``: (counts, flags, kind bytes, offsets, data bytes, oids), or raise
    ``SplitError`` naming the first value that does not split."""
    cdef Py_ssize_t n = len(kinds), i, dn
    cdef uint8_t k
    cdef int rc = P_OK
    cdef Src src
    cdef Parts s
    if len(data) != n:
        raise ValueError(f"kinds has {n} values but data has {len(data)}")
    check_binary_offsets(kinds)
    check_binary_offsets(data)
    kb = kinds.buffers()
    db = data.buffers()
    src.koff = kinds.offset
    src.doff = data.offset
    src.kvalid = _addr(kb[0]) if kinds.null_count else NULL
    src.koffs = <const int32_t*>_addr(kb[1]) if n else NULL
    src.kdata = _addr(kb[2]) if n else NULL
    src.kident = is_arange_offsets(kb[1]) if n else False
    src.dvalid = _addr(db[0]) if data.null_count else NULL
    src.doffs = <const int32_t*>_addr(db[1]) if n else NULL
    src.ddata = _addr(db[2]) if n else NULL
    counts = np.full(n, -1, np.int64)
    flags = np.zeros(n, np.uint8)
    cdef int64_t[::1] cv = counts
    cdef uint8_t[::1] fv = flags
    memset(&s, 0, sizeof(Parts))
    s.counts = &cv[0] if n else NULL
    s.flags = &fv[0] if n else NULL
    s.bad = -1
    try:
        if gb_need(&s.offs, 4) < 0:
            raise MemoryError()
        (<int32_t*>s.offs.p)[0] = 0
        s.offs.len = 4
        with nogil:
            for i in range(n):
                if _kind_of(&src, i, &k) < 0:
                    rc = fail_at(&s, b"tuple column kind is not n/u/t/b")
                elif k == 116 or k == 98:
                    if not _valid(src.dvalid, src.doff + i):
                        rc = fail_at(&s, b"kind 't'/'b' with null data")
                    else:
                        dn = src.doffs[src.doff + i + 1] - src.doffs[src.doff + i]
                        rc = fn(&s, i, src.ddata + src.doffs[src.doff + i], dn, k == 98)
                elif k != 110 and k != 117:
                    rc = fail_at(&s, b"tuple column kind is not n/u/t/b")
                if rc != P_OK:
                    s.bad = i
                    break
        if rc == P_NOMEM:
            raise MemoryError()
        if rc != P_OK:
            from pgoutput_codec.typecatalog.nested import SplitError
            raise SplitError(s.bad, s.why.decode())
        m = s.kinds.len
        return (counts, flags, bytes((<char*>s.kinds.p)[:m]) if m else b"",
                np.frombuffer(bytes((<char*>s.offs.p)[:s.offs.len]), np.int32),
                bytes((<char*>s.data.p)[:s.data.len]) if s.data.len else b"",
                np.frombuffer(bytes((<char*>s.oids.p)[:s.oids.len]), np.uint32) if m
                else np.zeros(0, np.uint32))
    finally:
        _c_free(s.kinds.p)
        _c_free(s.offs.p)
        _c_free(s.data.p)
        _c_free(s.oids.p)


def split_records(kinds, data):
    """A column of composite values split into its attributes (typecatalog.nested)."""
    return _split_column(kinds, data, record_value)
