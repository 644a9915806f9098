# Ranges and multiranges (typecatalog/ranges.py): the splitters of a column of range
# values into its bounds (two parts per value, kind 'n' for an absent bound, the flags
# byte per value) and of a column of multirange values into its ranges (each as sent).
# No Python object per value; split_ranges / split_multiranges of typecatalog/ranges.py
# are their twins. Built on composites.pxi's Parts and _split_column.

cdef enum:
    R_EMPTY = 0x01
    R_LOWER_INC = 0x02
    R_UPPER_INC = 0x04
    R_LOWER_INF = 0x08
    R_UPPER_INF = 0x10


cdef int _text_bound(Parts* s, const uint8_t* p, Py_ssize_t n, Py_ssize_t* at, bint* present) noexcept nogil:
    """A bound of range_out text from at[0] written to s.data (present[0]: not unbounded)."""
    cdef Py_ssize_t pos = at[0]
    cdef bint inq = False
    cdef uint8_t c
    if pos < n and (p[pos] == 44 or p[pos] == 41 or p[pos] == 93):
        present[0] = False
        return P_OK
    present[0] = True
    while True:
        if pos >= n:
            return fail_at(s, b"range text ends inside a bound")
        c = p[pos]
        if c == 92:
            if pos + 1 >= n:
                return fail_at(s, b"range text ends after a backslash")
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
                pos += 1
        elif not inq and (c == 44 or c == 41 or c == 93):
            at[0] = pos
            return P_OK
        else:
            s.data.p[s.data.len] = c
            s.data.len += 1
            pos += 1


cdef int range_value(Parts* s, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Py_ssize_t pos
    cdef uint8_t flags
    cdef int32_t ln
    cdef int rc, side
    cdef bint present
    if binary:
        if n == 0:
            return fail_at(s, b"empty range send form")
        flags = p[0] & 0x1F          # other bits are no part of a value (as range_recv)
        if flags & R_EMPTY:
            if n != 1:
                return fail_at(s, b"trailing bytes in empty range send form")
            flags = R_EMPTY
            rc = part(s, 110, 0)
            if rc == P_OK:
                rc = part(s, 110, 0)
            if rc != P_OK:
                return rc
        else:
            pos = 1
            for side in range(2):
                if flags & (R_LOWER_INF if side == 0 else R_UPPER_INF):
                    rc = part(s, 110, 0)
                else:
                    if n < pos + 4:
                        return fail_at(s, b"range bound length missing")
                    ln = <int32_t>be_u32(p + pos)
                    if ln < 0 or n < pos + 4 + ln:
                        return fail_at(s, b"bad range bound length")
                    rc = part_bytes(s, 98, p + pos + 4, ln, 0)
                    pos += 4 + ln
                if rc != P_OK:
                    return rc
            if pos != n:
                return fail_at(s, b"trailing bytes in range send form")
        s.counts[i] = 2
        s.flags[i] = flags
        return P_OK
    if n == 5 and memcmp(p, b"empty", 5) == 0:
        rc = part(s, 110, 0)
        if rc == P_OK:
            rc = part(s, 110, 0)
        if rc != P_OK:
            return rc
        s.counts[i] = 2
        s.flags[i] = R_EMPTY
        return P_OK
    if n < 3 or (p[0] != 91 and p[0] != 40):
        return fail_at(s, b"range text must start with '[' or '('")
    if gb_need(&s.data, n) < 0:
        return P_NOMEM
    flags = R_LOWER_INC if p[0] == 91 else 0
    pos = 1
    rc = _text_bound(s, p, n, &pos, &present)
    if rc != P_OK:
        return rc
    rc = part(s, 116 if present else 110, 0)
    if rc != P_OK:
        return rc
    if not present:
        flags = (flags & ~R_LOWER_INC) | R_LOWER_INF
    if pos >= n or p[pos] != 44:
        return fail_at(s, b"range text has no ',' between its bounds")
    pos += 1
    rc = _text_bound(s, p, n, &pos, &present)
    if rc != P_OK:
        return rc
    rc = part(s, 116 if present else 110, 0)
    if rc != P_OK:
        return rc
    if pos != n - 1 or p[pos] == 44:
        return fail_at(s, b"bytes after the range's closing bracket")
    if p[pos] == 93:
        flags |= R_UPPER_INC
    if not present:
        flags = (flags & ~R_UPPER_INC) | R_UPPER_INF
    s.counts[i] = 2
    s.flags[i] = flags
    return P_OK


cdef int multirange_value(Parts* s, Py_ssize_t i, const uint8_t* p, Py_ssize_t n, bint binary) noexcept nogil:
    cdef Py_ssize_t pos, start, count = 0
    cdef int32_t cnt, ln
    cdef bint inq
    cdef uint8_t c
    cdef int rc
    if binary:
        if n < 4:
            return fail_at(s, b"multirange send form shorter than its count")
        cnt = <int32_t>be_u32(p)
        if cnt < 0 or cnt > (n - 4) // 5:
            return fail_at(s, b"bad multirange range count")
        pos = 4
        while count < cnt:
            if n < pos + 4:
                return fail_at(s, b"multirange range length missing")
            ln = <int32_t>be_u32(p + pos)
            if ln < 0 or n < pos + 4 + ln:
                return fail_at(s, b"bad multirange range length")
            rc = part_bytes(s, 98, p + pos + 4, ln, 0)
            if rc != P_OK:
                return rc
            pos += 4 + ln
            count += 1
        if pos != n:
            return fail_at(s, b"trailing bytes in multirange send form")
        s.counts[i] = count
        return P_OK
    if n < 2 or p[0] != 123:
        return fail_at(s, b"multirange text must start with '{'")
    if n == 2 and p[1] == 125:
        s.counts[i] = 0
        return P_OK
    pos = 1
    while True:
        start = pos
        if n - pos >= 5 and memcmp(p + pos, b"empty", 5) == 0:
            pos += 5
        else:
            if pos >= n or (p[pos] != 91 and p[pos] != 40):
                return fail_at(s, b"multirange text: a range must start with '[' or '('")
            pos += 1
            inq = False
            while True:
                if pos >= n:
                    return fail_at(s, b"multirange text ends inside a range")
                c = p[pos]
                if c == 92:
                    pos += 2
                    continue
                if c == 34:
                    inq = not inq
                elif not inq and (c == 41 or c == 93):
                    pos += 1
                    break
                pos += 1
        rc = part_bytes(s, 116, p + start, pos - start, 0)
        if rc != P_OK:
            return rc
        count += 1
        if pos >= n:
            return fail_at(s, b"multirange text ends without '}'")
        if p[pos] == 125:
            pos += 1
            break
        if p[pos] != 44:
            return fail_at(s, b"multirange text: ranges must be separated by ','")
        pos += 1
    if pos != n:
        return fail_at(s, b"bytes after the multirange's '}'")
    s.counts[i] = count
    return P_OK


def split_ranges(kinds, data):
    """A column of range values split into its bounds (typecatalog.nested)."""
    return _split_column(kinds, data, range_value)


def split_multiranges(kinds, data):
    """A column of multirange values split into its ranges (typecatalog.nested)."""
    return _split_column(kinds, data, multirange_value)
