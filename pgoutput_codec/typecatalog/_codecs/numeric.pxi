# numeric(p, s) with p <= 38 (typecatalog/numeric.py): decimal128 from numeric_out's
# text or numeric_send's base-10000 digits; NaN and +/-Infinity are specials.

cdef enum:
    C_NUMERIC = 8      # decimal128(p, s): Conv.precision and Conv.scale from the typmod

cdef int _numeric_text(const uint8_t* p, Py_ssize_t n, int scale, pgc_i128* out) noexcept nogil:
    """Decimal text (no exponent, as numeric_out prints) -> unscaled integer at ``scale``."""
    cdef Py_ssize_t i = 0
    cdef bint neg = False, dot = False
    cdef int frac = 0, ndig = 0, e
    cdef pgc_i128 m = 0, q
    if n > 0 and p[0] == 45:
        neg = True
        i = 1
    while i < n:
        if _digit(p[i]):
            if m > (PGC_DEC38 - 1 - (p[i] - 48)) // 10:
                return -1
            m = m * 10 + (p[i] - 48)
            ndig += 1
            if dot:
                frac += 1
        elif p[i] == 46 and not dot:
            dot = True
        else:
            return -1
        i += 1
    if ndig == frac or (dot and frac == 0):   # numeric_out prints digits on both sides of '.'
        return -1
    e = scale - frac
    if e > 0:
        if e > 38:
            if m != 0:
                return -1
        else:
            q = pgc_pow10(e)
            if m > (PGC_DEC38 - 1) // q:
                return -1
            m *= q
    elif e < 0:
        if -e > 38:
            if m != 0:
                return -1
        else:
            q = pgc_pow10(-e)
            if m % q != 0:
                return -1
            m //= q
    out[0] = -m if neg else m
    return 0


cdef int _numeric_binary(Reader* r, int scale, pgc_i128* out, int* special) noexcept nogil:
    """numeric_send: ndigits, weight, sign, dscale, base-10000 digits."""
    cdef int16_t ndigits, weight, dscale, dg
    cdef uint16_t sign
    cdef int k, e
    cdef pgc_i128 m = 0, q
    if (read_i16(r, &ndigits, b"") < 0 or read_i16(r, &weight, b"") < 0
            or read_u16(r, &sign, b"") < 0 or read_i16(r, &dscale, b"") < 0):
        return -1
    if sign == 0xC000:
        special[0] = S_NAN
        return 1
    if sign == 0xD000:
        special[0] = S_POS_INF
        return 1
    if sign == 0xF000:
        special[0] = S_NEG_INF
        return 1
    if (sign != 0 and sign != 0x4000) or ndigits < 0 or dscale < 0 or dscale > 0x3FFF:
        return -1
    # digit k is worth dg * 10^(4*(weight-k)); at the column scale that is 10^e
    for k in range(ndigits):
        if read_i16(r, &dg, b"") < 0 or dg < 0 or dg > 9999:
            return -1
        # numeric_recv truncates (toward zero) the digits its dscale hides; so do we
        e = -dscale - 4 * (weight - k)
        if e >= 4:
            dg = 0
        elif e > 0:
            dg -= dg % <int16_t>pgc_pow10(e)
        if dg == 0:
            continue
        e = 4 * (weight - k) + scale
        if e >= 0:
            if e > 38:
                return -1
            q = pgc_pow10(e)
            if dg > (PGC_DEC38 - 1) // q:
                return -1
            q *= dg
        else:
            if -e >= 4:
                return -1        # a nonzero digit below the column's scale
            q = pgc_pow10(-e)
            if dg % q != 0:
                return -1
            q = dg // q
        if q > PGC_DEC38 - 1 - m:
            return -1
        m += q
    out[0] = -m if sign == 0x4000 else m
    return 0


cdef inline int numeric_value(Conv* c, Py_ssize_t i, const uint8_t* p, Py_ssize_t n,
                              bint binary) noexcept nogil:
    cdef Reader r
    cdef pgc_i128 dec
    cdef int rc
    if binary:
        reader_init(&r, p, n)
        rc = _numeric_binary(&r, c.scale, &dec, &c.special)
        if rc == 1:
            return SPECIAL
        if rc < 0 or r.pos != n:
            c.err = b"bad numeric send form or value out of the column's precision/scale"
            return FAIL
    else:
        if _eq(p, n, b"NaN", 3):
            c.special = S_NAN
            return SPECIAL
        if _eq(p, n, b"Infinity", 8):
            c.special = S_POS_INF
            return SPECIAL
        if _eq(p, n, b"-Infinity", 9):
            c.special = S_NEG_INF
            return SPECIAL
        if _numeric_text(p, n, c.scale, &dec) < 0:
            c.err = b"not a decimal number within the column's precision/scale"
            return FAIL
    if c.precision < 38 and (dec >= pgc_pow10(c.precision) or dec <= -pgc_pow10(c.precision)):
        c.err = b"numeric value exceeds the column's precision"
        return FAIL
    pgc_store_i128(c.out + 16 * i, dec)
    return OK


cdef void numeric_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    convert_range(col, s, i0, i1, numeric_value)


register(C_NUMERIC, "NUMERIC", numeric_range, 16)
