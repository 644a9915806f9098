# Stub of the compiled module gather.pyx: whole-row take for nested change-row columns.
from typing import Callable

import numpy.typing as npt
import pyarrow as pa

def take_lists(arr: pa.ListArray | pa.ChunkedArray, indices: npt.ArrayLike) -> pa.ListArray: ...
def take_chunks(col: pa.ChunkedArray, idx: npt.ArrayLike,
                take: Callable[[pa.Array, npt.ArrayLike], pa.Array] | None = None) -> pa.ChunkedArray: ...
def take_table(table: pa.Table, indices: npt.ArrayLike) -> pa.Table: ...
