"""The type catalog an archive carries (:mod:`pgoutput_codec.typecatalog.catalog`), on Spark.

Where a DataFrame's catalog is found, on the driver, with no job:

- change rows carry it in the metadata of their ``columns`` field (the column lists name
  the types), under the key :data:`CATALOG_FIELD_KEY`, as JSON: ``decode_changes`` puts
  there the catalog of the files behind its DataFrame, the ``pgoutput`` data source (and
  its stream) the catalog of the archive's files. Spark keeps a field's metadata through
  projections, filters, joins and sorts, and writes it with the rows (Parquet, Delta), so
  change rows read back from a lake Spark wrote carry it still;
- else the files behind the DataFrame (``df.inputFiles()``): their Parquet footers
  (:data:`~pgoutput_codec.typecatalog.catalog.CATALOG_KEY`, as ``capture`` writes it, and
  the Arrow schema metadata of change rows one process wrote), read with pyarrow, no row.

A DataFrame with no file behind it and no such metadata (built in memory, or read through
a source that names no files) has no catalog: the caller passes ``registry=``.

:func:`spark_registry` is what every table function of :mod:`pgoutput_codec.spark` calls
first: the catalog's :class:`~pgoutput_codec.typecatalog.registry.TypeRegistry` under the
caller's ``registry`` (which wins OID by OID). The registry then travels to the executors
inside the picklable bodies of the functions' ``mapInArrow`` steps
(:class:`.tablerows.TableMapper`, :class:`.mirror.MirrorTables`, :class:`.snapshots.TableWriter`),
as a caller's registry always has.
"""

from __future__ import annotations

import threading
import urllib.parse
import warnings
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..typecatalog.catalog import CATALOG_KEY, Catalog
from ..typecatalog.registry import TypeRegistry

__all__ = ["CATALOG_FIELD", "CATALOG_FIELD_KEY", "CatalogWarning", "files_catalog", "dataframe_catalog",
           "spark_registry", "with_catalog", "catalog_field", "catalog_metadata"]

#: the change rows' field whose metadata carries the catalog
CATALOG_FIELD = "columns"
#: its key there (the catalog's JSON, a string)
CATALOG_FIELD_KEY = CATALOG_KEY.decode()


class CatalogWarning(UserWarning):
    """A file behind a DataFrame whose footer could not be read for its type catalog."""


# ---------------------------------------------------------------- footers

_FOOTERS: dict = {}      # (path, size, mtime) -> the footer's catalog JSON (b"": none)
_LOCK = threading.Lock()


def _local_or_uri(path: str):
    """(pyarrow filesystem, path in it) of a file a Spark DataFrame names (a Hadoop URI:
    ``file:``, ``s3a:``, ``hdfs:`` …, or a plain path)."""
    u = urllib.parse.urlparse(path)
    if u.scheme in ("", "file"):
        return fs.LocalFileSystem(), urllib.parse.unquote(u.path) if u.scheme else path
    if u.scheme in ("s3a", "s3n"):   # Hadoop's names of S3
        path = "s3" + path[len(u.scheme):]
    filesystem, inner = fs.FileSystem.from_uri(path)
    return filesystem, inner


def _footer(path: str, filesystem=None) -> bytes:
    """The catalog JSON of file ``path``'s footer (b"": none; not Parquet: none).
    ``filesystem``: the pyarrow filesystem ``path`` is in (None: ``path`` is a URI or a
    local path)."""
    filesystem, inner = _local_or_uri(path) if filesystem is None else (filesystem, path)
    info = filesystem.get_file_info(inner)
    key = (filesystem.type_name, path, info.size, info.mtime_ns)
    with _LOCK:
        got = _FOOTERS.get(key)
    if got is not None:
        return got
    try:
        with filesystem.open_input_file(inner) as f:
            meta = pq.read_schema(f).metadata or {}
    except pa.ArrowInvalid:   # not a Parquet file (a CSV archive, a text file): no footer
        meta = {}
    got = meta.get(CATALOG_KEY, b"")
    with _LOCK:
        if len(_FOOTERS) > 100_000:
            _FOOTERS.clear()
        _FOOTERS[key] = got
    return got


def files_catalog(files, filesystem=None) -> Catalog | None:
    """The catalogs in the footers of ``files`` merged (paths or URIs; ``filesystem``:
    the pyarrow filesystem they are paths in); None when none has one. A file whose footer cannot be read is named in a :class:`CatalogWarning` and
    left out (its types then type as a registry says, or as text); a catalog that is not
    one is a ValueError naming its file."""
    files = list(dict.fromkeys(files))
    if not files:
        return None

    def one(path):
        try:
            return path, _footer(path, filesystem), None
        except (OSError, pa.ArrowException) as e:
            return path, b"", e

    with ThreadPoolExecutor(min(8, len(files))) as pool:
        found = list(pool.map(one, files))
    failed = [(p, e) for p, _, e in found if e is not None]
    if failed:
        p, e = failed[0]
        more = f" (and {len(failed) - 1} more files)" if len(failed) > 1 else ""
        warnings.warn(CatalogWarning(f"{p}{more}: its type catalog was not read ({str(e).splitlines()[0]}): "
                                     "types only it records type as text unless registry= names them"),
                      stacklevel=3)
    raws = {}
    for path, raw, _ in found:
        if raw:
            raws.setdefault(raw, path)
    if not raws:
        return None
    versions = []
    for raw, path in raws.items():
        try:
            versions += Catalog.from_json(raw).versions
        except ValueError as e:
            raise ValueError(f"{path}: its type catalog ({CATALOG_FIELD_KEY}) is unreadable: {e}") from None
    return Catalog(versions)


# ---------------------------------------------------------------- DataFrames

def catalog_field(schema: T.StructType) -> Catalog | None:
    """The catalog a Spark schema carries in its ``columns`` field's metadata, or None."""
    if CATALOG_FIELD not in schema.names:
        return None
    raw = (schema[CATALOG_FIELD].metadata or {}).get(CATALOG_FIELD_KEY)
    if not raw:
        return None
    try:
        return Catalog.from_json(raw)
    except ValueError as e:
        raise ValueError(f"the {CATALOG_FIELD!r} column's type catalog ({CATALOG_FIELD_KEY}) is unreadable: "
                         f"{e}") from None


def dataframe_catalog(df: DataFrame) -> Catalog | None:
    """The catalog of ``df`` (change rows, or an archive's payloads): its ``columns``
    field's metadata, else the footers of the files behind it; None when neither says."""
    found = catalog_field(df.schema)
    if found is not None:
        return found
    return files_catalog(df.inputFiles())


def spark_registry(df: DataFrame, registry: TypeRegistry | None = None) -> TypeRegistry | None:
    """The registry to type ``df``'s change rows with: its catalog's
    (:func:`dataframe_catalog`) under ``registry`` (the caller's: it wins OID by OID);
    ``registry`` itself when ``df`` has no catalog."""
    cat = dataframe_catalog(df)
    if cat is None or not len(cat):
        return registry
    return cat.registry(over=registry)


def catalog_metadata(catalog: Catalog | None, metadata: dict | None = None) -> dict:
    """``metadata`` (a field's) with ``catalog``'s JSON under :data:`CATALOG_FIELD_KEY`."""
    out = dict(metadata or {})
    if catalog is not None and len(catalog):
        out[CATALOG_FIELD_KEY] = catalog.to_json()
    return out


def with_catalog(df: DataFrame, catalog: Catalog | None) -> DataFrame:
    """``df`` (change rows) with ``catalog`` in its ``columns`` field's metadata, merged
    with one it carries; ``df`` itself when there is none or it has no such field."""
    if catalog is None or not len(catalog) or CATALOG_FIELD not in df.columns:
        return df
    had = catalog_field(df.schema)
    if had is not None:
        if had == had.merge(catalog):
            return df
        catalog = had.merge(catalog)
    meta = catalog_metadata(catalog, df.schema[CATALOG_FIELD].metadata)
    return df.select(*[df[c].alias(c, metadata=meta) if c == CATALOG_FIELD else df[c] for c in df.columns])
