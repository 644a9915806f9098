# cython: language_level=3
"""Allocation of the decoders' output buffers, with a small cache of large blocks.

Why: first-touch page faults of fresh memory from mmap cost far more than decoding
(docs/benchmarks.md, "Memory"). glibc returns large blocks to the
kernel on free, so every batch of a big decode paid that again. Blocks of 1 MiB and
more are kept here when the Arrow array that owned them is released and handed to the
next batch (already touched: no page faults). The cache holds at most
``PGOUTPUT_CODEC_CACHE_MB`` (default 256) MiB and 32 blocks; ``cache_clear()`` empties it.

With ``PGOUTPUT_CODEC_HUGE_PAGES=1``, blocks of ``MAP_MIN_BYTES`` (4 MiB) and more are
mapped here rather than by malloc, 2 MiB
aligned and advised as transparent huge pages (``MADV_HUGEPAGE``: the kernel's default
mode is ``madvise`` on many systems): a first touch then faults 2 MiB at once instead of
4 KiB, and such a block grows by ``mremap`` (the kernel moves the page table entries:
no copy, no page touched again). A decode of 2 M messages spent most of its time in the
page faults of its largest output buffers (the tuple values: more than the cache holds),
and a decode in pieces on threads faulted its pieces' blocks of 4-32 MiB in again and
again from malloc's per-thread arenas (32,000 faults for 2 M messages: 40% more CPU time
than one thread; with these mapped, 400-4,000 and 10-20%).

Each block carries a 64-byte header with its capacity and, for a mapped block, its mapped
length, so ``pool_free``/``pool_realloc`` need only the pointer (the header keeps
malloc's 16-byte alignment). The converters
grow their buffers with the GIL released, so the cache has a lock of its own, held only
while a block is taken from it or put back (never while memory is copied or Python runs).
"""

import os

from cpython.pythread cimport (
    WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock, PyThread_release_lock, PyThread_type_lock,
)
from libc.stdint cimport uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

cdef enum:
    HEADER = 64
    MIN_CACHED = 1 << 20
    SLOTS = 32

cdef extern from *:
    """
    #include <stdint.h>
    #include <sys/mman.h>
    #define PGC_HUGE ((size_t)2 << 20)

    /* len bytes (a multiple of PGC_HUGE) of fresh zero pages, PGC_HUGE aligned, advised
       as huge pages; NULL when the system has none to give */
    static void* pgc_map(size_t len) {
        size_t span = len + PGC_HUGE;
        uint8_t* p = (uint8_t*)mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        uintptr_t a;
        size_t head, tail;
        if (p == (uint8_t*)MAP_FAILED)
            return NULL;
        a = ((uintptr_t)p + PGC_HUGE - 1) & ~(uintptr_t)(PGC_HUGE - 1);
        head = a - (uintptr_t)p;
        tail = span - head - len;
        if (head)
            munmap(p, head);
        if (tail)
            munmap((uint8_t*)a + len, tail);
    #ifdef MADV_HUGEPAGE
        madvise((void*)a, len, MADV_HUGEPAGE);
    #endif
        return (void*)a;
    }

    /* a mapping of old bytes grown to len, its pages moved rather than copied */
    static void* pgc_remap(void* p, size_t old, size_t len) {
    #ifdef MREMAP_MAYMOVE
        void* q = mremap(p, old, len, MREMAP_MAYMOVE);
        if (q == MAP_FAILED)
            return NULL;
    #ifdef MADV_HUGEPAGE
        madvise(q, len, MADV_HUGEPAGE);
    #endif
        return q;
    #else
        (void)p; (void)old; (void)len;
        return NULL;
    #endif
    }

    static void pgc_unmap(void* p, size_t len) {
        munmap(p, len);
    }
    """
    size_t PGC_HUGE
    void* pgc_map(size_t len) nogil
    void* pgc_remap(void* p, size_t old, size_t len) nogil
    void pgc_unmap(void* p, size_t len) nogil

#: blocks this large are mapped with huge pages and grown by mremap (see above)
cdef size_t MAP_MIN_BYTES = 4 << 20
# Off unless asked for: on the VMs we measure on, the first huge-page faults of a process
# cost more system time than they save (a first decode of 2 M messages in a fresh process:
# 1.06 s mapped, 0.23 s from malloc), though later decodes in the same process run twice
# as fast mapped (0.071 s against 0.156 s). A long-lived process decoding many large
# batches gains; a short one, such as a command-line run, loses.
cdef bint _map = os.environ.get("PGOUTPUT_CODEC_HUGE_PAGES", "0") == "1"

cdef struct Block:
    void* raw
    size_t cap

cdef Block _cache[SLOTS]
cdef int _ncached = 0
cdef size_t _cached_bytes = 0
cdef size_t _limit = <size_t>int(os.environ.get("PGOUTPUT_CODEC_CACHE_MB", "256")) << 20
cdef PyThread_type_lock _lock = PyThread_allocate_lock()
if _lock == NULL:
    raise MemoryError("cannot allocate the block cache's lock")


cdef inline void* _user(void* raw, size_t cap, size_t mapped) noexcept nogil:
    (<size_t*>raw)[0] = cap
    (<size_t*>raw)[1] = mapped
    return <uint8_t*>raw + HEADER


cdef inline size_t _cap(void* p) noexcept nogil:
    return (<size_t*>(<uint8_t*>p - HEADER))[0]


cdef inline size_t _mapped(void* raw) noexcept nogil:
    """The length of ``raw``'s mapping (0: a block from malloc)."""
    return (<size_t*>raw)[1]


cdef inline size_t _map_len(size_t size) noexcept nogil:
    return (size + HEADER + PGC_HUGE - 1) & ~(PGC_HUGE - 1)


cdef void* _new_block(size_t size) noexcept nogil:
    """A fresh block of ``size`` bytes: mapped when large (see the module), else malloc's."""
    cdef void* raw
    cdef size_t length
    if _map and size >= MAP_MIN_BYTES:
        length = _map_len(size)
        raw = pgc_map(length)
        if raw != NULL:
            return _user(raw, length - HEADER, length)
    raw = malloc(size + HEADER)
    if raw == NULL:
        return NULL
    return _user(raw, size, 0)


cdef inline void _release(void* raw) noexcept nogil:
    cdef size_t mapped = _mapped(raw)
    if mapped:
        pgc_unmap(raw, mapped)
    else:
        free(raw)


cdef void* pool_malloc(size_t size) noexcept nogil:
    global _ncached, _cached_bytes
    cdef int i, best = -1
    cdef void* raw
    cdef size_t cap
    if size >= MIN_CACHED:
        PyThread_acquire_lock(_lock, WAIT_LOCK)
        # smallest cached block that fits, but not one more than 4x too big
        for i in range(_ncached):
            if _cache[i].cap >= size and _cache[i].cap <= 4 * size:
                if best < 0 or _cache[i].cap < _cache[best].cap:
                    best = i
        if best >= 0:
            raw = _cache[best].raw
            cap = _cache[best].cap
            _ncached -= 1
            _cache[best] = _cache[_ncached]
            _cached_bytes -= cap
        PyThread_release_lock(_lock)
        if best >= 0:
            return <uint8_t*>raw + HEADER
    return _new_block(size if size > 0 else 1)


cdef void* pool_calloc(size_t size) noexcept nogil:
    cdef void* p = pool_malloc(size)
    if p != NULL:
        memset(p, 0, size)
    return p


cdef void pool_free(void* p) noexcept nogil:
    global _ncached, _cached_bytes
    cdef size_t cap
    cdef void* raw
    cdef int i, smallest
    if p == NULL:
        return
    raw = <uint8_t*>p - HEADER
    cap = (<size_t*>raw)[0]
    if cap >= MIN_CACHED and cap <= _limit:
        PyThread_acquire_lock(_lock, WAIT_LOCK)
        while _ncached > 0 and (_ncached == SLOTS or _cached_bytes + cap > _limit):
            smallest = 0
            for i in range(1, _ncached):
                if _cache[i].cap < _cache[smallest].cap:
                    smallest = i
            if _cache[smallest].cap >= cap:
                break       # keep the larger blocks we already have
            _release(_cache[smallest].raw)
            _cached_bytes -= _cache[smallest].cap
            _ncached -= 1
            _cache[smallest] = _cache[_ncached]
        else:
            _cache[_ncached].raw = raw
            _cache[_ncached].cap = cap
            _ncached += 1
            _cached_bytes += cap
            raw = NULL
        PyThread_release_lock(_lock)
    if raw != NULL:
        _release(raw)


cdef void* pool_realloc(void* p, size_t size) noexcept nogil:
    cdef void* q
    cdef void* raw
    cdef size_t old, mapped, length
    if p == NULL:
        return pool_malloc(size)
    old = _cap(p)
    if size <= old:
        return p
    raw = <uint8_t*>p - HEADER
    mapped = _mapped(raw)
    if mapped:
        # the pages move with the mapping: nothing copied, nothing touched again
        length = _map_len(size)
        q = pgc_remap(raw, mapped, length)
        if q != NULL:
            return _user(q, length - HEADER, length)
    q = pool_malloc(size)
    if q == NULL:
        return NULL
    memcpy(q, p, old)
    pool_free(p)
    return q


# ---- the C library's own allocator -------------------------------------------------------
# The block cache covers our output buffers; the NumPy temporaries of the change decoder
# (row positions, ranks, masks: 0.2-1.6 MB each per 200k rows) come from malloc, which by
# default maps blocks over 128 KiB (adaptively up to 32 MiB) fresh and returns them on
# free, so every call faulted its pages in again: decode_table_changes measured 4.0x
# decode_batch with the defaults, 3.1x with these. Bounded: allocations of 32 MiB or more
# still map and unmap; at most 256 MiB of free memory stays at the top of the heap.
# PGOUTPUT_CODEC_MALLOC_TUNING=0 leaves malloc alone. glibc only (elsewhere a no-op).
cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(__GLIBC__)
    #include <malloc.h>
    static int pgc_tune_malloc(int mmap_threshold, int trim_threshold) {
        return mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1
            && mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1;
    }
    #else
    static int pgc_tune_malloc(int mmap_threshold, int trim_threshold) {
        (void)mmap_threshold; (void)trim_threshold; return 0;
    }
    #endif
    """
    int pgc_tune_malloc(int mmap_threshold, int trim_threshold) nogil

MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20
_malloc_tuned = os.environ.get("PGOUTPUT_CODEC_MALLOC_TUNING", "1") != "0" and \
    bool(pgc_tune_malloc(MMAP_THRESHOLD, TRIM_THRESHOLD))


def mapped_blocks():
    """Whether large output blocks are mapped as huge pages (``PGOUTPUT_CODEC_HUGE_PAGES=1``)."""
    return bool(_map)


def malloc_tuned():
    """Whether importing the codec set glibc's mmap/trim thresholds (see the comment above)."""
    return _malloc_tuned


def cache_info():
    """(blocks cached, bytes cached, limit in bytes)."""
    cdef int n
    cdef size_t b
    with nogil:
        PyThread_acquire_lock(_lock, WAIT_LOCK)
        n, b = _ncached, _cached_bytes
        PyThread_release_lock(_lock)
    return n, b, _limit


def cache_clear():
    """Return every cached block to the system allocator."""
    global _ncached, _cached_bytes
    cdef int i
    with nogil:
        PyThread_acquire_lock(_lock, WAIT_LOCK)
        for i in range(_ncached):
            _release(_cache[i].raw)
        _ncached = 0
        _cached_bytes = 0
        PyThread_release_lock(_lock)
