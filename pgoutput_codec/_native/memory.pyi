# Stub of the compiled module memory.pyx (block cache of the decoders' output buffers).

def cache_info() -> tuple[int, int, int]:
    """(blocks cached, bytes cached, limit in bytes)."""

def cache_clear() -> None: ...

def mapped_blocks() -> bool:
    """Whether large output blocks are mapped as huge pages (``PGOUTPUT_CODEC_HUGE_PAGES=1``)."""

def malloc_tuned() -> bool:
    """Whether importing the codec set glibc's mmap/trim thresholds."""
