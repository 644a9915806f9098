"""Messages on Spark: column and DataFrame functions over the Cython decoders, for
pgoutput payloads and openGauss frames (``source=``).

Which Spark mechanism for what (and why; the figures: docs/benchmarks.md):

- ``from_pgoutput`` (column function): on PySpark >= 4.1 a struct of scalar
  ``arrow_udf`` calls, one per field, which decode each Arrow batch once between them
  (:func:`once_per_batch`): Spark's optimizer keeps only the calls a query reads and
  runs them in one Python node, so ``m.type`` costs the payload transfer plus one
  string column instead of 42 fields converted into Spark rows. The stream state is
  carried from batch to batch of a task.
- ``from_opengauss`` and SQL ``pgoutput_decode`` (one UDF each: a SQL function is one
  UDF, and an openGauss frame expands to a list): a scalar *iterator* UDF, so one Python
  call sees every Arrow batch of a partition and the stream state is carried from batch
  to batch. On PySpark >= 4.1 it is an ``arrow_udf`` (``Iterator[pa.Array] ->
  Iterator[pa.Array]``), no pandas at all.
  On 3.5 and 4.0 (no ``arrow_udf``) both are ``pandas_udf`` (``Iterator[pd.Series] ->
  Iterator[pd.DataFrame]``): the decoded columns are handed back as ``pd.ArrowDtype``
  columns, so the flat ones cross pandas without a copy, but Spark's own pandas→Arrow
  converter walks the nested ones (``columns``, ``old_tuple``, ``new_tuple``,
  ``relation_ids``) row by row in Python, which is the bulk of its cost. Prefer
  ``decode_messages`` there.
- ``decode_messages`` (DataFrame function, both sources): ``mapInArrow`` (PySpark >=
  3.3, so 3.5 and 4.x alike): Arrow record batches in and out, no pandas, no per-row
  Python; the only way to drop rows (DROPMALFORMED) or expand one frame into many
  records (openGauss) without a join, and it flattens the struct to columns: the
  cheapest way in, for bulk work.
- grouped ``applyInArrow`` and Arrow UDTFs are not used: nothing here needs a shuffle
  to one group, and a UDTF adds a lateral join where ``mapInArrow`` streams batches.

One decode per Arrow batch (:func:`once_per_batch`): Spark evaluates the Python UDFs of
one projection in one Python worker, batch by batch, each UDF called in turn with its
own arguments. When every field of a decoded row is its own UDF, the first call on a
batch decodes it and the others take their field from that result. The key is the
identity of the argument arrays (type, offset, length, buffer addresses): the calls on
one batch get the very same buffers. The last arguments are held next to the result, so
their memory cannot be reused by a later batch while their addresses are the key.

Stream state: R/Y/I/U/D/T/M carry a streaming xid only inside a Stream Start/Stop
block, and a Relation often parses both ways. A column function cannot know the state
before its first row; with ``in_stream=None`` it infers it like ``decode_batch`` does,
from the first row that decides it in the first Arrow batch of each partition (a
Stream Start/Stop, or an Insert/Update/Delete: in practice they parse one way only; so
a partition cut inside a stream block bigger than itself is read inside), then carries it
across the partition's batches (so rows must be in stream order within a partition,
as they are when reading an archive file). ``in_stream=True/False`` sets the state
before the first row of *every* partition (``False`` is right for slots without
``streaming``). Exact tracking across partition boundaries is ``decode_changes``'s job.
"""

from __future__ import annotations

from typing import Iterator, Tuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..archive import HEX_ERROR, hex_to_binary
from ..arrays import one_array
from ..pgoutput.batch import decode_batch_with_state
from ..opengauss import STYLES, record_positions
from ..opengauss import decode_batch as og_decode_batch
from ..opengauss.schema import RECORD_STRUCT
from ..schema import MESSAGE_STRUCT
from . import types as ST
from .modes import DROPMALFORMED, FAILFAST, PERMISSIVE, check_mode, corrupt_records, raise_first_error
from .shipping import check_workers

__all__ = [
    "from_pgoutput", "decode_messages", "from_opengauss", "opengauss_messages", "pgoutput_udf", "opengauss_udf",
    "message_fields", "MessagesMapper", "HAS_ARROW_UDF", "DEFAULT_KEEP", "SOURCES", "check_source",
    "once_per_batch",
]


# --------------------------------------------------------------------------- one decode per Arrow batch

#: (key, the argument arrays held, result) of the last batch computed in this worker
_LAST = [None, None, None]


def _identity_of(arr) -> tuple | None:
    if arr is None:
        return None
    return (arr.type.id, arr.offset, len(arr), *(b.address if b is not None else 0 for b in arr.buffers()))


def once_per_batch(params, arrays: tuple, compute):
    """``compute()`` once for these argument ``arrays`` and decoder ``params`` (hashable);
    the same result for every later call with the same arrays and params."""
    key = (params, *(_identity_of(a) for a in arrays))
    if _LAST[0] == key:
        return _LAST[2]
    out = compute()
    _LAST[:] = [key, arrays, out]
    return out


#: ``pyspark.sql.functions.arrow_udf`` exists (PySpark >= 4.1)
HAS_ARROW_UDF = hasattr(F, "arrow_udf")

#: the sources of the functions that take one (``source=``): pgoutput payloads, openGauss frames
SOURCES = ("pgoutput", "opengauss")

#: columns kept by default next to the decoded ones (when the DataFrame has them)
DEFAULT_KEEP = ("lsn", "xid", "seq")

_PAYLOAD = "__pgoutput_payload"
_ENVELOPES = ("auto", "none", "xlogdata")


def check_source(source: str) -> str:
    """``source``, one of :data:`SOURCES`; else a ValueError."""
    if source not in SOURCES:
        raise ValueError(f"source must be 'pgoutput' or 'opengauss', got {source!r}")
    return source


def _check_envelope(envelope):
    if envelope not in _ENVELOPES:
        raise ValueError(f"envelope must be one of {_ENVELOPES}, got {envelope!r}")
    return envelope


# --------------------------------------------------------------------------- decoding core
# Shared by the UDFs, mapInArrow functions and the data source: Arrow in, Arrow out.

def decode_pgoutput_arrays(payload: pa.Array, keys: dict, *, envelope: str, state, mode: str,
                           hex_text: bool = False):
    """Decode one Arrow batch of payloads. Returns (message field arrays + ``_corrupt_record``
    as a list in ``MESSAGE_TYPE`` order, the ``error`` array, the stream state after it).
    FAILFAST raises :class:`~.modes.MalformedPayloadError` on the first bad row."""
    payload = one_array(payload)
    raw = payload
    bad = None
    if hex_text:
        payload, bad = hex_to_binary(payload)
        if not pc.any(bad).as_py():
            bad = None
    # one thread: Spark runs a task per core already
    out, now = decode_batch_with_state(payload, envelope=envelope, in_stream=state, workers=1)
    fields = out.flatten()
    err_idx = MESSAGE_STRUCT.get_field_index("error")
    if bad is not None:
        fields[err_idx] = pc.if_else(bad, pa.scalar(HEX_ERROR), fields[err_idx])
    error = fields[err_idx]
    if mode == FAILFAST:
        raise_first_error(error, keys)
    fields.append(corrupt_records(raw if hex_text else payload, error))
    return fields, error, now


def _key_arrays(batch: pa.RecordBatch, names) -> dict:
    return {n: batch.column(i) for i, n in enumerate(batch.schema.names) if n in names}


# --------------------------------------------------------------------------- column UDFs

def _struct_for_spark(fields, spark_type: T.StructType) -> pa.StructArray:
    target = ST.arrow_type_for(spark_type)
    arrays = [ST.to_spark_arrow(a, target.field(i).type) for i, a in enumerate(fields)]
    return pa.StructArray.from_arrays(arrays, fields=list(target))


def _to_pandas(result: pa.Array):
    # pd.ArrowDtype: flat columns cross pandas zero-copy (no Decimal/str objects, no
    # float64 for nullable ints, no ns overflow for far timestamps).
    # Nested columns stay plain objects: Spark's converter walks them and wants None, not pd.NA.
    if isinstance(result, pa.StructArray):
        return pd.DataFrame({result.type.field(i).name: _column_to_pandas(result.field(i))
                             for i in range(result.type.num_fields)})
    return result.to_pandas()


def _column_to_pandas(arr):
    if pa.types.is_nested(arr.type):
        return arr.to_pandas()
    return arr.to_pandas(types_mapper=pd.ArrowDtype)


def _from_pandas(series) -> pa.Array:
    arr = pa.Array.from_pandas(series)
    if pa.types.is_null(arr.type):
        arr = arr.cast(pa.binary())
    return arr


def _column_udf(decode_one, return_type: T.DataType, key_name, impl=None):
    """Iterator UDF over (payload[, key]) that calls ``decode_one(payload, keys, state)
    -> (pa.Array, state)`` per Arrow batch. ``impl``: "arrow", "pandas" or None (best)."""
    impl = impl or ("arrow" if HAS_ARROW_UDF else "pandas")
    if impl == "arrow":
        if key_name is None:
            def run(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
                state = None
                for payload in batches:
                    res, state = decode_one(payload, {}, state)
                    yield res
        else:
            def run(batches: Iterator[Tuple[pa.Array, pa.Array]]) -> Iterator[pa.Array]:
                state = None
                for payload, key in batches:
                    res, state = decode_one(payload, {key_name: key}, state)
                    yield res
        return F.arrow_udf(run, return_type)
    if impl != "pandas":
        raise ValueError(f"impl must be 'arrow' or 'pandas', got {impl!r}")
    if key_name is None:
        def prun(batches: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
            state = None
            for payload in batches:
                res, state = decode_one(_from_pandas(payload), {}, state)
                yield _to_pandas(res)
    else:
        def prun(batches: Iterator[Tuple[pd.Series, pd.Series]]) -> Iterator[pd.DataFrame]:
            state = None
            for payload, key in batches:
                res, state = decode_one(_from_pandas(payload), {key_name: pa.Array.from_pandas(key)}, state)
                yield _to_pandas(res)
    if not isinstance(return_type, T.StructType):
        prun.__annotations__["return"] = Iterator[pd.Series]
    return F.pandas_udf(prun, return_type)


def _message_subtype(fields) -> T.StructType:
    """The ``from_pgoutput`` struct with only ``fields`` (names of ``MESSAGE_TYPE``, in
    the order given); None: all of them."""
    if fields is None:
        return ST.MESSAGE_TYPE
    fields = [fields] if isinstance(fields, str) else list(fields)
    unknown = [f for f in fields if f not in ST.MESSAGE_TYPE.names]
    if unknown or not fields or len(set(fields)) != len(fields):
        raise ValueError(f"fields: {unknown or fields} — choose distinct names of {ST.MESSAGE_TYPE.names}")
    return T.StructType([ST.MESSAGE_TYPE[f] for f in fields])


class _PgoutputDecoder:
    """Picklable per-batch decoder for the column UDF (state threaded by the caller)."""

    def __init__(self, envelope, in_stream, mode, fields=None):
        self.envelope, self.in_stream, self.mode = envelope, in_stream, mode
        self.out_type = _message_subtype(fields)
        self.picks = [ST.MESSAGE_TYPE.names.index(f) for f in self.out_type.names]

    def fields(self, payload, keys, state):
        """(every message field array, the stream state after the batch); ``state`` None:
        the decoder's ``in_stream``."""
        fields, _err, now = decode_pgoutput_arrays(payload, keys, envelope=self.envelope,
                                                   state=self.in_stream if state is None else state,
                                                   mode=self.mode)
        return fields, now

    def __call__(self, payload, keys, state):
        fields, now = self.fields(payload, keys, state)
        return _struct_for_spark([fields[i] for i in self.picks], self.out_type), now


# ---- one scalar Arrow UDF per field (PySpark >= 4.1) ----------------------------------------
# Spark cannot look inside a UDF's result: every field of a struct-valued UDF crosses from
# Arrow into Spark rows for every row, used or not (docs/benchmarks.md). A
# struct *of UDF calls* is different: Spark's optimizer resolves ``m.type`` to the
# ``type`` call and drops the calls nothing reads, and it evaluates the calls left in one
# Python worker, sending the payload column once. So ``from_pgoutput`` is one scalar
# ``arrow_udf`` per field; the calls on one Arrow batch share one decode (``_decoded``,
# through :func:`once_per_batch`).

#: stream state after the last batch of the current task, per decoder parameters
_STATES: dict = {}


def _task_attempt():
    tc = TaskContext.get()
    return tc.taskAttemptId() if tc is not None else None


def _decoded(dec: "_PgoutputDecoder", payload, key, key_name):
    """The message field arrays of one Arrow batch, decoded once for all the field UDFs
    of the same decoder parameters evaluated on it. The stream state is carried from
    batch to batch of one task (a partition's batches reach one worker, in order)."""
    params = (dec.envelope, dec.in_stream, dec.mode, key_name)

    def decode():
        task = _task_attempt()
        fields, now = dec.fields(payload, {key_name: key} if key is not None else {}, _STATES.get((params, task)))
        if any(k[1] != task for k in _STATES):   # a new task: the old ones are over
            _STATES.clear()
        _STATES[(params, task)] = now
        return fields

    return once_per_batch(params, (payload, key), decode)


class _FieldOf:
    """Picklable scalar Arrow UDF body: field ``index`` of the decoded batch, as Spark's
    Arrow type ``target``."""

    def __init__(self, dec, index, target, key_name):
        self.dec, self.index, self.target, self.key_name = dec, index, target, key_name

    def __call__(self, payload, key=None):
        fields = _decoded(self.dec, payload, key, self.key_name)
        return ST.to_spark_arrow(fields[self.index], self.target)


#: the field UDFs made so far, per (decoder parameters, key name), for the SparkContext
#: they were made in (a UDF keeps its context's accumulator): making one pickles its body
#: and registers it with the JVM, for each of the 43 fields
_FIELD_UDFS: dict = {}


def _field_udfs(envelope, mode, in_stream, key_name) -> dict:
    # here, not at the top: a Spark Connect client alone (pyspark-client) has no SparkContext
    from pyspark import SparkContext
    sc = SparkContext._active_spark_context
    ident = (envelope, mode, in_stream, key_name)
    made = _FIELD_UDFS.get(ident)
    if made is None or made[0] is not sc:
        dec = _PgoutputDecoder(envelope, in_stream, mode)
        udfs = {f.name: F.arrow_udf(_FieldOf(dec, i, ST.arrow_type_for(f.dataType), key_name), f.dataType)
                for i, f in enumerate(ST.MESSAGE_TYPE.fields)}
        made = _FIELD_UDFS[ident] = (sc, udfs)
    return made[1]


def _field_struct(col, key, *, envelope, mode, in_stream, key_name, fields) -> Column:
    udfs = _field_udfs(_check_envelope(envelope), check_mode(mode, allowed=(FAILFAST, PERMISSIVE)), in_stream,
                       key_name)
    args = [col] if key is None else [col, key]
    return F.struct(*[udfs[name](*args).alias(name) for name in _message_subtype(fields).names])


def pgoutput_udf(*, envelope="auto", mode=FAILFAST, in_stream=None, key_name=None, impl=None, fields=None):
    """One UDF for the whole struct (an iterator UDF; for ``spark.udf.register``, where a
    function is one UDF: SQL ``pgoutput_decode``). :func:`from_pgoutput` on PySpark >= 4.1
    is a struct of per-field UDFs instead, which Spark prunes."""
    mode = check_mode(mode, allowed=(FAILFAST, PERMISSIVE))
    dec = _PgoutputDecoder(_check_envelope(envelope), in_stream, mode, fields)
    return _column_udf(dec, dec.out_type, key_name, impl)


def from_pgoutput(col, *, envelope: str = "auto", mode: str = FAILFAST, in_stream=None,
                  key=None, impl=None, fields=None) -> Column:
    """Decode a binary column of pgoutput payloads to a struct per row.

    The struct is ``schema.MESSAGE_STRUCT`` converted by :mod:`.types` (LSNs
    ``decimal(20,0)``, xids/OIDs ``bigint``) plus ``_corrupt_record`` (binary).
    ``mode``: "FAILFAST" (raise on the first malformed row, naming the row, its ``key``
    value if given, the message type and byte offset) or "PERMISSIVE" (fields null,
    ``error`` = text, ``_corrupt_record`` = the payload). ``key``: an optional column
    (e.g. the archive's lsn) named in FAILFAST errors. ``in_stream``: see the module
    docstring (inferred per partition when None). ``fields``: only these fields in the
    struct (names of ``MESSAGE_TYPE``, in the order given).

    ``impl``: "arrow" (the default on PySpark >= 4.1): the struct is built from one
    scalar ``arrow_udf`` per field, all decoding each Arrow batch once between them, so
    Spark evaluates only the fields a query reads (``m.type`` costs the transfer of the
    payloads plus one string column, not the 42 fields). "pandas" (the default before
    4.1): one iterator ``pandas_udf`` for the whole struct; every field returned crosses
    into Spark rows, so ``fields=`` is what keeps that cheap there."""
    check_workers()
    col = F.col(col) if isinstance(col, str) else col
    key_name = None if key is None else key if isinstance(key, str) else "key"
    key_col = None if key is None else (F.col(key) if isinstance(key, str) else key).cast("string")
    if (impl or ("arrow" if HAS_ARROW_UDF else "pandas")) == "arrow":
        return _field_struct(col, key_col, envelope=envelope, mode=mode, in_stream=in_stream,
                             key_name=key_name, fields=fields)
    udf = pgoutput_udf(envelope=envelope, mode=mode, in_stream=in_stream, key_name=key_name, impl=impl,
                       fields=fields)
    return udf(col) if key is None else udf(col, key_col)


# --------------------------------------------------------------------------- DataFrame level

def _keep_columns(df: DataFrame, keep, reserved) -> dict:
    """{source column: output name}. A kept column whose name is also a decoded field
    (``lsn``, ``xid``, ``type``...) is renamed ``source_<name>``; a dict chooses names.
    Columns of the default ``keep`` the DataFrame lacks are skipped."""
    names = set(df.columns)
    if isinstance(keep, dict):
        pairs = list(keep.items())
    else:
        pairs = [(k, f"source_{k}" if k in reserved else k) for k in (keep or ())]
    if keep is DEFAULT_KEEP:
        pairs = [p for p in pairs if p[0] in names]
    missing = [k for k, _ in pairs if k not in names]
    if missing:
        raise ValueError(f"keep: no column {missing} in the DataFrame (columns: {df.columns})")
    return dict(pairs)


def _observe(df: DataFrame, observation):
    if observation is None:
        return df
    return df.observe(observation, F.count(F.lit(1)).alias("rows"),
                      F.count(F.col("error")).alias("malformed"))


def message_fields(fields, mode: str = FAILFAST) -> list:
    """The message columns a reader gives: every ``MESSAGE_TYPE`` field (``fields`` None)
    or the chosen ones, in the order given. PERMISSIVE adds ``error`` and
    ``_corrupt_record`` when missing: they are its contract."""
    names = ST.MESSAGE_TYPE.names
    if fields is None:
        return list(names)
    chosen = [f.strip() for f in fields.split(",")] if isinstance(fields, str) else list(fields)
    chosen = [f for f in chosen if f]
    unknown = [f for f in chosen if f not in names]
    if unknown or not chosen:
        raise ValueError(f"fields: no message field {unknown} (fields: {', '.join(names)})" if unknown
                         else "fields: name at least one message field")
    if mode == PERMISSIVE:
        chosen += [f for f in ("error", ST.CORRUPT_RECORD) if f not in chosen]
    return list(dict.fromkeys(chosen))


class MessagesMapper:
    """Arrow batches of (payload, kept columns...) → (kept columns..., message fields...).
    ``fields``: the message fields to give (:func:`message_fields`); the others are
    decoded (the Cython decoder fills every field at once) but never converted or sent:
    for ``mapInArrow`` and the data source, whose output Spark never prunes."""

    def __init__(self, out_schema, keep_names, envelope, in_stream, mode, hex_text, fields=None):
        self.out_schema, self.keep_names = out_schema, keep_names
        self.envelope, self.in_stream, self.mode, self.hex_text = envelope, in_stream, mode, hex_text
        names = ST.MESSAGE_TYPE.names
        self.pick = [names.index(f) for f in (fields or names)]

    def __call__(self, batches):
        target = ST.arrow_schema_for(self.out_schema)
        state = self.in_stream
        for b in batches:
            keys = dict(zip(self.keep_names, b.columns[1:], strict=True))
            fields, error, state = decode_pgoutput_arrays(
                b.column(0), keys, envelope=self.envelope, state=state,
                mode=self.mode, hex_text=self.hex_text)
            cols = list(b.columns[1:]) + [fields[i] for i in self.pick]
            arrays = [ST.to_spark_arrow(c, target.field(i).type) for i, c in enumerate(cols)]
            rb = pa.RecordBatch.from_arrays(arrays, schema=target)
            if self.mode == DROPMALFORMED and error.null_count != len(error):
                rb = rb.filter(pc.is_null(error))
            yield rb


def decode_messages(df: DataFrame, *, payload: str = "data", keep=DEFAULT_KEEP, mode: str = FAILFAST,
                    envelope: str = "auto", in_stream=None, observation=None,
                    payload_format: str = "binary", fields=None, source: str = "pgoutput",
                    style: str | None = None) -> DataFrame:
    """Decode ``df[payload]`` into one column per public message field (``MESSAGE_STRUCT``
    order) plus ``_corrupt_record``, or only the ``fields`` named (a list or a
    comma-separated string; PERMISSIVE adds ``error`` and ``_corrupt_record``), after the
    ``keep`` columns (renamed ``source_<name>``
    when they clash with a message field: ``lsn`` → ``source_lsn``, ``xid`` →
    ``source_xid``). Runs as ``mapInArrow``; row order within a partition is kept.

    ``mode``: FAILFAST / PERMISSIVE / DROPMALFORMED (see :mod:`.modes`); the kept columns
    are named in FAILFAST errors. ``observation``: a ``pyspark.sql.Observation`` that
    receives ``rows`` (rows in) and ``malformed`` (rows in error, dropped or kept) after
    the first action. ``payload_format``: "binary", or "hex" for ``\\x…`` bytea text.

    ``source="opengauss"``: openGauss frames instead, one row per record (``style``:
    'b' by default, 't' or 'j'; the columns: :func:`opengauss_messages`); ``envelope``,
    ``in_stream``, ``payload_format`` and ``fields`` are pgoutput's."""
    check_workers(df.sparkSession)
    if check_source(source) == "opengauss":
        given = [name for name, v, default in (("envelope", envelope, "auto"), ("in_stream", in_stream, None),
                                               ("payload_format", payload_format, "binary"),
                                               ("fields", fields, None)) if v != default]
        if given:
            raise ValueError(f"{', '.join(given)}: options of source='pgoutput'")
        return _frame_records(df, payload=payload, style="b" if style is None else style, keep=keep, mode=mode,
                              observation=observation)
    if style is not None:
        raise ValueError("style: an option of source='opengauss'")
    mode = check_mode(mode)
    _check_envelope(envelope)
    if payload_format not in ("binary", "hex"):
        raise ValueError(f"payload_format must be 'binary' or 'hex', got {payload_format!r}")
    keep_map = _keep_columns(df, keep, set(ST.MESSAGE_FIELDS) | {ST.CORRUPT_RECORD})
    src = df.select(F.col(f"`{payload}`").alias(_PAYLOAD),
                    *[F.col(f"`{k}`").alias(v) for k, v in keep_map.items()])
    kept_fields = [f for f in src.schema.fields if f.name != _PAYLOAD]
    # With an observation, errors must reach observe(): drop after it, not inside.
    inner_mode = PERMISSIVE if (mode == DROPMALFORMED and observation is not None) else mode
    wanted = message_fields(fields, mode)
    inner = message_fields(fields, inner_mode)
    if observation is not None and "error" not in inner:
        inner.append("error")
    out_schema = T.StructType(kept_fields + [ST.MESSAGE_TYPE[f] for f in inner])
    mapper = MessagesMapper(out_schema, [f.name for f in kept_fields], envelope, in_stream,
                             inner_mode, payload_format == "hex", inner)
    out = _observe(src.mapInArrow(mapper, out_schema), observation)
    if mode == DROPMALFORMED and observation is not None:
        out = out.filter(F.col("error").isNull())
    if inner != wanted:
        out = out.select(*[f"`{f.name}`" for f in kept_fields], *wanted)
    return out


# --------------------------------------------------------------------------- openGauss

def _og_struct():
    return pa.struct([f for f in RECORD_STRUCT if f.name != "row"])


def _og_decode(payload, style, mode, keys):
    """Decode frames; returns (record table without ``row``, row index per record)."""
    payload = one_array(payload)
    table = og_decode_batch(payload, style, workers=1)      # (a task per core already)
    rows = table.column("row").to_numpy()
    if mode == FAILFAST:
        raise_first_error(one_array(table.column("error")), keys,
                          what="openGauss frame", row_of=rows)
    return table.drop_columns(["row"]), rows


class _OpenGaussColumnDecoder:
    def __init__(self, style, mode, spark_type):
        self.style, self.mode, self.spark_type = style, mode, spark_type

    def __call__(self, payload, keys, state):
        table, rows = _og_decode(payload, self.style, self.mode, keys)
        n = len(payload)
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
        struct = pa.StructArray.from_arrays([one_array(c) for c in table.columns],
                                            names=table.column_names)
        lists = pa.ListArray.from_arrays(pa.array(offsets), struct)
        return ST.to_spark_arrow(lists, ST.arrow_type_for(self.spark_type)), state


def opengauss_type() -> T.ArrayType:
    """Spark type of :func:`from_opengauss`: an array of record structs (no ``row``)."""
    return T.ArrayType(ST.spark_type(_og_struct()), containsNull=False)


def opengauss_udf(*, style="b", mode=FAILFAST, key_name=None, impl=None):
    mode = check_mode(mode, allowed=(FAILFAST, PERMISSIVE))
    rt = opengauss_type()
    return _column_udf(_OpenGaussColumnDecoder(style, mode, rt), rt, key_name, impl)


def from_opengauss(col, style: str = "b", *, mode: str = FAILFAST, key=None, impl=None) -> Column:
    """openGauss parallel-decoding frames → an array of records per row (one frame holds
    many records; ``F.explode`` it, or use :func:`opengauss_messages`). Error records
    stay in the array with ``error`` set in PERMISSIVE mode."""
    check_workers()
    col = F.col(col) if isinstance(col, str) else col
    if key is None:
        return opengauss_udf(style=style, mode=mode, impl=impl)(col)
    key_name = key if isinstance(key, str) else "key"
    key = F.col(key) if isinstance(key, str) else key
    return opengauss_udf(style=style, mode=mode, key_name=key_name, impl=impl)(col, key.cast("string"))


class _OpenGaussMapper:
    def __init__(self, out_schema, keep_names, style, mode):
        self.out_schema, self.keep_names, self.style, self.mode = out_schema, keep_names, style, mode

    def __call__(self, batches):
        target = ST.arrow_schema_for(self.out_schema)
        nkeep = len(self.keep_names)
        for b in batches:
            keys = dict(zip(self.keep_names, b.columns[1:], strict=True))
            table, rows = _og_decode(b.column(0), self.style, self.mode, keys)
            take = pa.array(rows, pa.int64())
            record = record_positions(rows)
            error = one_array(table.column("error"))
            cols = [c.take(take) for c in b.columns[1:]] + [record]
            cols += [one_array(c) for c in table.columns]
            cols.append(corrupt_records(b.column(0), error, row_of=rows))
            arrays = [ST.to_spark_arrow(c, target.field(i).type) for i, c in enumerate(cols)]
            rb = pa.RecordBatch.from_arrays(arrays, schema=target)
            if self.mode == DROPMALFORMED and error.null_count != len(error):
                rb = rb.filter(pc.is_null(rb.column(nkeep + 1 + table.column_names.index("error"))))
            yield rb


def opengauss_messages(df: DataFrame, *, payload: str = "data", style: str = "b", keep=DEFAULT_KEEP,
                       mode: str = FAILFAST, observation=None) -> DataFrame:
    """``decode_messages(df, source="opengauss", ...)``: openGauss frames → one row per
    record (``mapInArrow``: a batch frame expands to many rows). Columns: the ``keep``
    columns of the frame's row (clashing names get ``source_``), ``record`` (position of
    the record in its frame), the record fields of ``opengauss.schema.RECORD_SCHEMA``
    except ``row``, and ``_corrupt_record`` (the whole frame, on error records).
    Heartbeats are skipped as by ``decode_batch``."""
    return decode_messages(df, source="opengauss", payload=payload, style=style, keep=keep, mode=mode,
                           observation=observation)


def _frame_records(df: DataFrame, *, payload: str, style: str, keep, mode: str, observation) -> DataFrame:
    """The rows of :func:`opengauss_messages`."""
    mode = check_mode(mode)
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    rec = ST.spark_type(_og_struct())
    keep_map = _keep_columns(df, keep, set(rec.names) | {"record", ST.CORRUPT_RECORD})
    src = df.select(F.col(f"`{payload}`").alias(_PAYLOAD),
                    *[F.col(f"`{k}`").alias(v) for k, v in keep_map.items()])
    kept_fields = [f for f in src.schema.fields if f.name != _PAYLOAD]
    out_schema = T.StructType(kept_fields + [T.StructField("record", T.IntegerType(), False)]
                              + list(rec.fields) + [T.StructField(ST.CORRUPT_RECORD, T.BinaryType())])
    inner_mode = PERMISSIVE if (mode == DROPMALFORMED and observation is not None) else mode
    mapper = _OpenGaussMapper(out_schema, [f.name for f in kept_fields], style, inner_mode)
    out = _observe(src.mapInArrow(mapper, out_schema), observation)
    if mode == DROPMALFORMED and observation is not None:
        out = out.filter(F.col("error").isNull())
    return out
