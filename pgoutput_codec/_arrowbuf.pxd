# cython: language_level=3
"""Arrow buffers read in place: a pyarrow ``Buffer``'s address and one bit of a
validity bitmap. One definition for the modules that walk Arrow buffers (``_gather``,
``_convert``, ``opengauss/_shapes``); inline, so nothing of it is imported at run time."""

from libc.stdint cimport uint8_t, uintptr_t


cdef inline const uint8_t* buffer_address(buf):
    """The first byte of ``buf``; NULL where Arrow left the buffer out (``None``: no
    validity bitmap, a null array's data)."""
    return NULL if buf is None else <const uint8_t*><uintptr_t>buf.address


cdef inline bint bit(const uint8_t* bits, Py_ssize_t i) noexcept nogil:
    """Bit ``i`` of an Arrow bitmap (least significant bit first)."""
    return (bits[i >> 3] >> (i & 7)) & 1
