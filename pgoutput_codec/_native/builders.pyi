"""Stub of the compiled ``_builders`` module (C column builders; one Python function)."""

import pyarrow as pa

def nulls(n: int, typ: pa.DataType) -> pa.Array: ...
