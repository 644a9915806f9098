# The column side shared by the families: a column being converted (Col), the tuple
# child it reads (Src), the loop over a block of a column's rows (convert_range), and the
# table each family registers its codes in (register). Included by _convert.pyx after
# base.pxi and before the family files.

cdef inline bint _valid(const uint8_t* bitmap, Py_ssize_t i) noexcept nogil:
    return bitmap == NULL or bit(bitmap, i)


cdef struct Col:
    Conv c
    const int64_t* ix       # element of each output value (-1: null); NULL: value i = element i
    int64_t add             # added to ix[i] >= 0 (columns sharing one row-offset array)
    uint8_t* vbits
    int32_t* offs_out       # variable-width types
    int8_t* specials
    bint variable
    bint any_special
    bint done               # failed or needs Python: skipped from then on
    int rc
    Py_ssize_t nvalid
    Py_ssize_t bad
    const char* why
    Py_ssize_t vcap         # capacity of c.vout (a _memory block, grown on demand)


cdef struct Src:
    const uint8_t* kvalid
    const int32_t* koffs
    const uint8_t* kdata
    const uint8_t* dvalid
    const int32_t* doffs
    const uint8_t* ddata
    const uint8_t* dend      # end of the data buffer: values may be read 16 bytes at a time before it
    bint kident              # kinds offsets are 0, 1, 2, …: element e's kind is kdata[e]
    Py_ssize_t koff
    Py_ssize_t doff


cdef inline int _kind_of(const Src* s, Py_ssize_t e, uint8_t* k) noexcept nogil:
    """The kind byte of element e ('n' for e < 0 or a null kind); -1 when the kind is
    not one character. Kinds on the shared 0,1,2,… offsets are read without them."""
    cdef Py_ssize_t ks
    if e < 0 or not _valid(s.kvalid, s.koff + e):
        k[0] = 110
        return 0
    if s.kident:
        k[0] = s.kdata[s.koff + e]
        return 0
    ks = s.koffs[s.koff + e]
    if s.koffs[s.koff + e + 1] - ks != 1:
        return -1
    k[0] = s.kdata[ks]
    return 0


cdef inline void _fail_col(Col* col, Py_ssize_t i, int rc, const char* why) noexcept nogil:
    """Stop a column at value i: rc FAIL (why names it), SLOW or NOMEM."""
    col.bad = i
    col.why = why
    col.rc = rc
    col.done = True


cdef int _ensure(Col* col, Py_ssize_t need) noexcept nogil:
    """Room for ``need`` more output bytes of a variable-width column (grown by doubling:
    the first size is an estimate, so the values need not be measured in a pass first)."""
    cdef Py_ssize_t cap
    cdef void* q
    if col.c.vpos + need <= col.vcap:
        return 0
    cap = 2 * col.vcap
    if cap < col.c.vpos + need + 64:
        cap = col.c.vpos + need + 64
    q = pool_realloc(col.c.vout, cap)
    if q == NULL:
        return -1
    col.c.vout = <uint8_t*>q
    col.vcap = cap
    return 0


cdef inline void convert_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1,
                               value_fn value) noexcept nogil:
    """Values i0..i1 of one column, each by ``value`` (stops the column at the first
    failure or SLOW). Each family's range function calls it with its own value function:
    inlined there, the call per value is a direct one the compiler inlines too."""
    cdef Py_ssize_t i, e, dn
    cdef uint8_t k
    cdef int rc
    for i in range(i0, i1):
        e = col.ix[i] if col.ix != NULL else i
        if e >= 0:
            e += col.add
        if _kind_of(s, e, &k) < 0:
            _fail_col(col, i, FAIL, b"tuple column kind is not one character")
            return
        if k == 116 or k == 98:
            if not _valid(s.dvalid, s.doff + e):
                _fail_col(col, i, FAIL, b"kind 't'/'b' with null data")
                return
            dn = s.doffs[s.doff + e + 1] - s.doffs[s.doff + e]
            if col.variable and _ensure(col, dn + 64) < 0:
                rc = NOMEM
            else:
                rc = value(&col.c, i, s.ddata + s.doffs[s.doff + e], dn, k == 98)
            if rc == OK:
                col.vbits[i >> 3] |= <uint8_t>(1 << (i & 7))
                col.nvalid += 1
            elif rc == SPECIAL:
                col.specials[i] = <int8_t>col.c.special
                col.any_special = True
            else:
                _fail_col(col, i, rc, col.c.err)
                return
        elif k != 110 and k != 117:
            _fail_col(col, i, FAIL, b"tuple column kind is not n/u/t/b")
            return
        if col.variable:
            if col.c.vpos > 0x7FFFFFFF:
                _fail_col(col, i, FAIL, b"column exceeds 2 GiB of string data; convert it in smaller chunks")
                return
            col.offs_out[i + 1] = <int32_t>col.c.vpos


# ---------------------------------------------------------------- the families' converters

cdef enum:
    MAX_CODE = 64      # converter codes are 1 .. MAX_CODE - 1
    BITS = -1          # width of a converter writing a bit per value (bool)
    VARIABLE = 0       # width of a converter writing bytes at c.vout + c.vpos (offsets per value)


# Values i0..i1 of column col: a family's loop over a block of rows
ctypedef void (*range_fn)(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil


cdef struct Family:
    range_fn range
    int width          # bytes per value, or BITS, or VARIABLE


cdef Family FAMILIES[MAX_CODE]

#: converter name -> code: how typecatalog's family modules name their compiled
#: converters (typecatalog.typeinfo.fast_code)
CODES = {}


cdef int register(int code, str name, range_fn range, int width) except -1:
    """Converter ``code`` (declared by its family file) of values of ``width`` bytes,
    converted a block of rows at a time by ``range``."""
    if not 0 < code < MAX_CODE or FAMILIES[code].range != NULL or name in CODES:
        raise ImportError(f"converter {name}: code {code} is out of range or taken")
    FAMILIES[code].range = range
    FAMILIES[code].width = width
    CODES[name] = code
    return 0
