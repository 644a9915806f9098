"""Parse modes for malformed payloads, as Spark's own decoders (``from_avro``,
``from_protobuf``, the JSON/CSV readers) have them, and the counts that prove them.

- ``FAILFAST`` (default): the first malformed row raises :class:`MalformedPayloadError`
  naming the row's position in its Arrow batch, its order key (lsn/seq/xid, where the
  caller has them) and the decoder's error text, which carries the message type and the
  byte offset in the payload (``"Insert ('I') at byte 16: ..."``).
- ``PERMISSIVE``: the row is kept; its decoded fields are null, ``error`` holds the error
  text and ``_corrupt_record`` the raw payload bytes (null for a null payload).
- ``DROPMALFORMED`` (DataFrame functions only: a column function cannot drop rows): the
  row is dropped. Pass a ``pyspark.sql.Observation`` to count what was dropped.

In every mode, rows in = rows decoded + rows in error: the decoders return one result
per input (pgoutput) or an error record (openGauss) instead of skipping anything, and
the modes only decide what happens to rows whose ``error`` is set. The change decoders
count it for an ``observation``: each output batch of ``n`` rows gets one more row, null
but for the batch's input-row counts in two hidden columns; :func:`observe_counts` sums
them into the observation and drops those rows again.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..arrays import one_array
from ..errors import ArchiveOrderError, PgoutputDecodeError

__all__ = ["FAILFAST", "PERMISSIVE", "DROPMALFORMED", "MODES", "check_mode",
           "MalformedPayloadError", "failfast_error", "failfast_errors", "raise_first_error", "corrupt_records",
           "COUNT_FIELDS", "with_count_row", "observe_counts"]


FAILFAST = "FAILFAST"
PERMISSIVE = "PERMISSIVE"
DROPMALFORMED = "DROPMALFORMED"
MODES = (FAILFAST, PERMISSIVE, DROPMALFORMED)


class MalformedPayloadError(PgoutputDecodeError):
    """A malformed payload met in FAILFAST mode (raised inside a Spark task; the driver
    sees it inside a ``PythonException`` whose text contains this message)."""


def failfast_error(message: str) -> MalformedPayloadError:
    """The FAILFAST error of the DataFrame functions (``decode_changes``, pgoutput and
    openGauss): ``message`` says which row and what, this adds how to get past it."""
    return MalformedPayloadError(f"{message}. Parse mode: FAILFAST (use mode='PERMISSIVE' or "
                                 "'DROPMALFORMED' to keep or drop malformed rows)")


@contextmanager
def failfast_errors():
    """Inside: a decoder error (``PgoutputDecodeError``) becomes :func:`failfast_error`;
    one that already is, and an ``ArchiveOrderError``, pass as they are."""
    try:
        yield
    except (MalformedPayloadError, ArchiveOrderError):   # no parse mode gets past an archive's order
        raise
    except PgoutputDecodeError as e:
        raise failfast_error(str(e)) from e


def check_mode(mode: str, *, allowed=MODES) -> str:
    m = str(mode).upper()
    if m not in allowed:
        hint = ""
        if m == DROPMALFORMED:
            hint = " (a column function cannot drop rows: use decode_messages(df, mode='DROPMALFORMED'))"
        raise ValueError(f"mode must be one of {', '.join(allowed)}, got {mode!r}{hint}")
    return m


def _describe_key(keys: dict, i: int) -> str:
    parts = []
    for name, arr in keys.items():
        v = arr[i].as_py()
        if v is not None:
            parts.append(f"{name}={v}")
    return f" ({', '.join(parts)})" if parts else ""


def raise_first_error(error: pa.Array, keys: dict, *, what: str = "pgoutput payload",
                      row_of=None) -> None:
    """FAILFAST: raise for the first non-null ``error``; ``keys`` maps a name (lsn, seq,
    ...) to an array aligned with the input rows; ``row_of`` maps an error index to
    the input row (one-to-many decoders)."""
    if error.null_count == len(error):
        return
    i = int(pc.index(pc.is_valid(error), True).as_py())
    row = int(row_of[i]) if row_of is not None else i
    text = error[i].as_py()
    raise MalformedPayloadError(
        f"Malformed {what} in row {row} of the Arrow batch{_describe_key(keys, row)}: {text}. "
        "Parse mode: FAILFAST. To keep malformed rows (error text in `error`, raw bytes in "
        f"`{'_corrupt_record'}`) use mode='PERMISSIVE'; to drop them, decode_messages(..., "
        "mode='DROPMALFORMED')."
    )


def corrupt_records(payload: pa.Array, error: pa.Array, row_of=None) -> pa.Array:
    """The raw payload where ``error`` is set, else null (as ``binary``)."""
    if payload.type != pa.binary():
        payload = payload.cast(pa.binary())
    if row_of is not None:
        payload = payload.take(pa.array(np.asarray(row_of, dtype=np.int64)))
    if error.null_count == len(error):
        return pa.nulls(len(error), pa.binary())
    return pc.if_else(pc.is_valid(error), payload, pa.scalar(None, pa.binary()))


# --------------------------------------------------------------------------- counts of an observation

_ROWS_IN, _ROWS_ERR = "__rows_in", "__rows_err"

#: the hidden columns of the count rows
COUNT_FIELDS = [T.StructField(_ROWS_IN, T.LongType()), T.StructField(_ROWS_ERR, T.LongType())]


def with_count_row(cols: dict, n: int, rows_in: int, rows_in_error: int) -> dict:
    """``cols`` (name -> array of ``n`` rows) plus the count row."""
    cols = {k: pa.concat_arrays([one_array(v), pa.nulls(1, one_array(v).type)]) for k, v in cols.items()}
    cols[_ROWS_IN] = pa.array([None] * n + [rows_in], pa.int64())
    cols[_ROWS_ERR] = pa.array([None] * n + [rows_in_error], pa.int64())
    return cols


def observe_counts(out: DataFrame, observation) -> DataFrame:
    """``rows_in``, ``rows_decoded``, ``rows_in_error`` into ``observation`` (rows in =
    rows decoded + rows in error); the count rows dropped. Call after any sort: the sort's
    sampling job would run the metrics a second time."""
    out = out.observe(observation, F.coalesce(F.sum(_ROWS_IN), F.lit(0)).alias("rows_in"),
                      (F.coalesce(F.sum(_ROWS_IN), F.lit(0)) - F.coalesce(F.sum(_ROWS_ERR), F.lit(0)))
                      .alias("rows_decoded"),
                      F.coalesce(F.sum(_ROWS_ERR), F.lit(0)).alias("rows_in_error"))
    return out.filter(F.col(_ROWS_IN).isNull()).drop(_ROWS_IN, _ROWS_ERR)
