# pgvector's vector, halfvec, sparsevec (typecatalog/vectors.py). vector and halfvec
# values are written to the column's variable-width output as their little-endian
# floats (the send form byte-swapped, or the text's elements read as float4out prints
# them), and vector_lists (FINISH) makes the byte offsets list offsets: no pass beyond
# the values'. A sparsevec is written as int32 dim, int32 nnz, nnz int32 indices
# (0-based), nnz float32 values, native order, which sparse_split (FINISH) cuts into
# the struct's children.

cdef enum:
    C_VECTOR = 51
    C_HALFVEC = 52
    C_SPARSEVEC = 53


cdef extern from *:
    """
    static inline uint16_t pgc_f32_to_f16(float f) {
        _Float16 h = (_Float16)f; uint16_t u; memcpy(&u, &h, 2); return u;
    }
    """
    uint16_t pgc_f32_to_f16(float f) noexcept nogil


cdef const char* _vec_float(const uint8_t* p, Py_ssize_t n, float* out) noexcept nogil:
    """A float4 element as float4out prints it (what floats.pxi's text reader takes)."""
    cdef char buf[128]
    cdef char* endp
    cdef float fv
    if n == 0 or n >= 127 or not _float_chars(p, n):
        return b"not a float"
    memcpy(buf, p, n)
    buf[n] = 0
    pgc_clear_errno()
    fv = strtof(buf, &endp)
    if endp != buf + n or buf[0] == 32:
        return b"not a float"
    if pgc_erange() and (fv == 0 or isinf(fv)):
        return b"out of range for type real"
    out[0] = fv
    return NULL


cdef int _vec_put(Conv* c, float f, bint half) noexcept nogil:
    cdef uint16_t h
    if half:
        h = pgc_f32_to_f16(f)
        if (h & 0x7FFF) == 0x7C00 and not isinf(f):
            c.err = b"out of range for type halfvec"
            return FAIL
        memcpy(c.vout + c.vpos, &h, 2)
        c.vpos += 2
    else:
        memcpy(c.vout + c.vpos, &f, 4)
        c.vpos += 4
    return OK


cdef int vector_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef bint half = c.code == C_HALFVEC
    cdef Py_ssize_t width = 2 if half else 4, k, j, start = c.vpos
    cdef int16_t dim
    cdef uint16_t u16
    cdef uint32_t u32
    cdef float f
    cdef const char* err
    if binary:
        if n < 4:
            c.err = b"vector send form shorter than its header"
            return FAIL
        dim = <int16_t>((p[0] << 8) | p[1])
        if dim < 0:
            c.err = b"vector send form with a negative dimension count"
            return FAIL
        if p[2] or p[3]:
            c.err = b"vector send form: unused header field is not 0"
            return FAIL
        if n != 4 + width * dim:
            c.err = b"vector send form length does not match its dimension count"
            return FAIL
        for k in range(dim):
            if half:
                memcpy(&u16, p + 4 + 2 * k, 2)
                u16 = pgc_ext_bswap16(u16)
                memcpy(c.vout + c.vpos + 2 * k, &u16, 2)
            else:
                memcpy(&u32, p + 4 + 4 * k, 4)
                u32 = pgc_ext_bswap32(u32)
                memcpy(c.vout + c.vpos + 4 * k, &u32, 4)
        c.vpos += width * dim
        return OK
    if n < 2 or p[0] != 91 or p[n - 1] != 93:
        c.err = b"vector text must be enclosed in []"
        return FAIL
    if n == 2:
        return OK
    if _ensure(<Col*>c, 2 * n + 64) < 0:     # "1," is 4 output bytes (Conv is Col's first member)
        c.err = b"out of memory"
        return NOMEM
    j = 1
    while True:
        k = j
        while k < n - 1 and p[k] != 44:
            k += 1
        err = _vec_float(p + j, k - j, &f)
        if err != NULL:
            c.err = err
            c.vpos = start
            return FAIL
        if _vec_put(c, f, half) != OK:
            c.vpos = start
            return FAIL
        if k == n - 1:
            return OK
        j = k + 1


cdef int _digits(const uint8_t* p, Py_ssize_t n, int64_t* out) noexcept nogil:
    """1 to 10 digits, no sign."""
    cdef Py_ssize_t k
    cdef int64_t v = 0
    if n < 1 or n > 10:
        return -1
    for k in range(n):
        if not _digit(p[k]):
            return -1
        v = v * 10 + (p[k] - 48)
    out[0] = v
    return 0


cdef int sparsevec_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef int32_t dim, nnz, idx, prev = -1
    cdef int64_t v64
    cdef Py_ssize_t k, j, e, colon, slash, start = c.vpos
    cdef uint32_t u32
    cdef float f
    cdef const char* err
    if binary:
        if n < 12:
            c.err = b"sparsevec send form shorter than its header"
            return FAIL
        dim = ext_be32(p)
        nnz = ext_be32(p + 4)
        if nnz < 0:
            c.err = b"sparsevec send form with a negative element count"
            return FAIL
        if ext_be32(p + 8) != 0:
            c.err = b"sparsevec send form: unused header field is not 0"
            return FAIL
        if n != 12 + 8 * <Py_ssize_t>nnz:
            c.err = b"sparsevec send form length does not match its element count"
            return FAIL
        if dim < 0:
            c.err = b"sparsevec with a negative dimension count"
            return FAIL
        memcpy(c.vout + c.vpos, &dim, 4)
        memcpy(c.vout + c.vpos + 4, &nnz, 4)
        for k in range(nnz):
            idx = ext_be32(p + 12 + 4 * k)
            if idx <= prev or idx >= dim:
                c.err = b"sparsevec indices must rise strictly and be below its dimension count"
                return FAIL
            prev = idx
            memcpy(c.vout + c.vpos + 8 + 4 * k, &idx, 4)
            memcpy(&u32, p + 12 + 4 * nnz + 4 * k, 4)
            u32 = pgc_ext_bswap32(u32)
            memcpy(c.vout + c.vpos + 8 + 4 * nnz + 4 * k, &u32, 4)
        c.vpos += 8 + 8 * <Py_ssize_t>nnz
        return OK
    slash = n - 1
    while slash >= 0 and p[slash] != 47:
        slash -= 1
    if slash < 0 or _digits(p + slash + 1, n - slash - 1, &v64) < 0:
        c.err = b"sparsevec text must end in /dimensions"
        return FAIL
    if v64 > 0x7FFFFFFF:
        c.err = b"sparsevec dimension count out of range"
        return FAIL
    dim = <int32_t>v64
    if slash < 2 or p[0] != 123 or p[slash - 1] != 125:
        c.err = b"vector text must be enclosed in {}"
        return FAIL
    nnz = 0
    if slash > 2:
        nnz = 1
        for k in range(1, slash - 1):
            if p[k] == 44:
                nnz += 1
    if _ensure(<Col*>c, 8 + 8 * <Py_ssize_t>nnz + 64) < 0:
        c.err = b"out of memory"
        return NOMEM
    memcpy(c.vout + start, &dim, 4)
    memcpy(c.vout + start + 4, &nnz, 4)
    j = 1
    for k in range(nnz):
        e = j
        while e < slash - 1 and p[e] != 44:
            e += 1
        colon = j
        while colon < e and p[colon] != 58:
            colon += 1
        if colon == e or _digits(p + j, colon - j, &v64) < 0:
            c.err = b"sparsevec element must be index:value"
            return FAIL
        if v64 < 1 or v64 > 0x7FFFFFFF:
            c.err = b"sparsevec index out of range"
            return FAIL
        err = _vec_float(p + colon + 1, e - colon - 1, &f)
        if err != NULL:
            c.err = err
            return FAIL
        idx = <int32_t>(v64 - 1)
        memcpy(c.vout + start + 8 + 4 * k, &idx, 4)
        memcpy(c.vout + start + 8 + 4 * <Py_ssize_t>nnz + 4 * k, &f, 4)
        j = e + 1
    for k in range(nnz):
        memcpy(&idx, c.vout + start + 8 + 4 * k, 4)
        if idx <= prev or idx >= dim:
            c.err = b"sparsevec indices must rise strictly and be below its dimension count"
            return FAIL
        prev = idx
    c.vpos = start + 8 + 8 * <Py_ssize_t>nnz
    return OK


cdef void vector_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, vector_value)


cdef void sparsevec_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, sparsevec_value)


def vector_lists(typ, Py_ssize_t n, validity, Py_ssize_t null_count, offsets, data):
    """The list<float32 | float16> of ``n`` vectors whose floats are ``data`` (value i at
    byte ``offsets[i]``)."""
    width = 2 if typ.value_type == pa.float16() else 4
    offs = np.frombuffer(offsets, np.int32, n + 1) // width
    vals = pa.Array.from_buffers(typ.value_type, int(offs[n]), [None, data])
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offs)], null_count, children=[vals]), None


def sparse_split(typ, Py_ssize_t n, validity, Py_ssize_t null_count, offsets, data):
    """The struct<dim, indices, values> of ``n`` sparsevecs in the intermediate form."""
    cdef const int32_t[::1] offs = np.frombuffer(offsets, np.int32, n + 1)
    cdef const uint8_t[::1] d = np.frombuffer(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
    cdef Py_ssize_t i, pos, total = 0, at = 0
    cdef int32_t nnz
    dims_a = np.zeros(n, np.int32)
    loffs_a = np.empty(n + 1, np.int32)
    cdef int32_t[::1] dims = dims_a
    cdef int32_t[::1] loffs = loffs_a
    with nogil:
        for i in range(n):
            loffs[i] = <int32_t>total
            pos = offs[i]
            if offs[i + 1] == pos:
                continue
            memcpy(&dims[i], &d[pos], 4)
            memcpy(&nnz, &d[pos + 4], 4)
            total += nnz
        loffs[n] = <int32_t>total
    idx_a = np.empty(max(total, 1), np.int32)
    val_a = np.empty(max(total, 1), np.float32)
    cdef uint8_t[::1] idx = idx_a.view(np.uint8)
    cdef uint8_t[::1] val = val_a.view(np.uint8)
    with nogil:
        for i in range(n):
            pos = offs[i]
            if offs[i + 1] == pos:
                continue
            memcpy(&nnz, &d[pos + 4], 4)
            if nnz:
                memcpy(&idx[4 * at], &d[pos + 8], 4 * nnz)
                memcpy(&val[4 * at], &d[pos + 8 + 4 * nnz], 4 * nnz)
            at += nnz
    lo = pa.py_buffer(loffs_a)
    children = [pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(dims_a)]),
                pa.Array.from_buffers(typ.field("indices").type, n, [None, lo], 0, children=[
                    pa.Array.from_buffers(pa.int32(), total, [None, pa.py_buffer(idx_a)])]),
                pa.Array.from_buffers(typ.field("values").type, n, [None, lo], 0, children=[
                    pa.Array.from_buffers(pa.float32(), total, [None, pa.py_buffer(val_a)])])]
    return pa.Array.from_buffers(typ, n, [validity], null_count, children=children), None


register(C_VECTOR, "VECTOR", vector_range, VARIABLE)
register(C_HALFVEC, "HALFVEC", vector_range, VARIABLE)
register(C_SPARSEVEC, "SPARSEVEC", sparsevec_range, VARIABLE)
FINISH[C_VECTOR] = vector_lists
FINISH[C_HALFVEC] = vector_lists
FINISH[C_SPARSEVEC] = sparse_split
