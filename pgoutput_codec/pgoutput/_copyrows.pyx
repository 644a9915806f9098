# cython: language_level=3
"""A ``COPY ... TO STDOUT`` stream (text or binary format) turned into pgoutput Insert
payloads, one per row, as the server's pgoutput writes them (``logicalrep_write_insert``
and ``logicalrep_write_tuple`` in src/backend/replication/logical/proto.c)::

    'I'  Int32 relid  'N'  Int16 ncols  then per column: 'n' | kind Int32 len bytes

Text streams (``CopyAttributeOutText`` in src/backend/commands/copyto.c): fields end at a
tab, rows at a newline, ``\\N`` is NULL, a backslash escapes; the escapes are undone as
``CopyReadAttributesText`` (copyfromparse.c) undoes them, so each value is the type's
output text, sent with kind 't'. Binary streams (the "PGCOPY" file format): each value
is Int32 length + the send function's bytes, sent with the column's kind ('b', or 't'
for a column the query selects as its output function's cstring).

The first ``n_out`` fields of a row are the published columns; fields after them are
only read for the last row's key (:attr:`CopyInserts.last_key`). Every length is
checked against the bytes left; a stream that breaks the format raises
``CopyStreamError`` naming the byte offset from the stream's start. The loops run
without the GIL and create no Python object per row or value: the payloads are written
into one data buffer and one int32 offsets buffer handed to Arrow as they are.
"""

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.string cimport memchr, memcmp, memcpy

from pgoutput_codec._native.builders cimport Mem, mem_buffer, mem_grow
from pgoutput_codec._native.memory cimport pool_free
from pgoutput_codec._native.reader cimport pgc_be16, pgc_be32

import pyarrow as pa

from pgoutput_codec.errors import CopyStreamError

__all__ = ["CopyInserts", "BINARY_SIGNATURE"]

#: the first 11 bytes of a binary COPY stream (copyto.c BinarySignature)
BINARY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
cdef const char* _SIG = b"PGCOPY\n\xff\r\n\x00"

cdef enum:
    OK = 0
    ST_SHORT = 1         # the row (or header) is not complete in the bytes given
    ST_FIELDS = 2        # a row with another number of fields
    ST_BAD_LENGTH = 3    # a field length below -1
    ST_BAD_ESCAPE = 4    # a backslash at the end of a row
    ST_SIGNATURE = 5     # the binary header's signature is wrong
    ST_OIDS = 6          # the binary header asks for OIDs (pre-12 WITH OIDS)
    ST_AFTER_TRAILER = 7  # bytes after the binary trailer
    ST_NOMEM = 8
    ST_TOO_BIG = 9       # a batch's payloads past 2 GiB (int32 offsets)
    ST_BAD_HEADER = 10   # the binary header's extension length is negative

# the Insert header without its relid: 'I' relid(4) 'N' ncols(2)
cdef enum:
    HEAD = 8


cdef struct State:
    uint32_t relid_be
    int n_fields
    int n_out
    const uint8_t* kinds       # n_out bytes
    bint binary
    # results
    Py_ssize_t pos             # bytes of the input consumed (whole rows)
    Py_ssize_t rows            # rows written in this call
    Py_ssize_t last_row        # offset in the input of the last row written, -1 if none
    int status
    Py_ssize_t err_pos         # offset in the input where the problem is
    int err_field
    int64_t err_value
    Py_ssize_t err_want


cdef inline int _reserve(Mem* b, Py_ssize_t extra) noexcept nogil:
    if extra <= b.cap - b.len:
        return 0
    return mem_grow(b, extra)


cdef inline int _offset(State* s, Mem* offs, Mem* data) noexcept nogil:
    """Append the end of the row just written to ``offs``."""
    cdef int32_t v
    if data.len > 0x7FFFFFFF:
        s.status = ST_TOO_BIG
        return -1
    v = <int32_t>data.len
    if _reserve(offs, 4) < 0:
        s.status = ST_NOMEM
        return -1
    memcpy(offs.p + offs.len, &v, 4)
    offs.len += 4
    return 0


cdef inline void _head(State* s, uint8_t* o) noexcept nogil:
    cdef uint16_t n = pgc_be16(<uint16_t>s.n_out)
    o[0] = 73   # 'I'
    memcpy(o + 1, &s.relid_be, 4)
    o[5] = 78   # 'N'
    memcpy(o + 6, &n, 2)


cdef inline int _octal(uint8_t c) noexcept nogil:
    return c - 48 if 48 <= c <= 55 else -1


cdef inline int _hex(uint8_t c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef Py_ssize_t _unescape(const uint8_t* p, Py_ssize_t i, Py_ssize_t end, uint8_t* o,
                          Py_ssize_t* written) noexcept nogil:
    """Undo the text format's escapes of the field starting at ``p[i]``, up to the next
    tab or ``end``, into ``o``; returns where the field ends (a tab or ``end``), or -1 - the
    offset of a backslash that ends the row."""
    cdef Py_ssize_t k = 0
    cdef uint8_t c
    cdef int v, d
    while i < end:
        c = p[i]
        if c == 9:
            break
        if c != 92:
            o[k] = c
            k += 1
            i += 1
            continue
        if i + 1 >= end:
            return -1 - i
        c = p[i + 1]
        i += 2
        # copyfromparse.c CopyReadAttributesText: octal, \x hex, the C escapes, else the char
        v = _octal(c)
        if v >= 0:
            for _ in range(2):
                if i < end and _octal(p[i]) >= 0:
                    v = (v << 3) + _octal(p[i])
                    i += 1
            c = <uint8_t>(v & 0xFF)
        elif c == 120 and i < end and _hex(p[i]) >= 0:   # 'x'
            v = _hex(p[i])
            i += 1
            if i < end:
                d = _hex(p[i])
                if d >= 0:
                    v = (v << 4) + d
                    i += 1
            c = <uint8_t>v
        elif c == 98:
            c = 8
        elif c == 102:
            c = 12
        elif c == 110:
            c = 10
        elif c == 114:
            c = 13
        elif c == 116:
            c = 9
        elif c == 118:
            c = 11
        o[k] = c
        k += 1
    written[0] = k
    return i


cdef void _text_rows(State* s, const uint8_t* p, Py_ssize_t n, Mem* offs, Mem* data) noexcept nogil:
    cdef Py_ssize_t row, end, i, f_end, k, w
    cdef const uint8_t* nl
    cdef uint8_t* o
    cdef int f
    cdef int32_t len_be
    while s.pos < n:
        row = s.pos
        nl = <const uint8_t*>memchr(p + row, 10, <size_t>(n - row))
        if nl == NULL:
            s.status = ST_SHORT
            s.err_pos = n
            return
        end = nl - p
        # a value never grows when unescaped: the row's bytes bound the values' bytes
        if _reserve(data, HEAD + 5 * s.n_out + (end - row)) < 0:
            s.status = ST_NOMEM
            return
        o = data.p + data.len
        _head(s, o)
        k = HEAD
        i = row
        f = 0
        while True:
            if f >= s.n_fields:
                s.status = ST_FIELDS
                s.err_pos = i
                s.err_value = -1    # more than n_fields
                return
            if f < s.n_out:
                if end - i >= 2 and p[i] == 92 and p[i + 1] == 78 and (end - i == 2 or p[i + 2] == 9):
                    o[k] = 110   # 'n'
                    k += 1
                    f_end = i + 2
                else:
                    o[k] = s.kinds[f]
                    f_end = _unescape(p, i, end, o + k + 5, &w)
                    if f_end < 0:
                        s.status = ST_BAD_ESCAPE
                        s.err_pos = -1 - f_end
                        s.err_field = f
                        return
                    len_be = <int32_t>pgc_be32(<uint32_t>w)
                    memcpy(o + k + 1, &len_be, 4)
                    k += 5 + w
            else:
                nl = <const uint8_t*>memchr(p + i, 9, <size_t>(end - i))
                f_end = end if nl == NULL else nl - p
            f += 1
            if f_end >= end:
                break
            i = f_end + 1   # past the tab
        if f != s.n_fields:
            s.status = ST_FIELDS
            s.err_pos = end
            s.err_value = f
            return
        data.len += k
        if _offset(s, offs, data) < 0:
            return
        s.last_row = row
        s.rows += 1
        s.pos = end + 1


cdef inline int32_t _be_i32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return <int32_t>pgc_be32(v)


cdef inline int16_t _be_i16(const uint8_t* p) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return <int16_t>pgc_be16(v)


cdef void _binary_rows(State* s, const uint8_t* p, Py_ssize_t n, Mem* offs, Mem* data,
                       bint* trailer) noexcept nogil:
    cdef Py_ssize_t row, i, k
    cdef int16_t count
    cdef int32_t flen
    cdef int f
    cdef uint8_t* o
    while s.pos < n:
        if trailer[0]:
            s.status = ST_AFTER_TRAILER
            s.err_pos = s.pos
            return
        row = s.pos
        if n - row < 2:
            s.status = ST_SHORT
            s.err_pos = n
            s.err_want = 2
            return
        count = _be_i16(p + row)
        if count == -1:
            trailer[0] = True
            s.pos = row + 2
            continue
        if count != s.n_fields:
            s.status = ST_FIELDS
            s.err_pos = row
            s.err_value = count
            return
        # first pass: every length inside the bytes given, and the room the row takes
        i = row + 2
        for f in range(s.n_fields):
            if n - i < 4:
                s.status = ST_SHORT
                s.err_pos = i
                s.err_field = f
                s.err_want = 4
                return
            flen = _be_i32(p + i)
            i += 4
            if flen < -1:
                s.status = ST_BAD_LENGTH
                s.err_pos = i - 4
                s.err_field = f
                s.err_value = flen
                return
            if flen > 0:
                if n - i < flen:
                    s.status = ST_SHORT
                    s.err_pos = i
                    s.err_field = f
                    s.err_want = flen
                    return
                i += flen
        # the row's bytes (+ a kind byte per value) bound what it writes
        if _reserve(data, HEAD + s.n_out + (i - row)) < 0:
            s.status = ST_NOMEM
            return
        o = data.p + data.len
        _head(s, o)
        k = HEAD
        i = row + 2
        for f in range(s.n_out):
            flen = _be_i32(p + i)
            if flen == -1:
                o[k] = 110   # 'n'
                k += 1
                i += 4
            else:
                o[k] = s.kinds[f]
                memcpy(o + k + 1, p + i, <size_t>(4 + flen))
                k += 5 + flen
                i += 4 + flen
        data.len += k
        if _offset(s, offs, data) < 0:
            return
        s.last_row = row
        s.rows += 1
        for _ in range(s.n_out, s.n_fields):
            flen = _be_i32(p + i)
            i += 4 + (flen if flen > 0 else 0)
        s.pos = i


cdef class CopyInserts:
    """The Insert payloads of one ``COPY ... TO STDOUT`` stream of ``n_fields`` columns
    per row, fed in pieces of any size (:meth:`feed`).

    ``relid``: the relation OID the Inserts name; ``kinds``: one byte per published
    column, the first ``len(kinds)`` fields of a row (``b't'`` text, ``b'b'`` binary; a
    text stream takes ``b't'`` for every column); ``key_fields``: the field indexes
    whose values :attr:`last_key` holds for the last row fed.
    """

    cdef State s
    cdef bytes _kinds
    cdef tuple _key_fields
    cdef readonly int64_t offset
    """bytes of the stream taken so far (whole rows)"""
    cdef readonly int64_t rows
    """rows taken so far"""
    cdef readonly bint binary
    cdef readonly object last_key
    """the key fields of the last row taken: a tuple of bytes (the unescaped text or the
    binary value; None for NULL), or None before the first row"""
    cdef bint _header
    cdef bint _trailer
    cdef bint _finished

    def __init__(self, uint32_t relid, bint binary, int n_fields, bytes kinds, key_fields=()):
        if not 0 < len(kinds) <= n_fields or n_fields > 0x7FFF:
            raise ValueError(f"need 0 < len(kinds) <= n_fields <= 32767, got {len(kinds)} kinds, "
                             f"{n_fields} fields")
        for c in kinds:
            if c not in b"tb" or (c == 98 and not binary):
                raise ValueError(f"kinds must be b't' or b'b' bytes (b'b' only for a binary stream), "
                                 f"got {kinds!r}")
        self._key_fields = tuple(int(f) for f in key_fields)
        for f in self._key_fields:
            if not 0 <= f < n_fields:
                raise ValueError(f"key field {f} is not one of the {n_fields} fields")
        self._kinds = kinds
        self.binary = binary
        self.s.relid_be = pgc_be32(relid)
        self.s.n_fields = n_fields
        self.s.n_out = len(kinds)
        self.s.kinds = <const uint8_t*>self._kinds
        self.s.binary = binary
        self.offset = self.rows = 0
        self.last_key = None
        self._header = not binary
        self._trailer = self._finished = False

    def feed(self, const uint8_t[::1] data not None, bint final=False):
        """The Inserts of the whole rows at the start of ``data`` (the bytes of the stream
        that follow those already taken): ``(payloads, consumed)``, a ``pa.BinaryArray``
        and the number of bytes it took. The caller feeds the rest again with more bytes.
        ``final``: ``data`` ends the stream, so it must end with a whole row (and the
        trailer, in binary); anything else raises ``CopyStreamError``."""
        cdef Mem offs, dat
        cdef Py_ssize_t n = data.shape[0], start = 0
        cdef const uint8_t* p = &data[0] if n else <const uint8_t*>b""
        cdef int32_t zero = 0
        if self._finished:
            raise ValueError("the stream was fed its final bytes already")
        if final:
            self._finished = True
        if not self._header:
            start = self._read_header(p, n, final)
            if start == 0:
                return pa.array([], pa.binary()), 0
        offs.p = dat.p = NULL
        offs.len = offs.cap = dat.len = dat.cap = 0
        if mem_grow(&offs, 4 * 1024) < 0:
            raise MemoryError()
        memcpy(offs.p, &zero, 4)
        offs.len = 4
        self.s.pos = start
        self.s.rows = 0
        self.s.last_row = -1
        self.s.status = OK
        self.s.err_field = -1
        self.s.err_want = self.s.err_value = 0
        try:
            with nogil:
                if self.binary:
                    _binary_rows(&self.s, p, n, &offs, &dat, &self._trailer)
                else:
                    _text_rows(&self.s, p, n, &offs, &dat)
            if self.s.status == ST_SHORT and not final:
                self.s.status = OK
            if self.s.status == OK and final and self.binary and not self._trailer:
                self.s.status = ST_SHORT
                self.s.err_pos = n
                self.s.err_want = 2
            if self.s.status != OK:
                self._raise(p, n)
            if self.s.last_row >= 0:
                self.last_key = self._key(p + self.s.last_row, self.s.pos - self.s.last_row)
            rows = self.s.rows
            arr = pa.Array.from_buffers(pa.binary(), rows, [None, mem_buffer(&offs), mem_buffer(&dat)])
        finally:
            pool_free(offs.p)
            pool_free(dat.p)
        self.offset += self.s.pos
        self.rows += rows
        return arr, self.s.pos

    cdef Py_ssize_t _read_header(self, const uint8_t* p, Py_ssize_t n, bint final) except -1:
        """The binary header's length once it is whole in ``p`` (0 while it is not)."""
        cdef int32_t flags, ext
        if n >= 11 and memcmp(p, _SIG, 11) != 0 or n < 11 and memcmp(p, _SIG, n) != 0:
            raise CopyStreamError(f"binary COPY stream: the header's signature is not PGCOPY "
                                  f"(first bytes {(<const char*>p)[:min(n, 11)]!r}), at byte 0", 0)
        if n >= 19:
            flags = _be_i32(p + 11)
            ext = _be_i32(p + 15)
            if flags & (1 << 16):
                raise CopyStreamError("binary COPY stream: the header's flags ask for OIDs, "
                                      "which no PostgreSQL 12+ stream has, at byte 11", 11)
            if ext < 0:
                raise CopyStreamError(f"binary COPY stream: the header extension length is {ext}, "
                                      f"at byte 15", 15)
            if n - 19 >= ext:
                self._header = True
                return 19 + ext
        if final:
            raise CopyStreamError(f"binary COPY stream ends inside its header ({n} bytes), at byte {n}", n)
        return 0

    cdef object _key(self, const uint8_t* row, Py_ssize_t n):
        """The key fields of one whole row (already checked by the loop)."""
        cdef Py_ssize_t i = 0, f_end, w
        cdef int f
        cdef int32_t flen
        cdef bytearray buf
        if not self._key_fields:
            return ()
        values = [None] * self.s.n_fields
        if self.binary:
            i = 2
            for f in range(self.s.n_fields):
                flen = _be_i32(row + i)
                i += 4
                if flen >= 0:
                    if f in self._key_fields:
                        values[f] = (<const char*>row)[i:i + flen]
                    i += flen
        else:
            n -= 1   # the newline
            for f in range(self.s.n_fields):
                if n - i >= 2 and row[i] == 92 and row[i + 1] == 78 and (n - i == 2 or row[i + 2] == 9):
                    f_end = i + 2
                else:
                    buf = bytearray(n - i)
                    f_end = _unescape(row, i, n, <uint8_t*><char*>buf, &w)
                    if f in self._key_fields:
                        values[f] = bytes(buf[:w])
                i = f_end + 1
        return tuple(values[f] for f in self._key_fields)

    cdef int _raise(self, const uint8_t* p, Py_ssize_t n) except -1:
        cdef int64_t at = self.offset + self.s.err_pos
        cdef int64_t row = self.rows + self.s.rows + 1
        cdef int st = self.s.status
        fmt = "binary" if self.binary else "text"
        where = f"row {row}" + (f" field {self.s.err_field + 1}" if self.s.err_field >= 0 else "")
        if st == ST_SHORT:
            if self.binary:
                msg = (f"ends inside {where} (it wants {self.s.err_want} more bytes, "
                       f"{n - self.s.err_pos} left)")
            else:
                msg = f"ends inside {where} (no newline after its last {n - self.s.pos} bytes)"
            at = self.offset + (self.s.pos if not self.binary else self.s.err_pos)
        elif st == ST_FIELDS:
            if self.s.err_value < 0:
                msg = f"{where} has more than {self.s.n_fields} fields"
            else:
                msg = f"{where} has {self.s.err_value} fields, not {self.s.n_fields}"
        elif st == ST_BAD_LENGTH:
            msg = f"{where} has length {self.s.err_value}"
        elif st == ST_BAD_ESCAPE:
            msg = f"{where} ends with a backslash that escapes nothing"
        elif st == ST_AFTER_TRAILER:
            msg = f"{n - self.s.err_pos} bytes follow the trailer"
        elif st == ST_TOO_BIG:
            raise OverflowError("the Insert payloads of one batch exceed 2 GiB; feed fewer bytes at a time")
        elif st == ST_NOMEM:
            raise MemoryError()
        else:
            msg = f"status {st}"
        raise CopyStreamError(f"{fmt} COPY stream: {msg}, at byte {at}", at)
