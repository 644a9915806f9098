# PostGIS geometry and geography (typecatalog/geometry.py): EWKB (the send form, or the
# text form's hex) rewritten to ISO WKB as ST_AsBinary writes it (little-endian, Z/M in
# the type code, no SRID), written to the column's variable-width output after the
# value's SRID (int32, native order); geometry_split (FINISH) takes the SRIDs out: as
# the column's int32 SRIDs where its typmod fixes none (its __srid companion), else as
# markers of the values whose SRID is not the column's; and the WKB as binary, or
# geoarrow.wkb where the column's type is.

cdef enum:
    C_GEOMETRY = 54
    GEO_DEEPEST = 32


cdef inline uint32_t _geo_u32(const uint8_t* p, bint little) noexcept nogil:
    if little:
        return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)
    return p[3] | (<uint32_t>p[2] << 8) | (<uint32_t>p[1] << 16) | (<uint32_t>p[0] << 24)


cdef inline void _geo_put(uint8_t* o, uint32_t v) noexcept nogil:
    o[0] = v & 0xFF
    o[1] = (v >> 8) & 0xFF
    o[2] = (v >> 16) & 0xFF
    o[3] = v >> 24


cdef Py_ssize_t _geo_count(const uint8_t* p, Py_ssize_t n, Py_ssize_t pos, bint little, uint8_t* o,
                           Py_ssize_t* op, uint32_t* k, const char** err) noexcept nogil:
    if n - pos < 4:
        err[0] = b"EWKB shorter than its counts"
        return -1
    k[0] = _geo_u32(p + pos, little)
    _geo_put(o + op[0], k[0])
    op[0] += 4
    return pos + 4


cdef Py_ssize_t _geo_points(const uint8_t* p, Py_ssize_t n, Py_ssize_t pos, bint little, int dims,
                            uint64_t k, uint8_t* o, Py_ssize_t* op, const char** err) noexcept nogil:
    cdef uint64_t size = 8 * <uint64_t>dims * k, j
    cdef int b
    if size > <uint64_t>(n - pos):
        err[0] = b"EWKB shorter than its coordinates"
        return -1
    if little:
        memcpy(o + op[0], p + pos, size)
    else:
        for j in range(0, size, 8):
            for b in range(8):
                o[op[0] + j + b] = p[pos + j + 7 - b]
    op[0] += size
    return pos + size


cdef Py_ssize_t _geo(const uint8_t* p, Py_ssize_t n, Py_ssize_t pos, uint8_t* o, Py_ssize_t* op, int depth,
                     int32_t* srid, const char** err) noexcept nogil:
    """The geometry at p[pos] written to o[op] as ISO WKB; the position after it, or -1
    (err). ISO WKB is never longer than the EWKB it is made of."""
    cdef bint little, z, m
    cdef uint32_t word, base, k, r, kr
    cdef int dims
    if depth > GEO_DEEPEST:
        err[0] = b"EWKB nested deeper than 32"
        return -1
    if n - pos < 5:
        err[0] = b"EWKB shorter than its header"
        return -1
    if p[pos] > 1:
        err[0] = b"EWKB byte order is neither 0 nor 1"
        return -1
    little = p[pos] == 1
    word = _geo_u32(p + pos + 1, little)
    pos += 5
    base = word & 0x0FFFFFFF
    if base < 1 or base > 17 or base == 13 or base == 14:
        err[0] = b"EWKB geometry type is not one PostGIS writes"
        return -1
    if word & 0x20000000:
        if depth:
            err[0] = b"EWKB SRID on a nested geometry"
            return -1
        if n - pos < 4:
            err[0] = b"EWKB shorter than its SRID"
            return -1
        srid[0] = <int32_t>_geo_u32(p + pos, little)
        pos += 4
    z = (word & <uint32_t>0x80000000u) != 0
    m = (word & 0x40000000) != 0
    dims = 2 + z + m
    o[op[0]] = 1
    _geo_put(o + op[0] + 1, base + (1000 if z else 0) + (2000 if m else 0))
    op[0] += 5
    if base == 1:
        return _geo_points(p, n, pos, little, dims, 1, o, op, err)
    pos = _geo_count(p, n, pos, little, o, op, &k, err)
    if pos < 0:
        return -1
    if base == 2 or base == 8:
        return _geo_points(p, n, pos, little, dims, k, o, op, err)
    if base == 3 or base == 17:
        for r in range(k):
            pos = _geo_count(p, n, pos, little, o, op, &kr, err)
            if pos < 0:
                return -1
            pos = _geo_points(p, n, pos, little, dims, kr, o, op, err)
            if pos < 0:
                return -1
        return pos
    for r in range(k):
        pos = _geo(p, n, pos, o, op, depth + 1, srid, err)
        if pos < 0:
            return -1
    return pos


cdef int geometry_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Py_ssize_t j, half, op
    cdef int h1, h2
    cdef uint8_t* dec
    cdef int32_t srid = 0
    cdef const char* err = NULL
    if not binary:
        # the hex decoded behind the room of the output (4 + n/2 bytes; the column's
        # output has n + 64 spare bytes for the value)
        if n & 1:
            c.err = b"geometry text is not hex EWKB"
            return FAIL
        half = n // 2
        dec = c.vout + c.vpos + 4 + half
        for j in range(half):
            h1 = _hexval(p[2 * j])
            h2 = _hexval(p[2 * j + 1])
            if h1 < 0 or h2 < 0:
                c.err = b"geometry text is not hex EWKB"
                return FAIL
            dec[j] = <uint8_t>(h1 * 16 + h2)
        p = dec
        n = half
    op = c.vpos + 4
    j = _geo(p, n, 0, c.vout, &op, 0, &srid, &err)
    if j < 0:
        c.err = err
        return FAIL
    if j != n:
        c.err = b"EWKB longer than its geometry"
        return FAIL
    memcpy(c.vout + c.vpos, &srid, 4)
    c.vpos = op
    return OK


cdef void geometry_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, geometry_value)


def geometry_split(typ, Py_ssize_t n, validity, Py_ssize_t null_count, offsets, data):
    """(the WKB of ``n`` values (each after its SRID) as ``typ`` (binary, or geoarrow.wkb
    whose CRS is the column's SRID), the markers of the values whose SRID is not the
    column's, the values' SRIDs (int32, null where the value is) where the column fixes
    none, else None)."""
    cdef const int32_t[::1] offs = np.frombuffer(offsets, np.int32, n + 1)
    cdef const uint8_t[::1] d = np.frombuffer(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
    cdef Py_ssize_t i, pos, ln, at = 0
    cdef int32_t column = 0, srid
    crs = getattr(typ, "crs", None)
    if crs:
        column = int(crs.split(":")[1])
    woffs_a = np.empty(n + 1, np.int32)
    wkb_a = np.empty(max(len(data) - 4 * (n - null_count), 1), np.uint8)
    srids_a = np.zeros(n, np.int32)
    noted_a = np.zeros(n, np.bool_)
    cdef int32_t[::1] woffs = woffs_a
    cdef uint8_t[::1] wkb = wkb_a
    cdef int32_t[::1] srids = srids_a
    cdef uint8_t[::1] noted = noted_a.view(np.uint8)
    cdef Py_ssize_t nnoted = 0
    with nogil:
        for i in range(n):
            woffs[i] = <int32_t>at
            pos = offs[i]
            ln = offs[i + 1] - pos
            if ln == 0:
                continue
            memcpy(&srid, &d[pos], 4)
            if column == 0:
                srids[i] = srid
            elif srid != column:
                srids[i] = srid
                noted[i] = 1
                nnoted += 1
            if ln > 4:
                memcpy(&wkb[at], &d[pos + 4], ln - 4)
            at += ln - 4
        woffs[n] = <int32_t>at
    storage = pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(woffs_a), pa.py_buffer(wkb_a)],
                                    null_count)
    arr = pa.ExtensionArray.from_storage(typ, storage) if isinstance(typ, pa.ExtensionType) else storage
    special = None
    if column == 0:
        sited = pa.Array.from_buffers(pa.int32(), n, [validity, pa.py_buffer(srids_a)], null_count)
        return arr, special, sited
    if nnoted:
        noted_srids = pa.array(srids_a, pa.int32(), mask=~noted_a).cast(pa.string())
        special = pc.binary_join_element_wise("srid=", noted_srids, "")
    return arr, special, None


register(C_GEOMETRY, "GEOMETRY", geometry_range, VARIABLE)
FINISH[C_GEOMETRY] = geometry_split
