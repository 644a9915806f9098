# cython: language_level=3
from libc.stdint cimport uint8_t

from pgoutput_codec._native.reader cimport Reader

# The error text for a failed parse (``tag`` = message type being decoded, 0 if none).
cdef str error_text(Reader* r, uint8_t tag)
# A PgoutputDecodeError (or AmbiguousMessageError) instance for a failed parse.
cdef object make_error(Reader* r, uint8_t tag)
