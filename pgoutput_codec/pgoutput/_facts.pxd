# cython: language_level=3
# Written by facts.write_declarations() from the table of pgoutput_codec/pgoutput/facts.py;
# tests/pgoutput/test_facts.py holds it equal to the table. Do not edit by hand.

from libc.stdint cimport uint8_t


cdef enum:
    TAG_BEGIN = 66  # 'B'
    TAG_COMMIT = 67  # 'C'
    TAG_ORIGIN = 79  # 'O'
    TAG_RELATION = 82  # 'R'
    TAG_TYPE = 89  # 'Y'
    TAG_INSERT = 73  # 'I'
    TAG_UPDATE = 85  # 'U'
    TAG_DELETE = 68  # 'D'
    TAG_TRUNCATE = 84  # 'T'
    TAG_LOGICAL_MESSAGE = 77  # 'M'
    TAG_STREAM_START = 83  # 'S'
    TAG_STREAM_STOP = 69  # 'E'
    TAG_STREAM_COMMIT = 99  # 'c'
    TAG_STREAM_ABORT = 65  # 'A'
    TAG_BEGIN_PREPARE = 98  # 'b'
    TAG_PREPARE = 80  # 'P'
    TAG_COMMIT_PREPARED = 75  # 'K'
    TAG_ROLLBACK_PREPARED = 114  # 'r'
    TAG_STREAM_PREPARE = 112  # 'p'
    TAG_XLOG_DATA = 119  # 'w'
    TAG_PRIMARY_KEEPALIVE = 107  # 'k'


# the messages that carry the streaming xid inside a stream block
cdef inline bint is_streamable(uint8_t t) noexcept nogil:
    return (t == TAG_RELATION
            or t == TAG_TYPE
            or t == TAG_INSERT
            or t == TAG_UPDATE
            or t == TAG_DELETE
            or t == TAG_TRUNCATE
            or t == TAG_LOGICAL_MESSAGE)
