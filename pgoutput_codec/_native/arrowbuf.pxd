# cython: language_level=3
"""Arrow buffers read in place: a pyarrow ``Buffer``'s address, one bit of a
validity bitmap, and the check that a binary array's offsets stay inside its buffers.
One definition for the modules that walk Arrow buffers (``pgoutput._batch``, ``gather``,
``_convert``, ``opengauss/_shapes``); inline, so nothing of it is imported at run time."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t

# pyarrow's type ids (arrow/type_fwd.h Type::type) of the 64-bit offset binaries
cdef enum:
    LARGE_STRING_ID = 34
    LARGE_BINARY_ID = 35


cdef inline const uint8_t* buffer_address(buf):
    """The first byte of ``buf``; NULL where Arrow left the buffer out (``None``: no
    validity bitmap, a null array's data)."""
    return NULL if buf is None else <const uint8_t*><uintptr_t>buf.address


cdef inline bint bit(const uint8_t* bits, Py_ssize_t i) noexcept nogil:
    """Bit ``i`` of an Arrow bitmap (least significant bit first)."""
    return (bits[i >> 3] >> (i & 7)) & 1


cdef inline int check_binary_offsets(arr) except -1:
    """Raise ValueError unless every offset of the binary/string array ``arr`` (either
    width) lies in its data buffer and none goes back. The readers trust the offsets
    to address memory, and an array made with ``from_buffers`` (or read from untrusted
    IPC) is not validated by pyarrow: one pass here, before any of them is followed."""
    cdef Py_ssize_t n = len(arr), off = arr.offset, i, width, data_size
    cdef const int32_t* o32
    cdef const int64_t* o64
    cdef int64_t prev, cur
    if n == 0:
        return 0
    bufs = arr.buffers()
    width = 8 if arr.type.id in (LARGE_BINARY_ID, LARGE_STRING_ID) else 4
    data_size = bufs[2].size if bufs[2] is not None else 0
    if bufs[1] is None or bufs[1].size < (off + n + 1) * width:
        raise ValueError(f"the {arr.type} array's offsets buffer is shorter than its {n} rows need")
    if bufs[0] is not None and bufs[0].size < (off + n + 7) // 8:
        raise ValueError(f"the {arr.type} array's validity bitmap is shorter than its {n} rows need")
    o32 = <const int32_t*><uintptr_t>bufs[1].address + off
    o64 = <const int64_t*><uintptr_t>bufs[1].address + off
    prev = o64[0] if width == 8 else o32[0]
    if prev < 0:
        raise ValueError(f"the {arr.type} array's first offset is negative ({prev})")
    for i in range(1, n + 1):
        cur = o64[i] if width == 8 else o32[i]
        if cur < prev:
            raise ValueError(f"the {arr.type} array's offsets go back at row {i - 1} "
                             f"({prev} then {cur})")
        prev = cur
    if prev > data_size:
        raise ValueError(f"the {arr.type} array's offsets pass the end of its data "
                         f"({prev} > {data_size} bytes)")
    return 0
