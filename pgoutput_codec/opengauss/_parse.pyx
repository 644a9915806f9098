# cython: language_level=3
"""Compiled 'b' (binary) style batch decoder: Arrow buffers in, Arrow buffers out.

The same record layout and error policy as the Python twin ``_parse_py.py`` (read it
first: it is the reference). Every read goes through ``pgoutput_codec._native.reader``; the
record body is read with the reader narrowed to the record's own length, so a body can
never read into the next record. Insert records, most of any archive, first try the one
pass of ``fast_insert`` (its inline readers in ``_parse_read.pxd``); rows go into the
Arrow builders of ``_parse_out``: no Python object per record or value.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy, memset

from pgoutput_codec._native.arrowbuf cimport check_binary_offsets
from pgoutput_codec._native.builders cimport bitmap_put, mem_off32, mem_put, mem_put_i32, mem_put_u32
from pgoutput_codec._native.reader cimport (
    E_BAD_VALUE, E_EMPTY, E_NEGATIVE, E_NOT_ENVELOPE, E_NULL_ROW, E_OK, E_SHORT, E_TRAILING,
    E_UNKNOWN_TAG, E_UTF8, Reader, _need, read_bytes, read_u8, read_u16, read_u32, read_u64,
    pgc_be64, reader_fail, reader_init, utf8_valid,
)
from pgoutput_codec.opengauss._parse_out cimport (
    H_CSN, H_CT, H_FIRST, H_LSN, H_NEW, H_OLD, H_ORIGIN, H_SCHEMA, H_TAG, H_USER, H_XID, Rec,
    RecordBuilder, Saved, TupleB, add_insert, tuple_restore, tuple_save,
)
from pgoutput_codec.opengauss._parse_read cimport (
    be16_at, be32_at, pgc_og_columns, pgc_prefetch, text_ok,
)

import pyarrow as pa

from pgoutput_codec.opengauss._errors import format_error

cdef uint32_t NULL_LEN = 0xFFFFFFFF


# ---- record parsing --------------------------------------------------------------------

cdef int read_tuple(Reader* r, TupleB* t) except -2 nogil:
    """Append one tuple's columns to the child buffers; -1 (reader error) on bad input."""
    cdef uint16_t natts, nlen
    cdef uint32_t oid, vlen
    cdef Py_ssize_t off, i
    if read_u16(r, &natts, b"attrnum") < 0:
        return -1
    for i in range(natts):
        r.err_col = <int>i
        if read_u16(r, &nlen, b"column name length") < 0:
            return -1
        if read_bytes(r, nlen, &off, b"column name") < 0:
            return -1
        if not utf8_valid(r.buf + off, nlen):
            return reader_fail(r, E_UTF8, off, b"column name", 0, 0)
        if read_u32(r, &oid, b"type_oid") < 0 or read_u32(r, &vlen, b"value length") < 0:
            return -1
        mem_put(&t.name_data, r.buf + off, nlen)
        mem_put_i32(&t.name_offs, mem_off32(&t.name_data))
        mem_put_u32(&t.oid, oid)
        if vlen == NULL_LEN:
            bitmap_put(&t.value.valid, 0)
        else:
            if read_bytes(r, vlen, &off, b"value") < 0:
                return -1
            mem_put(&t.value.data, r.buf + off, vlen)
            bitmap_put(&t.value.valid, 1)
        mem_put_i32(&t.value.offs, mem_off32(&t.value.data))
        t.ncols += 1
    r.err_col = -1
    return 0


cdef int read_text32(Reader* r, Py_ssize_t* off, Py_ssize_t* n, const char* what_len,
                     const char* what) noexcept nogil:
    cdef uint32_t len32
    if read_u32(r, &len32, what_len) < 0:
        return -1
    if read_bytes(r, len32, off, what) < 0:
        return -1
    n[0] = len32
    if not utf8_valid(r.buf + off[0], len32):
        return reader_fail(r, E_UTF8, off[0], what, 0, 0)
    return 0


cdef int read_text16(Reader* r, Py_ssize_t* off, Py_ssize_t* n, const char* what_len,
                     const char* what) noexcept nogil:
    cdef uint16_t len16
    if read_u16(r, &len16, what_len) < 0:
        return -1
    if read_bytes(r, len16, off, what) < 0:
        return -1
    n[0] = len16
    if not utf8_valid(r.buf + off[0], len16):
        return reader_fail(r, E_UTF8, off[0], what, 0, 0)
    return 0


cdef int read_options(Reader* r, Rec* rec, bint begin) noexcept nogil:
    """Tagged optional fields of B (X, T, O, N) / C (X, T), any order, each at most once."""
    cdef uint8_t opt
    cdef Py_ssize_t at
    cdef int bit
    cdef const char* what = b"Begin option" if begin else b"Commit option"
    while r.pos < r.len:
        at = r.pos
        if read_u8(r, &opt, what) < 0:
            return -1
        if opt == 0x58:
            bit = H_XID
        elif opt == 0x54:
            bit = H_CT
        elif opt == 0x4F and begin:
            bit = H_ORIGIN
        elif opt == 0x4E and begin:
            bit = H_USER
        else:
            return reader_fail(r, E_BAD_VALUE, at, what, 0, opt)
        if rec.has & bit:
            return reader_fail(r, E_BAD_VALUE, at, b"repeated option", 0, opt)
        rec.has |= bit
        if bit == H_XID:
            if read_u64(r, &rec.xid, b"xid") < 0:
                return -1
        elif bit == H_CT:
            if read_text32(r, &rec.ct_off, &rec.ct_len, b"commit_time length", b"commit_time") < 0:
                return -1
        elif bit == H_ORIGIN:
            if read_u32(r, &rec.origin_id, b"origin_id") < 0:
                return -1
        else:
            if read_text32(r, &rec.un_off, &rec.un_len, b"user_name length", b"user_name") < 0:
                return -1
    return 0


cdef int read_body(Reader* r, Rec* rec, TupleB* newt, TupleB* oldt) except -2 nogil:
    """The body after lsn and tag (r narrowed to the record). 1 for a heartbeat."""
    cdef uint8_t tag = rec.tag, m = 0
    cdef Py_ssize_t at
    cdef int stage = 0     # 0: N or O may follow, 1: only O, 2: nothing
    if tag == 0x42:
        if read_u64(r, &rec.csn, b"csn") < 0 or read_u64(r, &rec.first_lsn, b"first_lsn") < 0:
            return -1
        rec.has |= H_CSN | H_FIRST
        return read_options(r, rec, True)
    if tag == 0x43:
        return read_options(r, rec, False)
    if tag == 0x49 or tag == 0x55 or tag == 0x44:
        if read_text16(r, &rec.sc_off, &rec.sc_len, b"schema length", b"schema") < 0:
            return -1
        if read_text16(r, &rec.tb_off, &rec.tb_len, b"table length", b"table") < 0:
            return -1
        rec.has |= H_SCHEMA
        if tag == 0x49:
            stage = 0
        elif tag == 0x44:
            stage = 1
        while r.pos < r.len:
            at = r.pos
            read_u8(r, &m, b"tuple marker")
            if m == 0x4E and stage == 0 and tag != 0x44:
                if read_tuple(r, newt) < 0:
                    return -1
                rec.has |= H_NEW
                stage = 2 if tag == 0x49 else 1
            elif m == 0x4F and stage <= 1 and tag != 0x49:
                if read_tuple(r, oldt) < 0:
                    return -1
                rec.has |= H_OLD
                stage = 2
            else:
                return reader_fail(r, E_BAD_VALUE, at, b"tuple marker", 0, m)
        return 0
    if tag == 0x48:
        r.pos = r.len
        return 1
    return reader_fail(r, E_UNKNOWN_TAG, r.pos - 1, b"", 0, tag)


cdef inline bint known_tag(uint8_t t) noexcept nogil:
    return t == 0x42 or t == 0x43 or t == 0x49 or t == 0x55 or t == 0x44 or t == 0x48


cdef int add_error(RecordBuilder out, int64_t row, Reader* r, Rec* rec, bint fatal) except -1 nogil:
    cdef const char* p
    with gil:       # (an error's text is made in Python: errors are rare)
        tag = rec.tag if rec.has & H_TAG else None
        text = format_error(r.err, r.err_pos, tag, (<bytes>r.err_what).decode(), r.err_want,
                            r.len - r.err_pos if r.err == E_SHORT else 0, r.err_value, r.err_col,
                            fatal).encode()
        if not known_tag(rec.tag):
            rec.has &= ~H_TAG
        rec.has &= H_LSN | H_TAG
        p = text
        out.add(row, rec, NULL, p, len(text))
    return 0


# ---- frames ----------------------------------------------------------------------------

# bytes ahead of the record being decoded that fast_insert prefetches (512..2048 measured
# alike; a few records of a typical row)
cdef enum:
    PF_AHEAD = 1024


cdef int fast_insert(RecordBuilder out, int64_t row, const uint8_t* buf, Py_ssize_t pos, Py_ssize_t n,
                     const uint8_t* src_end, Py_ssize_t* next_pos) except -1 nogil:
    """An Insert record — most of any archive — parsed and written in one pass.

    ``pos`` is where the record's UInt32 length starts. Returns 1 (followed by 'P') or 2
    (by 'F', the end of the frame) when the record was decoded and ``next_pos`` is set; 0
    when it must go through ``read_body`` (any irregularity: the general path owns every
    error message and offset, and nothing is left written then). Accepts exactly the
    records ``read_body`` decodes without error.
    """
    cdef uint32_t length
    cdef uint16_t natts
    cdef char* nd
    cdef char* vd
    cdef Py_ssize_t nl, vl, vn
    cdef int32_t* no
    cdef uint32_t* oo
    cdef int32_t* vo
    cdef uint8_t* vv
    cdef uint64_t hi = 0
    cdef Py_ssize_t prev
    cdef uint64_t lsn
    cdef Py_ssize_t end, b, sc_off, sc_len, tb_off, tb_len, i
    cdef TupleB* t = &out.newt
    cdef Saved sv
    cdef uint8_t sep
    cdef bint ok = True
    if n - pos < 14:
        return 0
    length = be32_at(buf + pos)
    if length < 9 or length > n - pos - 5 or buf[pos + 12] != 0x49:
        return 0
    end = pos + 4 + length
    # the input streams through once and is not in cache: ask for it a few records ahead
    # (the hardware prefetcher alone left the record's first loads waiting on memory;
    # 15.3 -> 12.6 ms for the benchmark's 200,000 records)
    for i in range(pos + PF_AHEAD, min(end + PF_AHEAD, src_end - buf), 64):
        pgc_prefetch(buf + i)
    sep = buf[end]
    if not (sep == 0x50 or (sep == 0x46 and end + 1 == n)):
        return 0
    memcpy(&lsn, buf + pos + 4, 8)
    lsn = pgc_be64(lsn)
    b = pos + 13
    if end - b < 2:
        return 0
    sc_len = be16_at(buf + b)
    sc_off = b + 2
    if sc_len > end - sc_off or not text_ok(buf + sc_off, sc_len, src_end):
        return 0
    b = sc_off + sc_len
    if end - b < 2:
        return 0
    tb_len = be16_at(buf + b)
    tb_off = b + 2
    if tb_len > end - tb_off or not text_ok(buf + tb_off, tb_len, src_end):
        return 0
    b = tb_off + tb_len
    if end - b < 3 or buf[b] != 0x4E:
        return 0
    natts = be16_at(buf + b + 1)
    b += 3
    # every column takes 10 bytes at least; offsets stay within int32 (else mem_off32 raises
    # in the general path)
    if (natts > (end - b) // 10 or t.name_data.len + length > 0x7FFFFFFF
            or t.value.data.len + length > 0x7FFFFFFF or out.schema.data.len + length > 0x7FFFFFFF
            or out.table.data.len + length > 0x7FFFFFFF):
        return 0
    # no capacity checks here: decode_row reserved for the whole frame (reserve_frame)
    tuple_save(t, &sv)
    # locals, not t's fields: every char store may alias them, the compiler would reload
    nd = <char*>t.name_data.p
    nl = t.name_data.len
    vd = <char*>t.value.data.p
    vl = t.value.data.len
    no = <int32_t*>(t.name_offs.p + t.name_offs.len)
    oo = <uint32_t*>(t.oid.p + t.oid.len)
    vo = <int32_t*>(t.value.offs.p + t.value.offs.len)
    vv = t.value.valid.b.p
    vn = t.value.valid.n
    b = pgc_og_columns(buf, b, end, natts, src_end - (buf + end) >= 32, nd, &nl, no, oo, vd, &vl, vo,
                       vv, &vn, &hi)
    if b >= 0 and (hi & <uint64_t>0x8080808080808080):
        # a non-ASCII name: strict UTF-8 over this record's names (as read_tuple)
        prev = t.name_data.len
        for i in range(natts):
            if not utf8_valid(<const uint8_t*>nd + prev, no[i] - prev):
                ok = False
                break
            prev = no[i]
    if not ok or b != end:
        tuple_restore(t, &sv)
        return 0
    t.name_data.len = nl
    t.value.data.len = vl
    t.name_offs.len += 4 * natts
    t.oid.len += 4 * natts
    t.value.offs.len += 4 * natts
    t.value.valid.n = vn
    t.value.valid.b.len = (vn + 7) >> 3
    t.ncols += natts
    add_insert(out, row, lsn, buf + sc_off, sc_len, buf + tb_off, tb_len, src_end)
    next_pos[0] = end + 1
    return 1 if sep == 0x50 else 2


cdef int decode_row(RecordBuilder out, int64_t row, const uint8_t* buf, Py_ssize_t n, int envelope,
                    int64_t* heartbeats, const uint8_t* src_end) except -1 nogil:
    """One input row; envelope 0 auto, 1 none, 2 xlogdata."""
    cdef Reader r
    cdef Rec rec
    cdef uint32_t length
    cdef Py_ssize_t start, body_end, full
    cdef uint8_t sep
    cdef bint sep_ok
    cdef int rc
    cdef Saved sn, so
    cdef Py_ssize_t nxt
    reader_init(&r, buf, n)
    memset(&rec, 0, sizeof(Rec))
    if n == 0:
        reader_fail(&r, E_EMPTY, 0, b"", 0, 0)
        return add_error(out, row, &r, &rec, True)
    if envelope == 2 and buf[0] != 0x77:
        reader_fail(&r, E_NOT_ENVELOPE, 0, b"", 0, 0)
        return add_error(out, row, &r, &rec, True)
    if envelope != 1 and buf[0] == 0x77:
        r.pos = 1
        if _need(&r, 24, b"XLogData header") < 0:
            rec.tag = 0x77
            rec.has = H_TAG
            return _fatal_w(out, row, &r, &rec)
        r.pos = 25
    out.reserve_frame(n)
    while True:
        rc = fast_insert(out, row, buf, r.pos, n, src_end, &nxt)
        if rc == 1:
            r.pos = nxt
            continue
        if rc == 2:
            return 0
        memset(&rec, 0, sizeof(Rec))
        start = r.pos
        if read_u32(&r, &length, b"record length") < 0:
            return add_error(out, row, &r, &rec, True)
        if length == 0:
            if r.pos != n:
                reader_fail(&r, E_TRAILING, r.pos, b"the UInt32 0 that ends the batch", 0, n - r.pos)
                return add_error(out, row, &r, &rec, True)
            return 0
        if length < 9:
            reader_fail(&r, E_NEGATIVE, start, b"record length", 0, length)
            return add_error(out, row, &r, &rec, True)
        if n - r.pos >= 9:
            read_u64(&r, &rec.lsn, b"lsn")
            rec.tag = r.buf[r.pos]
            rec.has = H_LSN | H_TAG
            r.pos -= 8
        if length > n - r.pos:
            reader_fail(&r, E_SHORT, r.pos, b"record", length, 0)
            return add_error(out, row, &r, &rec, True)
        body_end = r.pos + length
        full = r.len
        r.len = body_end
        r.pos += 9
        tuple_save(&out.newt, &sn)
        tuple_save(&out.oldt, &so)
        rc = read_body(&r, &rec, &out.newt, &out.oldt)
        r.len = full
        sep_ok = body_end < n and (buf[body_end] == 0x50 or buf[body_end] == 0x46)
        if rc < 0:
            tuple_restore(&out.newt, &sn)
            tuple_restore(&out.oldt, &so)
            # the reader's "left" for a short read is relative to the record's end
            r.len = body_end
            add_error(out, row, &r, &rec, not sep_ok)
            r.len = full
            if not sep_ok:
                return 0
            r.err = E_OK
            r.err_col = -1
        elif not sep_ok:
            tuple_restore(&out.newt, &sn)
            tuple_restore(&out.oldt, &so)
            if body_end >= n:
                reader_fail(&r, E_SHORT, body_end, b"separator", 1, 0)
            else:
                reader_fail(&r, E_BAD_VALUE, body_end, b"separator", 0, buf[body_end])
            return add_error(out, row, &r, &rec, True)
        elif rc == 1:
            heartbeats[0] += 1
        else:
            out.add(row, &rec, buf, NULL, 0)
        sep = buf[body_end]
        r.pos = body_end + 1
        if sep == 0x46:
            if r.pos != n:
                memset(&rec, 0, sizeof(Rec))
                reader_fail(&r, E_TRAILING, r.pos, b"the batch end 'F'", 0, n - r.pos)
                return add_error(out, row, &r, &rec, True)
            return 0


cdef int _fatal_w(RecordBuilder out, int64_t row, Reader* r, Rec* rec) except -1 nogil:
    cdef const char* p
    with gil:
        tag = 0x77
        text = format_error(r.err, r.err_pos, tag, (<bytes>r.err_what).decode(), r.err_want,
                            r.len - r.err_pos, r.err_value, -1, True).encode()
        rec.has = 0
        p = text
        out.add(row, rec, NULL, p, len(text))
    return 0


def decode_binary_chunk(arr, int64_t row_base, str envelope="auto"):
    """Decode one ``pa.BinaryArray``/``pa.LargeBinaryArray`` chunk of 'b' frames.

    Returns ``(RecordBatch, heartbeats)``; ``row`` values start at ``row_base``.
    """
    cdef int env = 0 if envelope == "auto" else 1 if envelope == "none" else 2
    cdef bint large = pa.types.is_large_binary(arr.type)
    cdef Py_ssize_t n = len(arr), i, off = arr.offset
    cdef const uint8_t* validity = NULL
    cdef const int32_t* offs32 = NULL
    cdef const int64_t* offs64 = NULL
    cdef const uint8_t* data = NULL
    cdef const uint8_t* src_end = NULL
    cdef Py_ssize_t dsize = 0
    cdef int64_t start, end, hb = 0
    cdef RecordBuilder out = RecordBuilder()
    cdef Reader nr
    cdef Rec rec
    cdef bint scaled = False
    cdef int64_t first, last
    cdef const uint8_t* empty = <const uint8_t*>b""
    if not (large or pa.types.is_binary(arr.type)):
        raise TypeError(f"expected a binary or large_binary array, got {arr.type}")
    check_binary_offsets(arr)
    bufs = arr.buffers()
    if bufs[0] is not None and arr.null_count:
        validity = <const uint8_t*><uintptr_t>bufs[0].address
    if large:
        offs64 = <const int64_t*><uintptr_t>bufs[1].address
    else:
        offs32 = <const int32_t*><uintptr_t>bufs[1].address
    if bufs[2] is not None and bufs[2].size:
        data = <const uint8_t*><uintptr_t>bufs[2].address
        dsize = bufs[2].size
        src_end = data + dsize
    first = (offs64[off] if large else offs32[off]) if n else 0
    last = (offs64[off + n] if large else offs32[off + n]) if n else 0
    # without the GIL: threads decode other pieces meanwhile (error texts take it back)
    with nogil:
        for i in range(n):
            if validity != NULL and not (validity[(i + off) >> 3] >> ((i + off) & 7)) & 1:
                reader_init(&nr, NULL, 0)
                memset(&rec, 0, sizeof(Rec))
                reader_fail(&nr, E_NULL_ROW, 0, b"", 0, 0)
                add_error(out, row_base + i, &nr, &rec, True)
                continue
            if large:
                start = offs64[i + off]
                end = offs64[i + off + 1]
            else:
                start = offs32[i + off]
                end = offs32[i + off + 1]
            decode_row(out, row_base + i, data + start if data != NULL else empty, end - start,
                       env, &hb, src_end)
            if not scaled and end > first:
                scaled = True
                if end < last:
                    out.reserve_scaled(<double>(last - end) / <double>(end - first))
    return out.finish(), hb
