"""Compiled buffers shared by every compiled module: the bounds-checked reader
(``reader.pxd``), Arrow buffer access (``arrowbuf.pxd``), the append-order builders
(``builders``), the memory pool (``memory``) and the gathers of list columns (``gather``);
and :data:`USING_EXTENSIONS`, whether the compiled modules are used at all.

The compiled decoders (``pgoutput/_parse.pyx``, ``pgoutput/_batch.pyx``,
``opengauss/_parse.pyx``, the type converters, ...) each have a plain-Python twin: the
readable reference of the format and the oracle the compiled code is tested against.
Setting the environment variable ``PGOUTPUT_CODEC_NO_EXTENSIONS`` (to any non-empty
value) before the package is imported selects the twins everywhere; the package then
imports and runs without a C compiler's output at all. Every module that picks between a
compiled module and its twin reads :data:`USING_EXTENSIONS` from here, so the wire
formats, the types and the transcoder can never disagree about it.
"""

from __future__ import annotations

import os

__all__ = ["USING_EXTENSIONS"]

#: False when ``PGOUTPUT_CODEC_NO_EXTENSIONS`` selects the plain-Python twins.
USING_EXTENSIONS = not os.environ.get("PGOUTPUT_CODEC_NO_EXTENSIONS")
