"""The corpus the Spark change tests share: the single-process tests' archives (one
server version, every option set) written as several small Parquet files, and the
helpers that compare Spark's rows with one process's."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pgoutput_codec import (Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn,  # noqa: E402
                            Update, encode_message)
from pgoutput_codec import decode_changes as decode_changes_1  # noqa: E402
from pgoutput_codec.spark import HAS_ARROW_UDF  # noqa: E402
from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark.changerows import change_type  # noqa: E402
from pgoutput_codec.spark.tablerows import TIME_TYPE, conform, convert_values, table_schema  # noqa: E402
from pgoutput_codec.typecatalog import ARRAY_ELEM, with_type_names  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_single_changes", TESTS / "change_cases.py")
TC = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TC)   # the single-process tests' corpus helpers (typed server tables, gaps)

VERSION = "16.14"
OPTION_SETS = sorted({o for v, o in TC.SETS if v == VERSION})
#: decode_changes' pass 2: one UDF per field (PySpark >= 4.1, the default there in FAILFAST)
#: and mapInArrow (PERMISSIVE/DROPMALFORMED/observation, and PySpark 3.5/4.0)
CHANGE_IMPLS = ["fields", "map"] if HAS_ARROW_UDF else ["map"]
#: the session is a Spark Connect client (make test-connect): a time crosses as µs since midnight
CONNECT = os.environ.get("PGOUTPUT_CODEC_SPARK_CONNECT") == "1"
#: the marks of a case the Connect and PySpark 3.5 runs leave out: the same code as one they run
_SHARED = [pytest.mark.same_code_on_connect, pytest.mark.same_code_on_spark35]


def collect(df) -> pa.Table:
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()
    return pa.Table.from_batches(batches) if batches else ST.arrow_schema_for(df.schema).empty_table()


def as_spark(t: pa.Table) -> pa.Table:
    """Single-process change rows (+ commit_rank when present) cast to Spark's Arrow types."""
    target = ST.arrow_schema_for(change_type())
    names = [f.name for f in target if f.name in t.column_names]
    return pa.table({n: ST.to_spark_arrow(t.column(n).combine_chunks(), target.field(n).type) for n in names})


def write_files(table: pa.Table, directory: Path, files: int) -> list[str]:
    """The archive (arrival order) as ``files`` Parquet files part-0000…, small row groups."""
    directory.mkdir(parents=True, exist_ok=True)
    n = len(table)
    paths = []
    for i in range(files):
        a, b = n * i // files, n * (i + 1) // files
        p = directory / f"part-{i:04d}.parquet"
        pq.write_table(table.slice(a, b - a), p, row_group_size=50)
        paths.append(str(p))
    return paths


def archive(version, option_set):
    return TC.archive(version, option_set).select(["seq", "lsn", "xid", "data"])


def _conformed(t: pa.Table, cols, reg, raw=None) -> pa.Table:
    """A single-process/server table converted the way the Spark side types values: a
    column the catalog kept raw as a whole (arrays of mixed dimensionality) value by
    value from ``raw`` (name -> (kinds, data)), as the Spark side does. Array columns as
    deep as ``t``'s; one ``t`` keeps raw (arrays of several dimensions) raw, as Spark does."""
    ndims = {}
    for c in cols:
        typ = t.schema.field(c["name"]).type if c["name"] in t.column_names else None
        if typ is not None and pa.types.is_list(typ):
            ndims[c["name"]] = str(typ).count("list<")
        elif typ is not None and pa.types.is_binary(typ) and c["type_oid"] in ARRAY_ELEM:
            ndims[c["name"]] = frozenset({1, 2})
    reg = with_type_names(reg, [cols])
    st, plan = table_schema(cols, reg, ndims=ndims, time_type=None if CONNECT else TIME_TYPE)
    target = ST.arrow_schema_for(st)
    out = {}
    for name, at, _sp, oid, typmod in plan:
        if name not in t.column_names:
            continue
        v = t.column(name).combine_chunks()
        if isinstance(ndims.get(name), frozenset):
            out[name] = v
            continue
        if not v.type.equals(at):
            if raw is None:
                continue
            v, _ = convert_values(*raw[name], oid, typmod, reg, at)
        out[name] = conform(v, at, target.field(name).type)
    return pa.table(out)


def _same_typed_changes(got: pa.Table, one: pa.Table, cols: list, what) -> int:
    """Spark's ``table_changes`` against one process's, value for value after the
    documented mapping of Arrow types to Spark's (``_conformed``): the values compared."""
    got, one = got.sort_by("seq"), one.sort_by("seq")
    assert got.column("op").to_pylist() == one.column("op").to_pylist(), what
    checked = 0
    for side in ("before", "after"):
        g, o = got.column(side).combine_chunks(), one.column(side).combine_chunks()
        mine = {f.name: a for f, a in zip(g.type, g.flatten(), strict=True)}
        want = _conformed(pa.Table.from_arrays(o.flatten(), names=[f.name for f in o.type]), cols, None)
        for name in want.column_names:
            assert TC.same_values(pa.chunked_array([mine[name]]), want.column(name).cast(mine[name].type)), \
                (what, side, name)
            checked += len(want)
    return checked
#: the tables every source of change rows is typed for (the others: decode_changes'): every
#: type, FULL identity's old rows, unchanged TOAST
ALL_SOURCES = {"public.all_types", "public.rid_full", "public.toasty"}


def _toast_chains():
    """Rows moved by key changes (once, twice, then updated in place) while their TOAST
    value stays unchanged, and a new row under a key one of them left."""
    rel = Relation(relation_id=16400, namespace="public", relation_name="t", replica_identity="d",
                   columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)))

    def row(k, v):
        return (TupleColumn("t", str(k).encode()),
                TupleColumn("u", None) if v is None else TupleColumn("t", v.encode()))

    def up(old, new):
        return Update(relation_id=16400, old_kind="K" if old != new else None,
                      old_tuple=(TupleColumn("t", str(old).encode()), TupleColumn("n", None)) if old != new else None,
                      new_tuple=row(new, None))
    msgs = [Begin(final_lsn=1, commit_ts=0, xid=1), rel,
            Insert(relation_id=16400, new_tuple=row(1, "big")), Insert(relation_id=16400, new_tuple=row(2, "two")),
            Insert(relation_id=16400, new_tuple=row(3, "three")), Commit(commit_lsn=10, end_lsn=11, commit_ts=0),
            Begin(final_lsn=2, commit_ts=1, xid=2), up(1, 6), up(6, 6), up(2, 8), up(8, 9),
            Insert(relation_id=16400, new_tuple=row(2, "newtwo")), Commit(commit_lsn=20, end_lsn=21, commit_ts=1),
            Begin(final_lsn=3, commit_ts=2, xid=3), up(9, 9), up(2, 2),
            Delete(relation_id=16400, old_kind="K", old_tuple=(TupleColumn("t", b"3"), TupleColumn("n", None))),
            Commit(commit_lsn=30, end_lsn=31, commit_ts=2)]
    data = [encode_message(m) for m in msgs]
    return pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})


def _encoded(msgs) -> tuple:
    """(an archive of the messages, seq and data; its single-process change rows)."""
    data = [encode_message(m) for m in msgs]
    t = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
    return t, decode_changes_1(t)
