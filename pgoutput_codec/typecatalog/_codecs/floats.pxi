# float4, float8 (typecatalog/floats.py): float4send/float8send's big-endian IEEE values
# or float4out/float8out's text, read with strtof/strtod.

cdef enum:
    C_FLOAT4 = 6
    C_FLOAT8 = 7


cdef bint _float_chars(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Only what float8out/float4out print (digits, '.', e/E, signs; Infinity, NaN):
    strtod alone would also take hex floats, 'inf' and 'nan', which the Python twin
    (and the server's output) never has."""
    cdef Py_ssize_t k, s = 1 if n and (p[0] == 45 or p[0] == 43) else 0
    if _eq(p + s, n - s, b"Infinity", 8) or _eq(p, n, b"NaN", 3):
        return True
    for k in range(n):
        if not (_digit(p[k]) or p[k] == 46 or p[k] == 101 or p[k] == 69 or p[k] == 43 or p[k] == 45):
            return False
    return True


cdef extern from *:
    """
    #include <errno.h>
    static inline void pgc_clear_errno(void) { errno = 0; }
    static inline int pgc_erange(void) { return errno == ERANGE; }
    """
    # (a Cython assignment to errno inside a function would make a local of that name)
    void pgc_clear_errno() noexcept nogil
    int pgc_erange() noexcept nogil


cdef int _float_text(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """A float column's value in text form (its own function: the stack copy strtod reads
    stays out of the send form's path)."""
    cdef double dv
    cdef float fv
    cdef char buf[128]
    cdef char* endp
    if n == 0 or n >= 127 or not _float_chars(p, n):
        c.err = b"not a float"
        return FAIL
    memcpy(buf, p, n)
    buf[n] = 0
    pgc_clear_errno()
    # as float4in/float8in: a finite text that overflows to infinity or underflows to
    # zero is out of range (a denormal is a value), never a silently different number
    if c.code == C_FLOAT4:
        fv = strtof(buf, &endp)
        if endp != buf + n or buf[0] == 32:
            c.err = b"not a float"
            return FAIL
        if pgc_erange() and (fv == 0 or isinf(fv)):
            c.err = b"out of range for type real"
            return FAIL
        memcpy(c.out + 4 * i, &fv, 4)
    else:
        dv = strtod(buf, &endp)
        if endp != buf + n or buf[0] == 32:
            c.err = b"not a float"
            return FAIL
        if pgc_erange() and (dv == 0 or isinf(dv)):
            c.err = b"out of range for type double precision"
            return FAIL
        memcpy(c.out + 8 * i, &dv, 8)
    return OK


cdef inline int float_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n,
                            bint binary) noexcept nogil:
    cdef int k
    cdef uint8_t* o
    cdef int code = c.code
    if binary:
        if code == C_FLOAT4 and n == 4:
            memcpy(c.out + 4 * i, p, 4)
            for k in range(2):     # big-endian to little-endian in place
                o = c.out + 4 * i
                o[k], o[3 - k] = o[3 - k], o[k]
            return OK
        if code == C_FLOAT8 and n == 8:
            o = c.out + 8 * i
            for k in range(8):
                o[k] = p[7 - k]
            return OK
        c.err = b"binary float of the wrong length"
        return FAIL
    return _float_text(c, i, p, n)


cdef void float_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, float_value)


register(C_FLOAT4, "FLOAT4", float_range, 4)
register(C_FLOAT8, "FLOAT8", float_range, 8)
