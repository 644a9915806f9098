# Stub of the compiled module _shapes.pyx: openGauss tuple shapes from the Arrow buffers.
import numpy as np
import numpy.typing as npt
import pyarrow as pa

def tuple_shapes(offsets: npt.ArrayLike, lengths: npt.ArrayLike, valid: npt.ArrayLike, vals: pa.StructArray,
                 hash_bits: int = 64) -> tuple[np.ndarray, np.ndarray]: ...
