# cython: language_level=3
"""C-level parse of one pgoutput payload (optionally inside a replication envelope).

``parse_payload`` fills a ``Parsed`` struct: fixed fields by value, strings and byte
strings as (offset, length) slices into the caller's buffer, tuple columns and relation
columns in a growable ``Scratch``. Nothing here touches Python objects, so the same
parse serves ``decode_message`` (objects) and ``decode_batch`` (Arrow buffers).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from pgoutput_codec._native.reader cimport Reader


cdef enum:
    STREAM_NO = 0       # messages carry no streaming xid
    STREAM_YES = 1      # R/Y/I/U/D/T/M carry the streaming xid
    STREAM_UNKNOWN = 2  # find the one reading that consumes the payload

cdef enum:
    ENV_AUTO = 0        # unwrap 'w'/'k' when the payload starts with one
    ENV_NONE = 1        # no envelope
    ENV_XLOGDATA = 2    # every payload must be 'w' or 'k'


cdef struct Slice:
    Py_ssize_t off
    Py_ssize_t len


cdef struct TupleCol:
    Py_ssize_t off      # value bytes (t/b); 0 for n/u
    int32_t len
    uint8_t kind        # 'n' 'u' 't' 'b'


cdef struct RelCol:
    Slice name
    uint32_t type_oid
    int32_t type_modifier
    uint8_t flags


cdef struct Scratch:
    TupleCol* cols
    Py_ssize_t ncols      # used
    Py_ssize_t cols_cap
    RelCol* rcols
    Py_ssize_t nrcols
    Py_ssize_t rcols_cap


cdef struct Parsed:
    uint8_t tag           # pgoutput tag, or 'k' for a keepalive
    # envelope ('w' unwrapped, or 'k')
    uint8_t env           # 0, 'w' or 'k'
    uint64_t wal_start
    uint64_t wal_end
    int64_t send_time
    uint8_t reply_requested
    # pgoutput fields (public names)
    bint has_xid          # xid present (always for B S c A b P K r p; streamed R Y I U D T M)
    uint32_t xid
    uint32_t subxid
    uint64_t final_lsn
    uint64_t commit_lsn
    uint64_t end_lsn
    int64_t commit_ts
    uint8_t flags
    uint64_t origin_lsn
    Slice origin_name
    uint32_t relation_id
    Slice namespace
    Slice relation_name
    uint8_t replica_identity
    uint32_t type_oid
    Slice type_name
    uint8_t old_kind      # 0 = no old tuple, 'K' or 'O'
    Py_ssize_t old_start  # range in Scratch.cols
    Py_ssize_t old_n
    Py_ssize_t new_start
    Py_ssize_t new_n
    uint8_t options
    Py_ssize_t nrels
    Py_ssize_t relids_off  # nrels big-endian UInt32 at this offset
    uint64_t lsn
    Slice prefix
    Slice content
    uint8_t first_segment
    bint has_abort
    uint64_t abort_lsn
    int64_t abort_ts
    uint64_t prepare_lsn
    int64_t prepare_ts
    Slice gid
    uint64_t prepare_end_lsn
    uint64_t rollback_end_lsn
    int64_t rollback_ts


cdef void scratch_init(Scratch* s) noexcept nogil
cdef void scratch_free(Scratch* s) noexcept nogil

# Parse one payload. ``stream`` is STREAM_NO/YES/UNKNOWN; ``envelope`` ENV_*.
# Returns 0, or -1 with the error recorded in ``r``.
cdef int parse_payload(Reader* r, Parsed* m, Scratch* s, int stream, int envelope) noexcept nogil

cdef uint32_t relid_at(const uint8_t* buf, Py_ssize_t off, Py_ssize_t i) noexcept nogil
