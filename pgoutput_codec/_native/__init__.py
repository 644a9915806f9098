"""Compiled buffers shared by every compiled module: the bounds-checked reader
(``reader.pxd``), Arrow buffer access (``arrowbuf.pxd``), the append-order builders
(``builders``), the memory pool (``memory``) and the gathers of list columns (``gather``)."""
