# cython: language_level=3
"""Column converters for the common builtin types: Arrow buffers in, Arrow buffers out.

One call (``convert_columns_fast``) converts columns of TupleData values (``kinds`` string
array of 'n'/'u'/'t'/'b', ``data`` binary array, each column's values picked by an index)
to the Arrow layout that :mod:`pgoutput_codec.typecatalog` names for the type. No Python
object is made per value. Each family of types has its file in ``_codecs/`` (named as its
module of :mod:`pgoutput_codec.typecatalog`), which declares its converter codes and
registers, per code, its loop over a block of a column's rows (``_codecs/columns.pxi``'s
loop with the family's value converter inlined), its output width and the code's name in
``CODES``; the family module gives its types the code of that name. The loop here over
blocks of rows dispatches on the registered table, once per column and block, and names
no type.

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
import pyarrow.compute as pc


#: code -> function(Arrow type, n, validity buffer or None, null count, offsets buffer, data
#: buffer) -> (Arrow array, special markers as a string array or None): the families whose
#: value converters write an intermediate form (nested types) that one pass over the
#: whole column then lays out as Arrow's
FINISH = {}

# the shared definitions, the column side, then one file per family of types (each
# registers its converters)
include "_codecs/base.pxi"
include "_codecs/columns.pxi"
include "_codecs/integers.pxi"
include "_codecs/floats.pxi"
include "_codecs/numeric.pxi"
include "_codecs/datetime.pxi"
include "_codecs/interval.pxi"
include "_codecs/text.pxi"
include "_codecs/bytea.pxi"
include "_codecs/extensiontext.pxi"
include "_codecs/hstore.pxi"
include "_codecs/vectors.pxi"
include "_codecs/geometry.pxi"
include "_codecs/composites.pxi"
include "_codecs/ranges.pxi"


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
            if not 0 < code < MAX_CODE or FAMILIES[code].range == NULL:
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
                        FAMILIES[cols[j].c.code].range(&cols[j], &src, b0, b1)
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
    post = FINISH.get(col.c.code)
    if post is not None:
        return post(typ, n, vbuf, null_count, out, vout[:col.c.vpos])
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
