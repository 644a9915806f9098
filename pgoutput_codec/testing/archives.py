"""Synthetic archives of many tables, in exact pgoutput wire bytes, for tests and benchmarks.

:func:`many_tables` plans ``rows`` rows spread over ``tables`` tables (``public.t0000``,
``public.t0001``, …: row ``i`` goes to table ``i % tables``), all of one shape::

    id int8 (the key, replica identity default), n int4, s text, amount numeric(12,2),
    at timestamptz

then an update of a share of them (every column but the key new) and a delete of another
share (drawn from all rows: a row may be updated, then deleted). ``one_table=True`` puts
the very same changes in one table (``public.t0000``, the same ids): what many tables
cost against one table holding the same rows.

The messages are what PostgreSQL's pgoutput (protocol 1, text values) sends for these
changes: transactions of ``per_txn`` changes between Begin and Commit, a table's Relation
just before its first change. The payloads are built column by column with Arrow and
NumPy (no Python object per message), so an archive of millions of rows takes seconds:
:func:`big_table_archive` is that for one table of inserts.

The result is an archive as the project reads it: a ``pa.Table`` of ``seq`` (int64, the
arrival order), ``lsn`` (int64: the message's position; a Commit's commit LSN is its
``lsn``), ``xid`` (int64) and ``data`` (binary payload), and :func:`write_archive` writes one
as a directory of Parquet files. :meth:`ManyTables.committed` gives each table's rows after
the last commit, typed as the project types them (a copy's or a snapshot's rows).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import Begin, Commit, Relation, RelationColumn, encode_message

__all__ = ["ManyTables", "many_tables", "many_tables_archive", "big_table_archive", "write_archive",
           "table_name", "RELATION_ID", "COLUMNS", "SCHEMA"]

#: the relation id of table k is RELATION_ID + k
RELATION_ID = 16384
#: (name, type oid, type modifier) of every table's columns; the first is the key
COLUMNS = (("id", 20, -1), ("n", 23, -1), ("s", 25, -1), ("amount", 1700, ((12 << 16) | 2) + 4),
           ("at", 1184, -1))
#: the Arrow schema of a table's rows, as the project types these columns
SCHEMA = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("s", pa.string()),
                    ("amount", pa.decimal128(12, 2)), ("at", pa.timestamp("us", tz="UTC"))])
_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
_EMPTY = pa.scalar(b"", pa.binary())


def table_name(k: int, tables: int) -> str:
    """The qualified name of table ``k`` of ``tables`` (``public.t0007``)."""
    return f"public.t{k:0{max(4, len(str(tables - 1)))}d}"


# ---------------------------------------------------------------- the rows' values

def _values(ids: np.ndarray, gen: int) -> dict[str, pa.Array]:
    """Each column's values of rows ``ids`` at generation ``gen`` (0: inserted, 1:
    updated), as Python-typed Arrow arrays (None: SQL null)."""
    n_null = (ids % 13) == 5
    cents = (ids * 37 + gen * 11) % 10_000_000
    seconds = _EPOCH.timestamp() + ids + gen * 3600
    return {
        "id": pa.array(ids, pa.int64()),
        "n": pa.array(((ids * 7 + gen) % 1_000_000).astype(np.int32), pa.int32(), mask=n_null),
        "s": pc.binary_join_element_wise(pa.array(np.full(len(ids), "row ")),
                                         pc.cast(pa.array(ids), pa.string()),
                                         pa.array(np.full(len(ids), f" gen {gen}")), "").cast(pa.string()),
        "amount": pa.array(cents, pa.int64()),     # in cents
        "at": pa.array((seconds * 1_000_000).astype(np.int64), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
    }


def _texts(ids: np.ndarray, gen: int) -> list[pa.Array]:
    """Each column's values of rows ``ids`` in PostgreSQL's text output (binary, null for
    SQL null)."""
    v = _values(ids, gen)
    n = len(ids)
    cents = v["amount"]
    amount = pc.binary_join_element_wise(
        pc.cast(pc.divide(cents, 100), pa.string()), pa.array(np.full(n, ".")),
        pc.utf8_lpad(pc.cast(pc.subtract(cents, pc.multiply(pc.divide(cents, 100), 100)), pa.string()), 2, "0"), "")
    at = pc.binary_join_element_wise(
        # (the zone-less cast prints the same digits as the UTC one, many times faster)
        pc.cast(v["at"].cast(pa.timestamp("s", tz="UTC")).cast(pa.timestamp("s")), pa.string()),
        pa.array(np.full(n, "+00")), "")
    out = [pc.cast(v["id"], pa.string()), pc.cast(v["n"], pa.string()), v["s"], amount, at]
    return [a.cast(pa.binary()) for a in out]


def _typed(ids: np.ndarray, gen: int) -> pa.Table:
    v = _values(ids, gen)
    unscaled = np.zeros((len(ids), 2), np.int64)      # little-endian 128-bit: cents, then the sign word (+)
    unscaled[:, 0] = v["amount"].to_numpy()
    v["amount"] = pa.Array.from_buffers(pa.decimal128(12, 2), len(ids), [None, pa.py_buffer(unscaled.tobytes())])
    return pa.Table.from_arrays([v[f.name].cast(f.type) for f in SCHEMA], schema=SCHEMA)


# ---------------------------------------------------------------- wire bytes

def _be(values, width: int) -> pa.Array:
    """Big-endian ``width``-byte integers as binary values."""
    a = np.asarray(values).astype(f">u{width}")
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(a), [None, pa.py_buffer(a.tobytes())])
    return fixed.cast(pa.binary())


def _const(b: bytes, n: int) -> pa.Array:
    return pa.array([b], pa.binary()).take(pa.array(np.zeros(n, np.int64)))


def _cell(text: pa.Array) -> pa.Array:
    """TupleData cells: ``t`` + length + the text, ``n`` for null."""
    n = len(text)
    lengths = pc.fill_null(pc.binary_length(text), 0).to_numpy(zero_copy_only=False)
    full = pc.binary_join_element_wise(_const(b"t", n), _be(lengths, 4), text, _EMPTY)
    if not text.null_count:
        return full
    return pc.if_else(pc.is_valid(text), full, _const(b"n", n))


def _changes(kind: bytes, ids: np.ndarray, tables: np.ndarray, gen: int) -> pa.Array:
    """Insert (``I``, new tuple ``N``), Update (``U``, ``N``) or Delete (``D``, key tuple
    ``K``: the key, every other column null) payloads of rows ``ids`` in tables ``tables``."""
    n = len(ids)
    texts = _texts(ids, gen)
    if kind == b"D":
        cells = [_cell(texts[0])] + [_const(b"n", n)] * (len(COLUMNS) - 1)
        tag = b"K"
    else:
        cells = [_cell(t) for t in texts]
        tag = b"N"
    head = _const(kind, n), _be(RELATION_ID + tables, 4), _const(tag + len(COLUMNS).to_bytes(2, "big"), n)
    return pc.binary_join_element_wise(*head, *cells, _EMPTY)


def _relation(k: int, tables: int) -> bytes:
    schema, name = table_name(k, tables).split(".")
    cols = tuple(RelationColumn(1 if j == 0 else 0, c, oid, mod) for j, (c, oid, mod) in enumerate(COLUMNS))
    return encode_message(Relation(relation_id=RELATION_ID + k, namespace=schema, relation_name=name,
                                   replica_identity="d", columns=cols))


# ---------------------------------------------------------------- the plan

@dataclass
class ManyTables:
    """The changes :func:`many_tables` planned: ``archive`` (the pa.Table), ``names``
    (the tables' qualified names, sorted), ``change_rows`` ({name: its change rows:
    inserts + updates + deletes}) and ``committed()`` (its rows after the last commit)."""

    tables: int
    rows: int
    one_table: bool
    updated_ids: np.ndarray
    deleted_ids: np.ndarray
    archive: pa.Table
    names: list[str] = field(default_factory=list)
    change_rows: dict[str, int] = field(default_factory=dict)

    def table_of(self, ids: np.ndarray) -> np.ndarray:
        return np.zeros(len(ids), np.int64) if self.one_table else ids % self.tables

    def committed(self) -> dict[str, pa.Table]:
        """{name: its rows after the last commit, in key order, typed as :data:`SCHEMA`}."""
        ids = np.arange(self.rows, dtype=np.int64)
        live = ~np.isin(ids, self.deleted_ids)
        upd = np.isin(ids, self.updated_ids)
        rows = pa.concat_tables([_typed(ids[live & ~upd], 0), _typed(ids[live & upd], 1)])
        k = self.table_of(rows.column("id").to_numpy())
        rows = rows.take(pa.array(np.lexsort((rows.column("id").to_numpy(), k))))
        bounds = np.concatenate([[0], np.cumsum(np.bincount(k, minlength=len(self.names)))])
        return {name: rows.slice(bounds[j], bounds[j + 1] - bounds[j]).combine_chunks()
                for j, name in enumerate(self.names)}


def many_tables(tables: int, rows: int, *, updated: float = 0.10, deleted: float = 0.05, one_table: bool = False,
                seed: int = 0, per_txn: int = 1000, first_lsn: int = 1 << 32, first_xid: int = 1000) -> ManyTables:
    """``rows`` inserted rows spread over ``tables`` tables (row ``i`` in table ``i %
    tables``), then ``updated`` of them updated and ``deleted`` of them deleted (shares,
    drawn with ``seed``), in transactions of ``per_txn`` changes; ``one_table``: the same
    changes in one table. See the module's docstring."""
    if tables < 1 or rows < 0 or per_txn < 1:
        raise ValueError("tables and per_txn must be >= 1, rows >= 0")
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    upd = rng.permutation(rng.choice(rows, int(rows * updated), replace=False)) if rows else ids[:0]
    dele = rng.permutation(rng.choice(rows, int(rows * deleted), replace=False)) if rows else ids[:0]
    n_tables = 1 if one_table else tables
    plan = ManyTables(tables=n_tables, rows=rows, one_table=one_table, updated_ids=upd, deleted_ids=dele,
                      archive=None, names=[table_name(k, n_tables) for k in range(n_tables)])
    ops = [(b"I", ids, 0), (b"U", upd, 1), (b"D", dele, 1)]
    payloads = [_changes(kind, i, plan.table_of(i), gen) for kind, i, gen in ops]
    which = np.concatenate([plan.table_of(i) for _, i, _ in ops])
    counts = np.bincount(which, minlength=n_tables)
    plan.change_rows = {name: int(counts[k]) for k, name in enumerate(plan.names)}
    n_changes = len(which)
    # every message's place: (change ordinal, 0 Begin / 1 Relation / 2 change / 3 Commit)
    first = np.full(n_tables, -1, np.int64)
    seen, at_first = np.unique(which, return_index=True)
    first[seen] = at_first
    rel_tables = np.flatnonzero(first >= 0)
    n_txn = -(-n_changes // per_txn)
    begin_at = np.arange(n_txn, dtype=np.int64) * per_txn
    commit_at = np.minimum(begin_at + per_txn, n_changes) - 1
    at = np.concatenate([np.arange(n_changes, dtype=np.int64), first[rel_tables], begin_at, commit_at])
    sub = np.concatenate([np.full(n_changes, 2), np.full(len(rel_tables), 1), np.zeros(n_txn, np.int64),
                          np.full(n_txn, 3)])
    order = np.lexsort((sub, at))
    n = len(order)
    txn = at[order] // per_txn
    lsn = first_lsn + np.arange(n, dtype=np.int64) * 64
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    commit_lsn = lsn[pos[n_changes + len(rel_tables) + n_txn:]]
    ts = (int((_EPOCH - dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)).total_seconds()) * 1_000_000
          + np.arange(n_txn, dtype=np.int64) * 1000)
    xid = first_xid + np.arange(n_txn, dtype=np.int64)
    begins = [encode_message(Begin(final_lsn=int(c), commit_ts=int(t), xid=int(x)))
              for c, t, x in zip(commit_lsn, ts, xid, strict=True)]
    commits = [encode_message(Commit(commit_lsn=int(c), end_lsn=int(c) + 64, commit_ts=int(t)))
               for c, t in zip(commit_lsn, ts, strict=True)]
    data = pa.concat_arrays([*(p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in payloads), pa.array([_relation(int(k), n_tables) for k in rel_tables], pa.binary()),
                             pa.array(begins, pa.binary()), pa.array(commits, pa.binary())]).take(pa.array(order))
    plan.archive = pa.table({"seq": pa.array(np.arange(n, dtype=np.int64)), "lsn": pa.array(lsn),
                             "xid": pa.array(xid[txn]), "data": data})
    return plan


def many_tables_archive(tables: int, rows: int, **options) -> pa.Table:
    """:func:`many_tables`'s archive (the ``pa.Table``)."""
    return many_tables(tables, rows, **options).archive


def big_table_archive(rows: int, *, per_txn: int = 10_000, **options) -> pa.Table:
    """An archive of ``rows`` inserts into one table (``public.t0000``), nothing updated or
    deleted: a table of millions of rows in seconds."""
    return many_tables(1, rows, updated=0.0, deleted=0.0, per_txn=per_txn, **options).archive


def write_archive(archive: pa.Table, path, *, files: int = 4, row_group_size: int = 131_072) -> Path:
    """``archive`` written as directory ``path`` of ``files`` Parquet files (``part-0000.parquet``,
    …, in ``seq`` order); gives the path."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    n = len(archive)
    bounds = np.linspace(0, n, max(1, files) + 1, dtype=np.int64)
    for i in range(len(bounds) - 1):
        pq.write_table(archive.slice(bounds[i], bounds[i + 1] - bounds[i]), out / f"part-{i:04d}.parquet",
                       row_group_size=row_group_size)
    return out
