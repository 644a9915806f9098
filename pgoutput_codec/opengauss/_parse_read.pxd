# cython: language_level=3
"""Inline readers of the 'b' decoder's Insert fast path (``_parse.fast_insert``).

Header-only, as ``_native/reader.pxd``: compiled into the module that cimports them, so the C
compiler inlines them into the record loop. They check no bounds of their own:
``fast_insert`` checks each length against the record before it reads, and the slack
the fixed-size moves read and write is stated where they do it.
"""

from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from pgoutput_codec._native.reader cimport pgc_be16, pgc_be32, pgc_be64, utf8_valid


cdef inline uint16_t be16_at(const uint8_t* p) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return pgc_be16(v)


cdef inline uint32_t be32_at(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return pgc_be32(v)


cdef inline void copy_small(char* dst, const uint8_t* src, Py_ssize_t n,
                            const uint8_t* src_end) noexcept nogil:
    """memcpy with fixed sizes for short strings (inlined, no libc call): reads up to 32
    bytes from ``src`` (never past ``src_end``) and writes up to 32 bytes to ``dst`` (the
    caller reserved 32 bytes of slack)."""
    if n <= 16 and src_end - src >= 16:
        memcpy(dst, src, 16)
    elif n <= 32 and src_end - src >= 32:
        memcpy(dst, src, 16)
        memcpy(dst + 16, src + 16, 16)
    else:
        memcpy(dst, src, <size_t>n)


cdef inline bint text_ok(const uint8_t* s, Py_ssize_t n, const uint8_t* src_end) noexcept nogil:
    """Strict UTF-8; ASCII (every identifier in practice) is checked a word at a time,
    the last partial word with one load (reading no further than ``src_end``)."""
    cdef uint64_t w, acc = 0
    cdef Py_ssize_t i = 0
    cdef uint8_t tail = 0
    while n - i >= 8:
        memcpy(&w, s + i, 8)
        acc |= w
        i += 8
    if i < n:
        if src_end - (s + i) >= 8:
            memcpy(&w, s + i, 8)
            # big-endian value: the n - i bytes wanted are the high ones on every host
            acc |= pgc_be64(w) >> (64 - 8 * (n - i))
        else:
            while i < n:
                tail |= s[i]
                i += 1
    if (acc & <uint64_t>0x8080808080808080) == 0 and tail < 0x80:
        return True
    return utf8_valid(s, n)


cdef extern from *:
    """
    /* The column loop of the Insert fast path (docs/protocol.md, 'b' style: UInt16 len + name, UInt32
       type_oid, UInt32 len + value, 0xFFFFFFFF = NULL), in plain C so that every cursor
       stays in a register. "fixed": 32 bytes past the record are readable. *hi gets the
       OR of the record's name bytes: a high bit there means a non-ASCII name, which the
       caller validates as UTF-8. Returns the position after the tuple or -1 on any
       irregularity (the general path then reports it). */
    static inline uint64_t pgc_or_bytes(const uint8_t* s, Py_ssize_t n) {
        uint64_t acc = 0, w;
        Py_ssize_t i = 0;
        for (; n - i >= 8; i += 8) { memcpy(&w, s + i, 8); acc |= w; }
        for (; i < n; i++) acc |= s[i];
        return acc;
    }
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define PGC_LE64(x) pgc_bswap64(x)
    #else
    #define PGC_LE64(x) (x)
    #endif
    /* n bytes, in 16-byte moves (up to 15 more bytes read and written: the fast loop's
       slack). No call in that loop: a call would clobber the caller-saved registers, and
       GCC would then keep the loop's cursors on the stack. */
    static inline void pgc_copy_long(char* d, const uint8_t* s, Py_ssize_t n) {
        Py_ssize_t k;
        for (k = 0; k < n; k += 16) memcpy(d + k, s + k, 16);
    }
    /* The loop of the common case: 32 bytes past the record are readable (names up to
       16 and values up to 32 bytes are copied with fixed-size moves, the name length is
       read before its bound is checked) and at most 56 columns (the validity bits are a
       word: set from the nulls, which are rare, after the loop). Cursors are pointers and
       every length is checked once: few enough live values that all stay in registers. */
    static inline const uint8_t* pgc_og_fast(const uint8_t* p, const uint8_t* pend, Py_ssize_t natts,
            char* nd, Py_ssize_t* nl_io, int32_t* no, uint32_t* oo, char* vd, Py_ssize_t* vl_io,
            int32_t* vo, uint64_t* bits_io) {
        Py_ssize_t nl = *nl_io, vl = *vl_io, i;
        uint64_t nulls = 0;
        for (i = 0; i < natts; i++) {
            uint16_t r16;
            uint32_t r32, vlen;
            Py_ssize_t nlen;
            memcpy(&r16, p, 2);
            nlen = pgc_be16(r16);
            /* name length, name, type_oid and value length inside the record */
            if (nlen + 10 > pend - p) return NULL;
            if (nlen <= 16) memcpy(nd + nl, p + 2, 16);
            else pgc_copy_long(nd + nl, p + 2, nlen);
            nl += nlen;
            no[i] = (int32_t)nl;
            p += nlen + 2;
            memcpy(&r32, p, 4);
            oo[i] = pgc_be32(r32);
            memcpy(&r32, p + 4, 4);
            vlen = pgc_be32(r32);
            p += 8;
            if (vlen != 0xFFFFFFFFu) {
                if ((uint64_t)vlen > (uint64_t)(pend - p)) return NULL;
                if (vlen <= 32) memcpy(vd + vl, p, 32);
                else pgc_copy_long(vd + vl, p, vlen);
                vl += vlen;
                p += vlen;
            } else {
                nulls |= (uint64_t)1 << i;
            }
            vo[i] = (int32_t)vl;
        }
        *nl_io = nl;
        *vl_io = vl;
        *bits_io = ~nulls & (((uint64_t)1 << natts) - 1);
        return p;
    }
    /* Not inlined into decode_row on purpose: alone, every cursor of the loop gets a
       register; inlined, GCC spills seven of them to the stack (callgrind: 72
       instructions per column inlined, 43 not). */
    #if defined(__GNUC__) || defined(__clang__)
    __attribute__((noinline))
    #endif
    static Py_ssize_t pgc_og_columns(const uint8_t* buf, Py_ssize_t b, Py_ssize_t end,
            Py_ssize_t natts, int fixed, char* nd, Py_ssize_t* nl_io, int32_t* no, uint32_t* oo,
            char* vd, Py_ssize_t* vl_io, int32_t* vo, uint8_t* vv, Py_ssize_t* vn_io, uint64_t* hi_io) {
        Py_ssize_t nl0 = *nl_io, nl = nl0, vl = *vl_io, vn = *vn_io, i;
        uint64_t bits = 0;
        if (fixed && natts <= 56) {
            const uint8_t* q = pgc_og_fast(buf + b, buf + end, natts, nd, &nl, no, oo, vd, &vl, vo, &bits);
            if (q == NULL) return -1;
            b = q - buf;
            if (natts) {
                /* Arrow bitmaps are LSB-first: a little-endian word from the bitmap's last
                   byte (bits past vn there are zero; the caller reserved 8 bytes past it) */
                Py_ssize_t at = vn >> 3;
                uint64_t word = ((vn & 7) ? (uint64_t)vv[at] : 0) | (bits << (vn & 7));
                word = PGC_LE64(word);
                memcpy(vv + at, &word, 8);
            }
        } else {
            /* a record near the end of the input buffer, or a wide one: exact copies,
               validity bit by bit */
            for (i = 0; i < natts; i++) {
                uint16_t r16;
                uint32_t r32, vlen;
                Py_ssize_t nlen, k = vn + i;
                /* a column is 10 bytes at least: name length, type_oid, value length */
                if (end - b < 10) return -1;
                memcpy(&r16, buf + b, 2);
                nlen = pgc_be16(r16);
                b += 2;
                if (nlen > end - b - 8) return -1;
                memcpy(nd + nl, buf + b, (size_t)nlen);
                nl += nlen;
                no[i] = (int32_t)nl;
                b += nlen;
                memcpy(&r32, buf + b, 4);
                oo[i] = pgc_be32(r32);
                memcpy(&r32, buf + b + 4, 4);
                vlen = pgc_be32(r32);
                b += 8;
                if ((k & 7) == 0) vv[k >> 3] = 0;
                if (vlen != 0xFFFFFFFFu) {
                    if ((uint64_t)vlen > (uint64_t)(end - b)) return -1;
                    memcpy(vd + vl, buf + b, vlen);
                    vl += vlen;
                    b += vlen;
                    vv[k >> 3] |= (uint8_t)(1u << (k & 7));
                }
                vo[i] = (int32_t)vl;
            }
        }
        /* the record's names lie side by side in nd: one pass over them for a high bit */
        *hi_io = pgc_or_bytes((const uint8_t*)nd + nl0, nl - nl0);
        *nl_io = nl;
        *vl_io = vl;
        *vn_io = vn + natts;
        return b;
    }
    """
    Py_ssize_t pgc_og_columns(const uint8_t* buf, Py_ssize_t b, Py_ssize_t end, Py_ssize_t natts,
                              int fixed, char* nd, Py_ssize_t* nl_io, int32_t* no, uint32_t* oo,
                              char* vd, Py_ssize_t* vl_io, int32_t* vo, uint8_t* vv, Py_ssize_t* vn_io,
                              uint64_t* hi_io) noexcept nogil


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define pgc_prefetch(p) __builtin_prefetch((p), 0, 3)
    #else
    #define pgc_prefetch(p) ((void)(p))
    #endif
    """
    void pgc_prefetch(const void* p) noexcept nogil
