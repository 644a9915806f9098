"""Reading a Delta copy whole, with deltalake's own Rust reader.

``DeltaTable.to_pyarrow_table()`` (and ``to_pyarrow_dataset()``) reads the Parquet files
through a Python file object on Arrow's IO threads. An asynchronous read can leave such
a handle for an IO thread to destroy while the interpreter finalizes; the thread then
needs the GIL, is ended by the finalizing interpreter across a ``noexcept`` frame, and
the process aborts (``terminate called without an active exception``, exit status 134)
after its work is done. deltalake's DataFusion scan (``QueryBuilder``) reads in Rust,
holds no Python object on any thread, and has given its whole result when the call
returns, so nothing of the read outlives it. It also applies what the Delta log says of
each file (partition values, deletion vectors) as the protocol wants."""

from __future__ import annotations

import os

import pyarrow as pa

__all__ = ["read_copy", "plain_type"]


def read_copy(copy, version: int | None = None) -> pa.Table:
    """Every row of the Delta table ``copy`` (a path, or a ``DeltaTable`` as loaded, at its
    version) as of its newest version or ``version``, in plain Arrow types (string, not
    string_view: :func:`plain_type`). Read by deltalake's Rust reader alone."""
    from deltalake import DeltaTable, QueryBuilder
    if isinstance(copy, DeltaTable):
        if version is not None:
            copy = DeltaTable(copy.table_uri, version=version)
    else:
        copy = DeltaTable(os.fspath(copy), version=version)
    reader = QueryBuilder().register("copy", copy).execute("SELECT * FROM copy")
    table = pa.RecordBatchReader.from_stream(reader).read_all()
    return table.cast(pa.schema([f.with_type(plain_type(f.type)) for f in table.schema]))


def plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` with the view types deltalake reads (string_view, list_view …) as the plain ones
    it writes."""
    if t in (pa.string_view(), pa.large_string()):
        return pa.string()
    if t in (pa.binary_view(), pa.large_binary()):
        return pa.binary()
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(plain_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(plain_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(plain_type(t.key_type), t.item_field.with_type(plain_type(t.item_type)))
    return t
