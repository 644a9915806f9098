"""The pgoutput wire format: PostgreSQL's logical replication messages (``proto.c``) and the
replication envelope ('w' XLogData, 'k' keepalive) around them.

``messages`` (the message classes), ``_parse.pyx`` (one compiled parse function per
message) and its plain-Python twin ``_parse_py``, ``_decode.pyx`` / ``_decode_py``
(one payload), ``_batch.pyx`` + ``batch`` (a column of payloads to Arrow), ``encode``
(the inverse), ``_copyrows.pyx`` (a COPY stream to Insert payloads). The public names
are exported by :mod:`pgoutput_codec`.
"""
