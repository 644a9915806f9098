# cython: language_level=3, boundscheck=False, wraparound=False
"""The hot loop of ``transcode.py``: an Insert, Update or Delete's TupleData rewritten
from a client encoding to UTF-8 in one pass over its bytes, without message objects.

Row changes are nearly all of an archive and carry every value; the walk's plain-Python
path (decode the message, convert, ``encode_message``) is far slower (docs/benchmarks.md).
Here a value is copied as it is unless it has a byte >= 0x80; LATIN1 (every byte one
code point) is widened in C, other encodings go through CPython's codec for that value
alone. Anything out of the ordinary — a malformed message, a binary array of text (its
elements need the catalog) — returns None, and the plain path decodes it, so it alone
says what is wrong and where.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uintptr_t
from libc.string cimport memcmp, memcpy

from pgoutput_codec._native.arrowbuf cimport check_binary_offsets


cdef extern from "Python.h":
    object PyUnicode_Decode(const char* s, Py_ssize_t size, const char* encoding, const char* errors)
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL

# C constants in the loop (a module global would be a dict lookup per value), and
# Python ints for transcode.py, which builds the codes it hands in from these
cpdef enum:
    # ``rewrite_batch``'s envelope: decode_batch's ``envelope`` ("auto", "none", "xlogdata")
    ENV_AUTO = 0
    ENV_NONE = 1
    ENV_XLOGDATA = 2
cpdef enum:
    # kinds of a column's binary value (``transcode._Walk.kinds``)
    KIND_NONE = 0
    KIND_TEXT = 1
    KIND_JSONB = 2
    KIND_ARRAY = 3


cdef struct Out:
    uint8_t* buf
    Py_ssize_t len
    Py_ssize_t cap


cdef int _grow(Out* o, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = o.cap
    cdef uint8_t* nb
    if o.len + need <= cap:
        return 0
    while cap < o.len + need:
        cap = cap * 2 + 64
    nb = <uint8_t*>PyMem_Malloc(cap)
    if nb == NULL:
        raise MemoryError()
    memcpy(nb, o.buf, o.len)
    PyMem_Free(o.buf)
    o.buf = nb
    o.cap = cap
    return 0


cdef int _put(Out* o, const uint8_t* p, Py_ssize_t n) except -1:
    _grow(o, n)
    memcpy(o.buf + o.len, p, n)
    o.len += n
    return 0


cdef inline void _be32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline uint32_t _rd32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef int _text(Out* o, const uint8_t* p, Py_ssize_t n, bint latin1, const char* codec) except -1:
    """Append ``p[:n]`` in UTF-8 (the caller wrote the length placeholder)."""
    cdef Py_ssize_t i, high = 0, m
    cdef const char* u
    for i in range(n):
        high += p[i] >> 7
    if high == 0:
        return _put(o, p, n)
    if latin1:
        _grow(o, n + high)
        for i in range(n):
            if p[i] < 0x80:
                o.buf[o.len] = p[i]
                o.len += 1
            else:
                o.buf[o.len] = 0xC0 | (p[i] >> 6)
                o.buf[o.len + 1] = 0x80 | (p[i] & 0x3F)
                o.len += 2
        return 0
    s = PyUnicode_Decode(<const char*>p, n, codec, "strict")
    u = PyUnicode_AsUTF8AndSize(s, &m)
    return _put(o, <const uint8_t*>u, m)


cdef Py_ssize_t _tuple(Out* o, const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, const uint8_t* kinds,
                       Py_ssize_t nkinds, bint latin1, const char* codec) except -2:
    """Rewrite the TupleData at ``pos``; the position after it, or -1 when the plain path
    must take the message."""
    cdef int16_t ncols
    cdef int32_t n
    cdef Py_ssize_t i, at
    cdef uint8_t k, kind
    if pos + 2 > end:
        return -1
    ncols = <int16_t>((p[pos] << 8) | p[pos + 1])
    if ncols < 0:
        return -1
    _put(o, p + pos, 2)
    pos += 2
    for i in range(ncols):
        if pos >= end:
            return -1
        k = p[pos]
        if k == 0x6E or k == 0x75:       # 'n', 'u'
            _put(o, p + pos, 1)
            pos += 1
            continue
        if k != 0x74 and k != 0x62:      # 't', 'b'
            return -1
        if pos + 5 > end:
            return -1
        n = <int32_t>_rd32(p + pos + 1)
        if n < 0 or n > end - pos - 5:
            return -1
        kind = KIND_TEXT if k == 0x74 else (kinds[i] if i < nkinds else KIND_NONE)
        _put(o, p + pos, 5)
        at = o.len - 4                   # the length, written once the value is
        pos += 5
        if kind == KIND_NONE:
            _put(o, p + pos, n)
        elif kind == KIND_TEXT:
            _text(o, p + pos, n, latin1, codec)
        elif kind == KIND_JSONB and n >= 1:
            _put(o, p + pos, 1)
            _text(o, p + pos + 1, n - 1, latin1, codec)
        else:
            return -1                    # an array of text (or an empty jsonb): the plain path
        if o.len - at - 4 > 0x7FFFFFFF:
            return -1
        _be32(o.buf + at, <uint32_t>(o.len - at - 4))
        pos += n
    return pos


cdef bint _row_change(const uint8_t* p, Py_ssize_t end, Py_ssize_t start, bint with_xid, const uint8_t* kp,
                      Py_ssize_t nk, Out* o, bint latin1, const char* codec) except -1:
    """Append the Insert/Update/Delete ``p[:end]`` (its tag at ``start``, after an
    XLogData header, if any; ``kp[:nk]`` its relation's kinds) to ``o`` in UTF-8: True;
    False (``o`` as it was) when the plain path must take it."""
    cdef Py_ssize_t pos = start, hdr, mark = o.len
    cdef uint8_t tag, marker
    hdr = 1 + (4 if with_xid else 0) + 4
    if pos + hdr + 1 > end:
        return False
    tag = p[pos]
    try:
        _put(o, p, pos + hdr)
        pos += hdr
        marker = p[pos]
        if tag == 0x49:                      # Insert: 'N' tuple
            if marker != 0x4E:
                pos = -1
        elif tag == 0x55:                    # Update: ['K'|'O' tuple] 'N' tuple
            if marker == 0x4B or marker == 0x4F:
                _put(o, p + pos, 1)
                pos = _tuple(o, p, pos + 1, end, kp, nk, latin1, codec)
                if pos < 0 or pos >= end or p[pos] != 0x4E:
                    pos = -1
            elif marker != 0x4E:
                pos = -1
        elif tag == 0x44:                    # Delete: 'K'|'O' tuple
            if marker != 0x4B and marker != 0x4F:
                pos = -1
        else:
            pos = -1
        if pos >= 0:
            _put(o, p + pos, 1)
            pos = _tuple(o, p, pos + 1, end, kp, nk, latin1, codec)
    except UnicodeError:
        pos = -1                             # the plain path raises it, naming the message
    if pos != end:
        o.len = mark
        return False
    return True


cdef inline bint _ascii(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef uint8_t acc = 0
    for i in range(n):
        acc |= p[i]
    return acc < 0x80


def rewrite_batch(arr, walk, slow, int envelope):
    """The rows of ``arr`` (a pa.BinaryArray or LargeBinaryArray) in UTF-8: ``(array,
    rows rewritten)``. Row changes are rewritten here; a row that is all ASCII and not a
    Relation, Type or Stream Start/Stop is copied; every other row is ``slow(i, bytes)``
    (``_Walk`` decodes it, learns from it, raises or leaves it as sent); ``envelope``: an
    ENV_* code. ``walk.kinds``
    and ``walk.in_stream`` are read as they stand (only ``slow`` rows change them)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    cdef Py_ssize_t n = len(arr), i, j, start, end, rowlen, before, rewritten = 0, aoff = arr.offset
    cdef const uint8_t* data
    cdef const int32_t* o32 = NULL
    cdef const int64_t* o64 = NULL
    cdef const uint8_t* valid = NULL
    cdef const uint8_t* p
    cdef uint8_t tag
    cdef bint with_xid = bool(walk.in_stream)
    cdef bint latin1 = walk.latin1
    cdef bytes codec = walk.codec_c
    cdef dict kinds = walk.kinds
    cdef int64_t rid, cached = -1
    cdef const uint8_t* kp = NULL
    cdef Py_ssize_t nk = 0
    cdef bint fast
    cdef Out o
    ks = None
    check_binary_offsets(arr)
    bufs = arr.buffers()
    if n == 0:
        return pa.array([], pa.binary()), 0
    valid = NULL if bufs[0] is None else <const uint8_t*><uintptr_t>bufs[0].address
    if pa.types.is_large_binary(arr.type):
        o64 = <const int64_t*><uintptr_t>bufs[1].address
    else:
        o32 = <const int32_t*><uintptr_t>bufs[1].address
    data = <const uint8_t*>b""
    if bufs[2] is not None and bufs[2].size:
        data = <const uint8_t*><uintptr_t>bufs[2].address
    offsets = np.empty(n + 1, dtype=np.int64)
    cdef int64_t[::1] out_off = offsets
    o.cap = (o64[aoff + n] - o64[aoff] if o64 != NULL else o32[aoff + n] - o32[aoff]) * 5 // 4 + 64
    o.len = 0
    o.buf = <uint8_t*>PyMem_Malloc(o.cap)
    if o.buf == NULL:
        raise MemoryError()
    try:
        out_off[0] = 0
        for i in range(n):
            j = aoff + i
            if valid != NULL and not (valid[j >> 3] >> (j & 7)) & 1:
                out_off[i + 1] = o.len
                continue
            start = o64[j] if o64 != NULL else o32[j]
            end = o64[j + 1] if o64 != NULL else o32[j + 1]
            p = data + start
            rowlen = end - start
            before = o.len
            j = 25 if rowlen > 0 and p[0] == 0x77 and envelope != ENV_NONE else 0
            tag = p[j] if rowlen > j else 0
            if tag != 0x52 and tag != 0x59 and tag != 0x53 and tag != 0x45 and _ascii(p, rowlen):
                _put(&o, p, rowlen)
            else:
                # (a bare row where every row must be a 'w' frame is the plain path's to refuse)
                fast = ((tag == 0x49 or tag == 0x55 or tag == 0x44) and rowlen > j + 5 + 4 * with_xid
                        and not (envelope == ENV_XLOGDATA and j == 0))
                if fast:
                    rid = _rd32(p + j + 1 + (4 if with_xid else 0))
                    if rid != cached:           # the relation's kinds, looked up once per run of its rows
                        cached = rid
                        ks = kinds.get(rid)
                        if ks is None and rid in walk.types:
                            ks = walk._kinds_of(rid)
                        kp = NULL if ks is None else <const uint8_t*><bytes>ks
                        nk = 0 if ks is None else len(<bytes>ks)
                    fast = _row_change(p, rowlen, j, with_xid, kp, nk, &o, latin1, codec)
                if not fast:
                    new = slow(i, PyBytes_FromStringAndSize(<const char*>p, rowlen))
                    _put(&o, <const uint8_t*><char*>new, len(new))
                    with_xid = bool(walk.in_stream)
                    cached = -1                 # a Relation or Type message may have changed them
            if o.len - before != rowlen or memcmp(o.buf + before, p, rowlen) != 0:
                rewritten += 1
            out_off[i + 1] = o.len
        payload = PyBytes_FromStringAndSize(<char*>o.buf, o.len)
    finally:
        PyMem_Free(o.buf)
    mask = None if valid == NULL else pc.is_valid(arr).buffers()[1]
    if o.len <= 0x7FFFFFFF:
        return pa.Array.from_buffers(pa.binary(), n, [mask, pa.py_buffer(offsets.astype(np.int32)),
                                                      pa.py_buffer(payload)]), rewritten
    return (pa.Array.from_buffers(pa.large_binary(), n, [mask, pa.py_buffer(offsets), pa.py_buffer(payload)]),
            rewritten)
