# cython: language_level=3
"""Column converters for the common builtin types: Arrow buffers in, Arrow buffers out.

One call (``convert_columns_fast``) converts columns of TupleData values (``kinds`` string
array of 'n'/'u'/'t'/'b', ``data`` binary array, each column's values picked by an index)
to the Arrow layout that :mod:`pgoutput_codec.typecatalog` names for the type. No Python
object is made per value. Each family of types has its file in ``_codecs/`` (named as its
module of :mod:`pgoutput_codec.typecatalog`), which declares its converter codes and
registers its value converter, its output width and the code's name in ``CODES``; the
family module gives its types the code of that name. The column loops here dispatch on
the registered table and name no type.

Each value converter returns ``OK``, ``SPECIAL`` (the value is null in Arrow and
``special`` holds +/-infinity or NaN), ``FAIL`` (the static message in ``Conv.err``) or
``SLOW`` (a legal form this module does not parse, e.g. bytea 'escape' output or a
non-default IntervalStyle: the caller converts the whole column in Python).
Binary forms follow PostgreSQL's ``*_send`` functions (``src/backend/utils/adt/``);
text forms follow the ``*_out`` functions under DateStyle ISO and IntervalStyle postgres.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.math cimport isinf
from libc.stdlib cimport strtod, strtof
from libc.string cimport memcpy

from pgoutput_codec._native.arrowbuf cimport bit, buffer_address as _addr, check_binary_offsets
from pgoutput_codec._native.builders cimport hand_off, is_arange_offsets, pool_buffer
from pgoutput_codec._native.memory cimport pool_free, pool_malloc, pool_realloc
from pgoutput_codec._native.reader cimport (
    Reader, read_i16, read_i32, read_i64, read_u16, read_u32, reader_init, utf8_valid,
)

import numpy as np
import pyarrow as pa


# the shared definitions, then one file per family of types (each registers its converters)
include "_codecs/base.pxi"
include "_codecs/integers.pxi"
include "_codecs/floats.pxi"
include "_codecs/numeric.pxi"
include "_codecs/datetime.pxi"
include "_codecs/interval.pxi"
include "_codecs/text.pxi"
include "_codecs/bytea.pxi"


# ---------------------------------------------------------------- one column

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


cdef inline bint _ascii16(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Whether the n (<= 16) bytes at p are ASCII: from 8 bytes on, two overlapping 8-byte
    loads inside the value (any byte order)."""
    cdef uint64_t w0, w1
    cdef uint8_t acc = 0
    cdef Py_ssize_t k
    if n >= 8:
        memcpy(&w0, p, 8)
        memcpy(&w1, p + n - 8, 8)
        return ((w0 | w1) & <uint64_t>0x8080808080808080) == 0
    for k in range(n):
        acc |= p[k]
    return acc < 0x80


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


cdef void _text_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    """Values i0..i1 of a plain-text converter (text-like columns, the most common type),
    without a call per value (text and send forms are the same bytes; only UTF-8 is
    checked).

    The column's cursors live in locals for the loop: every byte stored through the output
    pointer may alias the Col struct, so the compiler would reload its fields after each
    copy."""
    cdef Py_ssize_t i, e, dn
    cdef uint8_t k
    cdef const uint8_t* p
    cdef const int64_t* ix = col.ix
    cdef int64_t add = col.add
    cdef uint8_t* vout = col.c.vout
    cdef Py_ssize_t vpos = col.c.vpos
    cdef Py_ssize_t vcap = col.vcap
    cdef uint8_t* vbits = col.vbits
    cdef int32_t* offs_out = col.offs_out
    cdef Py_ssize_t nvalid = 0
    cdef const char* why = NULL
    cdef bint nomem = False
    cdef const uint8_t* dvalid = s.dvalid
    cdef const int32_t* doffs = s.doffs + s.doff
    cdef const uint8_t* ddata = s.ddata
    cdef const uint8_t* dend = s.dend
    cdef Py_ssize_t doff = s.doff
    for i in range(i0, i1):
        e = ix[i] if ix != NULL else i
        if e >= 0:
            e += add
        if _kind_of(s, e, &k) < 0:
            why = b"tuple column kind is not one character"
            break
        if k == 116 or k == 98:
            if not _valid(dvalid, doff + e):
                why = b"kind 't'/'b' with null data"
                break
            p = ddata + doffs[e]
            dn = doffs[e + 1] - doffs[e]
            if vpos + dn + 16 > vcap:
                col.c.vpos = vpos
                if _ensure(col, dn + 16) < 0:
                    why = b"out of memory"
                    nomem = True
                    break
                vout = col.c.vout
                vcap = col.vcap
            if dn <= 16 and p + 16 <= dend:
                # short values (most): two 8-byte loads answer "ASCII?" and a fixed
                # 16-byte move copies (the output has 20 spare bytes per value)
                if not (_ascii16(p, dn) or utf8_valid(p, dn)):
                    why = b"invalid UTF-8"
                    break
                memcpy(vout + vpos, p, 16)
            else:
                if not utf8_valid(p, dn):
                    why = b"invalid UTF-8"
                    break
                memcpy(vout + vpos, p, dn)
            vpos += dn
            vbits[i >> 3] |= <uint8_t>(1 << (i & 7))
            nvalid += 1
        elif k != 110 and k != 117:
            why = b"tuple column kind is not n/u/t/b"
            break
        if vpos > 0x7FFFFFFF:
            why = b"column exceeds 2 GiB of string data; convert it in smaller chunks"
            break
        offs_out[i + 1] = <int32_t>vpos
    col.c.vpos = vpos
    col.nvalid += nvalid
    if why != NULL:
        _fail_col(col, i, NOMEM if nomem else FAIL, why)


cdef void _convert_range(Col* col, const Src* s, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    """Values i0..i1 of one column (stops the column at the first failure or SLOW)."""
    cdef Py_ssize_t i, e, dn
    cdef uint8_t k
    cdef int rc
    cdef const Family* fam = &FAMILIES[col.c.code]
    cdef value_fn value = fam.value
    if fam.plain_text:
        _text_range(col, s, i0, i1)
        return
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


# Rows per block of the multi-column loop: a block's values of every column stay in the
# cache (~130 bytes per ten-column row) instead of the whole tuple children being read
# once per column. Measured on 200k ten-column rows: ~10% faster than one column after
# the other; 256, 512 and 2048 rows per block the same within noise. What remains is
# per value (perf: loads of the kind byte through the kinds' offsets, the memcpy).
cdef enum:
    BLOCK = 2048


def convert_columns_fast(specs, kinds, data, indexes):
    """Convert several columns of one flat tuple child at once, row block by row block.

    ``specs``: (code, precision, scale, Arrow type of the output) per column;
    ``kinds``/``data``: the ``pa.string()`` kinds and ``pa.binary()`` values of the flat
    child; ``indexes``: per column an int64 numpy array (element of each output value,
    -1 = null), a tuple ``(offsets, k)`` (element ``offsets[i] + k``; offsets -1 = null:
    columns of one row layout share ``offsets``) or None (value i = element i).
    Returns per column ``(array, special_codes or None)``, ``None`` when a value needs the
    Python converters (SLOW), or ``ConvertFailure(index, message)`` (returned, not raised:
    the other columns are still good)."""
    cdef Py_ssize_t nsrc = len(kinds), ncols = len(specs), j, n = -1, span, b0, b1
    if len(data) != nsrc:
        raise ValueError(f"kinds has {nsrc} values but data has {len(data)}")
    if len(indexes) != ncols:
        raise ValueError("one index (or None) per column")
    check_binary_offsets(kinds)
    check_binary_offsets(data)
    kb = kinds.buffers()
    db = data.buffers()
    cdef Src src
    src.koff = kinds.offset
    src.doff = data.offset
    src.kvalid = _addr(kb[0]) if kinds.null_count else NULL
    src.koffs = <const int32_t*>_addr(kb[1])
    src.kdata = _addr(kb[2])
    src.kident = is_arange_offsets(kb[1])
    src.dvalid = _addr(db[0]) if data.null_count else NULL
    src.doffs = <const int32_t*>_addr(db[1])
    src.ddata = _addr(db[2])
    cdef Py_ssize_t dsize = db[2].size if db[2] is not None else 0
    src.dend = src.ddata + dsize
    cols = <Col*>PyMem_Calloc(max(ncols, 1), sizeof(Col))
    if cols == NULL:
        raise MemoryError()
    keep = []          # Python owners of every buffer the Col structs point into
    owners = []        # the index arrays
    checked = {}       # id(index array) -> (max, min): columns often share one
    cdef const int64_t[::1] ixv
    cdef Col* col
    cdef uint8_t* p
    cdef int code, width
    types = []
    try:
        for j in range(ncols):
            col = &cols[j]
            code, col.c.precision, col.c.scale, typ = specs[j]
            if not 0 < code < MAX_CODE or FAMILIES[code].value == NULL:
                raise ValueError(f"no converter of code {code}")
            col.c.code = code
            types.append(typ)
            col.c.err = b""
            ix = indexes[j]
            add = 0
            if isinstance(ix, tuple):      # (row offsets, position): element = offset + position
                ix, add = ix
            if ix is not None:
                ix = np.ascontiguousarray(ix, dtype=np.int64)
                lim = checked.get(id(ix))
                if lim is None:
                    lim = checked[id(ix)] = (int(ix.max()), int(ix.min())) if len(ix) else (-1, -1)
                if len(ix) and (lim[0] + add >= nsrc or lim[1] < -1 or add < 0):
                    raise IndexError(f"index out of range for {nsrc} values")
                ixv = ix
                col.ix = &ixv[0] if len(ix) else NULL
                col.add = add
                owners.append(ix)
                m = len(ix)
            else:
                col.ix = NULL
                m = nsrc
            if n < 0:
                n = m
            elif m != n:
                raise ValueError("every column must have the same number of values")
            col.variable = FAMILIES[code].width == VARIABLE
        if n < 0:
            n = nsrc
        # first output size of variable-width columns: exact when the values are the
        # child's own, else the child's average value size per value, grown on demand
        avg = (src.doffs[src.doff + nsrc] - src.doffs[src.doff]) / nsrc if nsrc else 0
        for j in range(ncols):
            col = &cols[j]
            width = FAMILIES[col.c.code].width
            if col.ix == NULL:
                span = (src.doffs[src.doff + n] - src.doffs[src.doff]) if n else 0
            else:
                span = <Py_ssize_t>(avg * n * 1.125)
            validity = pool_buffer((n + 7) // 8, True, &col.vbits)
            specials = pool_buffer(n, True, &p)
            col.specials = <int8_t*>p
            vout = None
            if width == BITS:
                out = pool_buffer((n + 7) // 8 + 1, True, &col.c.out)
            elif col.variable:
                out = pool_buffer(4 * (n + 1), False, &p)       # offsets
                col.offs_out = <int32_t*>p
                col.offs_out[0] = 0
                col.vcap = span + 20 * n + 64
                col.c.vout = <uint8_t*>pool_malloc(col.vcap)
                if col.c.vout == NULL:
                    raise MemoryError()
            else:
                out = pool_buffer(n * width + 1, False, &col.c.out)
            keep.append((validity, specials, out, vout))
            del validity, specials, out, vout
        keep.append(owners)
        with nogil:
            b0 = 0
            while b0 < n:
                b1 = min(b0 + BLOCK, n)
                for j in range(ncols):
                    if not cols[j].done:
                        _convert_range(&cols[j], &src, b0, b1)
                b0 = b1
        for j in range(ncols):
            if cols[j].rc == NOMEM:
                raise MemoryError()
        results = []
        for j in range(ncols):
            validity, specials, out, vout = keep[j]
            if cols[j].variable:
                vout = hand_off(cols[j].c.vout, cols[j].c.vpos)   # Arrow owns the block now
                cols[j].c.vout = NULL
            results.append(_finish(&cols[j], n, types[j], validity, specials, out, vout))
        return results
    finally:
        for j in range(ncols):
            if cols[j].variable and cols[j].c.vout != NULL:
                pool_free(cols[j].c.vout)
        PyMem_Free(cols)


cdef object _finish(Col* col, Py_ssize_t n, typ, validity, specials, out, vout):
    cdef int width = FAMILIES[col.c.code].width
    if col.rc == FAIL:
        return ConvertFailure(col.bad, col.why.decode())
    if col.rc == SLOW:
        return None
    null_count = n - col.nvalid
    vbuf = validity if null_count else None
    if width == BITS:
        arr = pa.Array.from_buffers(typ, n, [vbuf, out], null_count)
    elif col.variable:
        arr = pa.Array.from_buffers(typ, n, [vbuf, out, vout[:col.c.vpos]], null_count)
    else:
        arr = pa.Array.from_buffers(typ, n, [vbuf, out[:n * width]], null_count)
    codes = np.frombuffer(specials, dtype=np.int8, count=n) if col.any_special else None
    return arr, codes


class ConvertFailure(ValueError):
    """Returned with (index, message); typecatalog.columns adds the type and the value."""

    def __init__(self, index, message):
        super().__init__(index, message)
        self.index = index
        self.message = message
