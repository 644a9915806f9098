# Stub of the compiled module keys.pyx: rows grouped by the bytes of their key.
import numpy as np
import numpy.typing as npt
import pyarrow as pa

def key_codes(data: pa.Array | pa.ChunkedArray, at: npt.ArrayLike) -> np.ndarray: ...
