# cython: language_level=3
# Block cache for the Arrow buffers the decoders build (see memory.pyx for why).
cdef void* pool_malloc(size_t size) noexcept nogil
cdef void* pool_calloc(size_t size) noexcept nogil
cdef void* pool_realloc(void* p, size_t size) noexcept nogil
cdef void pool_free(void* p) noexcept nogil
