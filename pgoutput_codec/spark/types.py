"""Arrow types of the decoders → Spark SQL types: the one converter.

Every Spark schema of :mod:`pgoutput_codec.spark` is derived here from the Arrow schemas
(``schema.MESSAGE_STRUCT``, ``opengauss.schema.RECORD_STRUCT``), and every Arrow array a
UDF or ``mapInArrow`` hands back to Spark is cast here to the Arrow type Spark expects
for that Spark type (``to_spark_arrow``). Spark has no unsigned integers, so:

- uint8 → ShortType, uint16 → IntegerType, uint32 → LongType: exact, the next wider
  signed type (a relation OID above 2^31 stays positive).
- uint64 (LSNs) → ``DecimalType(20, 0)``: exact for the whole range. LongType would need
  either a silent two's-complement wrap for LSNs ≥ 2^63 or a per-value range check that
  turns valid (if rare) rows into errors; a decimal(20,0) sorts, compares, joins and
  does arithmetic correctly in SQL, and ``CAST(lsn AS BIGINT)`` is there for users who
  know their LSNs are small. The cost is a wider column (16 bytes, not 8).
- timestamp[us, UTC] → TimestampType; string/binary/bool/int → the obvious types;
  list → ArrayType, struct → StructType, map → MapType (nullability kept).
- dictionary (an enum: its labels) → its values' type: the values are the labels, the
  dictionary's order (an enum's sort order) is the archive catalog's, not Spark's;
- float16 (``halfvec``) → FloatType: Spark has no half float, a float32 holds each exactly;
- an extension type (``geoarrow.wkb``: PostGIS with one SRID) → its storage's type, the
  extension's name and metadata (the CRS) in the StructField's metadata
  (:func:`field_metadata`).
"""

from __future__ import annotations

import functools
import inspect
import json
import sys

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

from ..arrays import plain_lists
from ..schema import MESSAGE_STRUCT

__all__ = [
    "spark_type", "spark_field", "field_metadata", "to_spark_arrow", "EXTENSION_NAME", "EXTENSION_METADATA", "arrow_type_for", "arrow_schema_for",
    "CORRUPT_RECORD", "MESSAGE_TYPE", "MESSAGE_FIELDS", "message_type", "LSN_TYPE",
]

#: name of the field/column that holds the raw payload of a malformed row (PERMISSIVE)
CORRUPT_RECORD = "_corrupt_record"

LSN_TYPE = T.DecimalType(20, 0)


def spark_type(t: pa.DataType) -> T.DataType:
    """The Spark SQL type that holds every value of Arrow type ``t`` exactly."""
    if isinstance(t, pa.BaseExtensionType):
        return spark_type(t.storage_type)
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type)
    if pa.types.is_struct(t):
        return T.StructType([spark_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return T.MapType(spark_type(t.key_type), spark_type(t.item_type), valueContainsNull=t.item_field.nullable)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return T.ArrayType(spark_type(t.value_type), containsNull=t.value_field.nullable)
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return T.ShortType()
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return T.IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return T.LongType()
    if pa.types.is_uint64(t):
        return LSN_TYPE
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return T.StringType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return T.BinaryType()
    if pa.types.is_timestamp(t) and t.unit == "us":
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return T.FloatType()
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    raise TypeError(f"no Spark type for Arrow type {t}")


def spark_field(f: pa.Field) -> T.StructField:
    return T.StructField(f.name, spark_type(f.type), nullable=f.nullable, metadata=field_metadata(f.type))


#: StructField metadata keys of a column whose Arrow type is an extension type (or a list
#: of one): its name (``geoarrow.wkb``) and its serialized metadata (GeoArrow's JSON, the CRS)
EXTENSION_NAME = "ARROW:extension:name"
EXTENSION_METADATA = "ARROW:extension:metadata"


def field_metadata(t: pa.DataType) -> dict | None:
    """What Spark's field of Arrow type ``t`` keeps of an extension type (``t`` or its
    lists' items): its name, its metadata as text and, where that is JSON with a ``crs``,
    the CRS (``crs``: a string, or PROJJSON as JSON text). None for any other type."""
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        t = t.value_type
    if not isinstance(t, pa.BaseExtensionType):
        return None
    serialize = getattr(t, "__arrow_ext_serialize__", None)   # a type of pyarrow's own may have none
    raw = serialize() if serialize is not None else b""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    out = {EXTENSION_NAME: t.extension_name, EXTENSION_METADATA: text}
    try:
        crs = json.loads(text).get("crs") if text else None
    except (ValueError, AttributeError):
        crs = None
    if crs is not None:
        out["crs"] = crs if isinstance(crs, str) else json.dumps(crs, sort_keys=True)
    return out


@functools.cache
def _tz_kwargs(fn):
    # PySpark 4 wants the time zone of TimestampType spelled out; 3.5 always uses UTC.
    # The JVM reads any zone: the values are UTC microseconds either way.
    return {"timezone": "UTC"} if "timezone" in inspect.signature(fn).parameters else {}


def arrow_type_for(dt: T.DataType) -> pa.DataType:
    """The Arrow type Spark's Python workers exchange for Spark type ``dt``."""
    return to_arrow_type(dt, **_tz_kwargs(to_arrow_type))


def arrow_schema_for(schema: T.StructType) -> pa.Schema:
    return to_arrow_schema(schema, **_tz_kwargs(to_arrow_schema))


def offsets(arr: pa.Array) -> np.ndarray:
    """The int32 offsets of a string, binary or list array, its slice's own (as they are:
    the first need not be 0)."""
    if not len(arr):   # Arrow IPC may send an empty array's offsets as no bytes at all
        return np.zeros(1, np.int32)
    return np.frombuffer(arr.buffers()[1], np.int32, count=arr.offset + len(arr) + 1)[arr.offset:]


def to_spark_arrow(arr, target: pa.DataType):
    """Cast a decoder array to ``target`` (from :func:`arrow_type_for`).

    Every cast here widens (uint→wider int, uint64→decimal128(20,0), float16→float32),
    decodes (a dictionary's indices to its values, an extension array to its storage) or
    renames list and map items, at any depth, by Arrow's own kernels (no Python per
    value), so it cannot lose a value; ``safe=True`` makes any surprise an error."""
    if arr.type.equals(target):
        return arr
    arr = plain_lists(arr)      # Spark has no list views: each row its own copy
    if arr.type == pa.uint64() and target == _LSN_DECIMAL and arr.offset == 0 and sys.byteorder == "little":
        return _u64_to_decimal(arr)
    return arr.cast(target, safe=True)


_LSN_DECIMAL = pa.decimal128(20, 0)


def _u64_to_decimal(arr: pa.Array) -> pa.Array:
    """uint64 → decimal128(20,0) (every LSN column) written directly: a decimal128 is a
    little-endian int128, so the value and a zero high word, faster than ``cast``."""
    n = len(arr)
    words = np.zeros((n, 2), dtype=np.uint64)
    if n:
        words[:, 0] = np.frombuffer(arr.buffers()[1], dtype=np.uint64, count=n)
    return pa.Array.from_buffers(_LSN_DECIMAL, n, [arr.buffers()[0], pa.py_buffer(words)], null_count=arr.null_count)


def message_type(*, corrupt_record: bool = True) -> T.StructType:
    """The Spark struct of one decoded pgoutput message (``from_pgoutput``): the fields of
    ``schema.MESSAGE_STRUCT`` in order, plus ``_corrupt_record`` (the raw payload of a
    row that did not decode, PERMISSIVE mode) when ``corrupt_record``."""
    st = spark_type(MESSAGE_STRUCT)
    if corrupt_record:
        st = st.add(CORRUPT_RECORD, T.BinaryType(), nullable=True)
    return st


MESSAGE_TYPE = message_type()
#: public message field names, in schema order
MESSAGE_FIELDS = tuple(f.name for f in MESSAGE_STRUCT)
