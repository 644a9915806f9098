# Stub of the compiled module _copyrows.pyx: COPY TO STDOUT streams -> pgoutput Insert payloads.
from typing import Iterable

import pyarrow as pa

BINARY_SIGNATURE: bytes

class CopyInserts:
    offset: int
    rows: int
    binary: bool
    last_key: tuple[bytes | None, ...] | None
    def __init__(self, relid: int, binary: bool, n_fields: int, kinds: bytes,
                 key_fields: Iterable[int] = ...) -> None: ...
    def feed(self, data: bytes | bytearray | memoryview, final: bool = False) -> tuple[pa.BinaryArray, int]: ...
