# Stub of the compiled module _batch.pyx: the hot path behind batch.decode_batch.
# envelope: 0 auto, 1 none, 2 xlogdata (batch._ENVELOPES); stream: 0 outside a Stream
# Start/Stop block, 1 inside (batch.decode_batch_with_state infers it).

import numpy as np
import numpy.typing as npt
import pyarrow as pa

def initial_stream_state(arr: pa.BinaryArray | pa.LargeBinaryArray, envelope: int, control: bool) -> bool | None: ...
def tags_of(arr: pa.BinaryArray | pa.LargeBinaryArray, envelope: int) -> npt.NDArray[np.uint8]: ...
def decode_chunk(
    arr: pa.BinaryArray | pa.LargeBinaryArray,
    envelope: int,
    stream: int,
    stream_rows: npt.ArrayLike | None = None,
) -> tuple[pa.StructArray, bool]: ...

MAX_PAYLOAD_BYTES: int
