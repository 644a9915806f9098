# What every value converter of _convert.pyx shares: the 128-bit decimal helpers, result
# and special codes, the epoch constants, the Conv struct a value is converted into, the
# signature of a value converter, and the digit/literal scanners of text forms. Binary
# forms are read with the shared bounds-checked Reader of _native/reader.pxd. These
# files are included into _convert.pyx (one extension module, one C file) and use its
# cimports. Each family file (named as its module of typecatalog/) declares its converter
# codes once and registers them (columns.pxi: register); the catalog reads them (CODES).

cdef extern from *:
    """
    typedef __int128 pgc_i128;
    /* 10^38 */
    static const pgc_i128 PGC_DEC38 =
        (((pgc_i128)5421010862427522170LL) << 64) + (pgc_i128)687399551400673280ULL;
    static inline pgc_i128 pgc_pow10(int n) { pgc_i128 r = 1; while (n-- > 0) r *= 10; return r; }
    static inline void pgc_store_i128(void *dst, pgc_i128 v) {
        unsigned long long lo = (unsigned long long)v; long long hi = (long long)(v >> 64);
        memcpy(dst, &lo, 8); memcpy((char *)dst + 8, &hi, 8);   /* Arrow decimal128: little-endian */
    }
    """
    ctypedef long long pgc_i128
    const pgc_i128 PGC_DEC38
    pgc_i128 pgc_pow10(int n) noexcept nogil
    void pgc_store_i128(void* dst, pgc_i128 v) noexcept nogil


# value results
cdef enum:
    OK = 0
    SPECIAL = 1
    FAIL = -1
    SLOW = -2
    NOMEM = -3         # a column's output could not grow

# special codes (typecatalog.markers.SPECIAL_NAMES)
cdef enum:
    S_POS_INF = 1
    S_NEG_INF = 2
    S_NAN = 3

cdef int64_t UNIX_EPOCH_DAYS = 10957              # 1970-01-01 -> 2000-01-01
cdef int64_t UNIX_EPOCH_US = 946684800000000
cdef int64_t US_PER_DAY = 86400000000
cdef int64_t I64_MAX = 0x7FFFFFFFFFFFFFFF
cdef int64_t I64_MIN = -I64_MAX - 1
cdef int64_t I64_MIN_DIV10 = -922337203685477580   # INT64_MIN / 10, truncated
cdef int32_t I32_MAX = 0x7FFFFFFF
cdef int32_t I32_MIN = -I32_MAX - 1


cdef struct Conv:
    int code
    int precision
    int scale
    uint8_t* out        # fixed-width output (or bool bitmap)
    uint8_t* vout       # variable-width output bytes
    Py_ssize_t vpos
    int special
    const char* err


# Value i of column c (the text form, or the send form when ``binary``) into c's output:
# OK, SPECIAL (c.special), FAIL (c.err), SLOW or NOMEM.
ctypedef int (*value_fn)(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil


# ---------------------------------------------------------------- text scanning

cdef inline bint _digit(uint8_t c) noexcept nogil:
    return c >= 48 and c <= 57


cdef int _parse_i64(const uint8_t* p, Py_ssize_t n, int64_t lo, int64_t hi, int64_t* out) noexcept nogil:
    """[+-]digits, range-checked; accumulates negatively so INT64_MIN parses."""
    cdef Py_ssize_t i = 0
    cdef bint neg = False
    cdef int64_t v = 0
    cdef int d
    if n > 0 and (p[0] == 45 or p[0] == 43):
        neg = p[0] == 45
        i = 1
    if i == n:
        return -1
    if n - i <= 18:
        # up to 18 digits cannot overflow: no check per digit
        while i < n:
            d = p[i] - 48
            if d < 0 or d > 9:
                return -1
            v = v * 10 - d
            i += 1
    while i < n:
        if not _digit(p[i]):
            return -1
        d = p[i] - 48
        # v * 10 - d >= INT64_MIN, without a division per digit
        if v < I64_MIN_DIV10 or (v == I64_MIN_DIV10 and d > 8):
            return -1
        v = v * 10 - d
        i += 1
    if not neg:
        if v == I64_MIN:
            return -1
        v = -v
    if v < lo or v > hi:
        return -1
    out[0] = v
    return 0


cdef int _uint(const uint8_t* p, Py_ssize_t n, Py_ssize_t* i, int mindigits, int maxdigits,
               int64_t* out) noexcept nogil:
    """``mindigits`` to ``maxdigits`` digits at p[i] (the *_out functions zero-pad)."""
    cdef int64_t v = 0
    cdef int k = 0
    while i[0] < n and _digit(p[i[0]]):
        if k == maxdigits:
            return -1
        v = v * 10 + (p[i[0]] - 48)
        i[0] += 1
        k += 1
    if k < mindigits:
        return -1
    out[0] = v
    return 0


cdef inline bint _eq(const uint8_t* p, Py_ssize_t n, const char* lit, Py_ssize_t ln) noexcept nogil:
    cdef Py_ssize_t i
    if n != ln:
        return False
    for i in range(n):
        if p[i] != <uint8_t>lit[i]:
            return False
    return True


cdef int _infinity(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    if _eq(p, n, b"infinity", 8):
        return S_POS_INF
    if _eq(p, n, b"-infinity", 9):
        return S_NEG_INF
    return 0


cdef inline int _hexval(uint8_t c) noexcept nogil:
    if c >= 48 and c <= 57:
        return c - 48
    if c >= 97 and c <= 102:
        return c - 87
    if c >= 65 and c <= 70:
        return c - 55
    return -1


cdef const char* HEX = b"0123456789abcdef"
