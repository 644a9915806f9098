# cython: language_level=3
"""A bounds-checked big-endian reader over a byte buffer.

Every read goes through ``_need``: that one length check is what makes
``boundscheck=False`` elsewhere safe. Reads never raise: they record what went wrong
in the reader (error code, offset, bytes wanted) and return -1, so the batch loop
turns a bad row into an error string without Python exception machinery, and
``decode_message`` raises ``PgoutputDecodeError`` from the same record
(``_errors.format_error``). Multi-byte values are read with memcpy + byte swap
(no unaligned loads), as py-pgproto's ``hton.h``.
"""

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define pgc_bswap16(x) __builtin_bswap16(x)
    #define pgc_bswap32(x) __builtin_bswap32(x)
    #define pgc_bswap64(x) __builtin_bswap64(x)
    #else
    #define pgc_bswap16(x) ((uint16_t)((((x) & 0xFF) << 8) | (((x) >> 8) & 0xFF)))
    #define pgc_bswap32(x) ((((x) & 0xFFu) << 24) | (((x) & 0xFF00u) << 8) \
                            | (((x) >> 8) & 0xFF00u) | ((x) >> 24))
    #define pgc_bswap64(x) (((uint64_t)pgc_bswap32((uint32_t)(x)) << 32) | pgc_bswap32((uint32_t)((x) >> 32)))
    #endif
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define pgc_be16(x) (x)
    #define pgc_be32(x) (x)
    #define pgc_be64(x) (x)
    #else
    #define pgc_be16(x) pgc_bswap16(x)
    #define pgc_be32(x) pgc_bswap32(x)
    #define pgc_be64(x) pgc_bswap64(x)
    #endif
    """
    uint16_t pgc_be16(uint16_t x) nogil
    uint32_t pgc_be32(uint32_t x) nogil
    uint64_t pgc_be64(uint64_t x) nogil


# Error codes recorded in Reader.err (see pgoutput/_errors.pyx for their text).
cpdef enum ErrCode:
    E_OK = 0
    E_SHORT = 1          # fewer bytes left than the field needs
    E_NEGATIVE = 2       # a length or count below zero
    E_BAD_VALUE = 3      # a byte that is not one of the allowed values
    E_TRAILING = 4       # bytes left after the message
    E_UNKNOWN_TAG = 5    # first byte is not a known message type
    E_NO_TERMINATOR = 6  # String without its NUL before the end
    E_UTF8 = 7           # a name that is not valid UTF-8
    E_EMPTY = 8          # empty payload
    E_AMBIGUOUS = 9      # both streaming readings consume the payload
    E_NOT_ENVELOPE = 10  # envelope="xlogdata" but the row is not 'w'/'k'
    E_NULL_ROW = 11      # a null input row (batch mode)
    E_TOO_LONG = 12      # a name longer than a server writes


cdef struct Reader:
    const uint8_t* buf
    Py_ssize_t len
    Py_ssize_t pos
    Py_ssize_t base      # offset of buf[0] within the user's payload (envelope unwrapping)
    # error record, valid when err != E_OK
    int err
    Py_ssize_t err_pos
    Py_ssize_t err_want
    int64_t err_value
    int err_col          # tuple/relation column index, -1 if none
    const char* err_what  # static description of the field being read


cdef inline void reader_init(Reader* r, const uint8_t* buf, Py_ssize_t n) noexcept nogil:
    r.buf = buf
    r.len = n
    r.pos = 0
    r.base = 0
    r.err = E_OK
    r.err_pos = 0
    r.err_want = 0
    r.err_value = 0
    r.err_col = -1
    r.err_what = b""


cdef inline int reader_fail(Reader* r, int code, Py_ssize_t pos, const char* what,
                            Py_ssize_t want, int64_t value) noexcept nogil:
    if r.err == E_OK:   # keep the first (innermost) cause
        r.err = code
        r.err_pos = pos
        r.err_what = what
        r.err_want = want
        r.err_value = value
    return -1


cdef inline int _need(Reader* r, Py_ssize_t n, const char* what) noexcept nogil:
    # n >= 0 always here; "r.len - r.pos" cannot overflow.
    if n > r.len - r.pos:
        return reader_fail(r, E_SHORT, r.pos, what, n, 0)
    return 0


cdef inline int read_u8(Reader* r, uint8_t* out, const char* what) noexcept nogil:
    if _need(r, 1, what) < 0:
        return -1
    out[0] = r.buf[r.pos]
    r.pos += 1
    return 0


cdef inline int read_u16(Reader* r, uint16_t* out, const char* what) noexcept nogil:
    cdef uint16_t v
    if _need(r, 2, what) < 0:
        return -1
    memcpy(&v, r.buf + r.pos, 2)
    out[0] = pgc_be16(v)
    r.pos += 2
    return 0


cdef inline int read_i16(Reader* r, int16_t* out, const char* what) noexcept nogil:
    cdef uint16_t v
    if read_u16(r, &v, what) < 0:
        return -1
    out[0] = <int16_t>v
    return 0


cdef inline int read_u32(Reader* r, uint32_t* out, const char* what) noexcept nogil:
    cdef uint32_t v
    if _need(r, 4, what) < 0:
        return -1
    memcpy(&v, r.buf + r.pos, 4)
    out[0] = pgc_be32(v)
    r.pos += 4
    return 0


cdef inline int read_i32(Reader* r, int32_t* out, const char* what) noexcept nogil:
    cdef uint32_t v
    if read_u32(r, &v, what) < 0:
        return -1
    out[0] = <int32_t>v
    return 0


cdef inline int read_u64(Reader* r, uint64_t* out, const char* what) noexcept nogil:
    cdef uint64_t v
    if _need(r, 8, what) < 0:
        return -1
    memcpy(&v, r.buf + r.pos, 8)
    out[0] = pgc_be64(v)
    r.pos += 8
    return 0


cdef inline int read_i64(Reader* r, int64_t* out, const char* what) noexcept nogil:
    cdef uint64_t v
    if read_u64(r, &v, what) < 0:
        return -1
    out[0] = <int64_t>v
    return 0


cdef inline int read_cstring(Reader* r, Py_ssize_t* off, Py_ssize_t* n, const char* what) noexcept nogil:
    """A NUL-terminated String: ``off``/``n`` receive its position and length (NUL excluded)."""
    cdef const uint8_t* start = r.buf + r.pos
    cdef const uint8_t* nul = <const uint8_t*>memchr(start, 0, <size_t>(r.len - r.pos))
    if nul == NULL:
        return reader_fail(r, E_NO_TERMINATOR, r.pos, what, 0, 0)
    off[0] = r.pos
    n[0] = nul - start
    r.pos += n[0] + 1
    return 0


cdef inline int read_bytes(Reader* r, Py_ssize_t n, Py_ssize_t* off, const char* what) noexcept nogil:
    """Skip ``n`` bytes (a length the caller has read and checked non-negative)."""
    if _need(r, n, what) < 0:
        return -1
    off[0] = r.pos
    r.pos += n
    return 0


cdef inline int expect_end(Reader* r, const char* what) noexcept nogil:
    if r.pos != r.len:
        return reader_fail(r, E_TRAILING, r.pos, what, 0, r.len - r.pos)
    return 0


cdef inline bint utf8_valid(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """Strict UTF-8 check (no overlongs, no surrogates, max U+10FFFF)."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    cdef uint64_t w
    # ASCII runs 8 bytes at a time (most text values are ASCII)
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        if w & 0x8080808080808080ULL:
            break
        i += 8
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
        elif c < 0xC2:
            return False
        elif c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif c < 0xF0:
            if i + 2 >= n or (s[i + 1] & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return False
            c1 = s[i + 1]
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0):
                return False
            i += 3
        elif c < 0xF5:
            if (i + 3 >= n or (s[i + 1] & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80
                    or (s[i + 3] & 0xC0) != 0x80):
                return False
            c1 = s[i + 1]
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
                return False
            i += 4
        else:
            return False
    return True
