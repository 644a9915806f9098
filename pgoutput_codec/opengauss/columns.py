"""What openGauss DML records say about their table: the columns a record implies (names,
type OIDs and typmods, from the values sent or the type names of the text styles), the key
in force, and the ``columns``/``relation_version`` of the change rows built from them.
openGauss sends no Relation message; these stand in for it (see ``changes``)."""

from __future__ import annotations

import functools
import re

import pyarrow as pa
import pyarrow.compute as pc

from ..schema import CHANGE_FIELDS, relation_fingerprint
from ..typecatalog import ConversionError, convert_column, type_of_name

__all__ = ["OPENGAUSS_CHANGE_SCHEMA", "unquote", "column_types", "key_names", "parse_keys", "TableShapes",
           "declare_keys", "record_key", "record_columns", "relation_of", "change_row", "commit_timestamps"]

OPENGAUSS_CHANGE_SCHEMA = pa.schema([pa.field("xid", pa.uint64()) if f.name == "xid" else f for f in CHANGE_FIELDS])


def unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == '"' and name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name


def _align(tup, names):
    """A record's tuple as (kind, data) values in the table's column order."""
    if tup is None:
        return None
    by = {unquote(c["name"]): c for c in tup}
    vals = []
    for n in names:
        c = by.get(n)
        if c is None or (c["value"] is None and not c["unchanged_toast"]):
            vals.append({"kind": "n", "data": None})
        elif c["unchanged_toast"]:
            vals.append({"kind": "u", "data": None})
        else:
            vals.append({"kind": "t", "data": c["value"]})
    return vals


def column_types(tup) -> tuple:
    """A record tuple's columns as (name, type OID, typmod): the 'b' style sends the OID
    (no typmod); the text styles send ``format_type`` names, which give both
    (:func:`..typecatalog.type_of_name`: ``numeric(10,2)``, ``integer[]``…)."""
    out = []
    for c in tup:
        oid, typmod = c["type_oid"], -1
        if oid is None and c.get("type_name"):
            oid, typmod = type_of_name(c["type_name"])
        out.append((unquote(c["name"]), oid, typmod))
    return tuple(out)


def key_names(tup) -> list:
    """The column names an old tuple carries: the key it names."""
    return [unquote(c["name"]) for c in tup]


def parse_keys(keys) -> dict:
    """Declared table keys as {(schema, table): set of column names}, from a dict
    ``{"schema.table": [columns]}`` or the text ``"schema.table(col, col), other.t(col)"``
    (a data source option). Names as the records give them, without quotes."""
    if not keys:
        return {}
    if isinstance(keys, str):
        text, keys = keys, {}
        pos = 0
        for m in re.finditer(r"\s*([^(),]+?)\s*\(([^()]*)\)\s*(,|$)", text):
            if m.start() != pos:
                break
            keys[m.group(1)] = [c.strip() for c in m.group(2).split(",") if c.strip()]
            pos = m.end()
        if pos != len(text) or not keys:
            raise ValueError(f"keys: expected 'schema.table(col, ...), ...', got {text!r}")
    out = {}
    for name, cols in keys.items():
        schema, dot, table = name.partition(".")
        if not dot or not schema or not table:
            raise ValueError(f"keys: a table is named 'schema.table', got {name!r}")
        cols = [cols] if isinstance(cols, str) else list(cols)
        if not cols:
            raise ValueError(f"keys: no key column given for {name!r}")
        out[(unquote(schema), unquote(table))] = set(cols)
    return out


class TableShapes:
    """Each table's columns, learned from its DML records in arrival order by the rules
    of the module docstring (the newest new tuple names the columns; an old tuple does
    until then), and the declared keys (:meth:`declare`, checked against them). The one
    walk of both paths: the single-process decoder learns record by record; the Spark
    path learns each frame's records into a shape of its own (of record indices, the
    tuples fetched later) and the driver learns those shapes in frame order, as if each
    were one record (its columns as ``new`` when a new tuple named them, else as
    ``old``), which gives what one walk over every record would.

    What is learned is kept as given; ``columns_of`` turns the tuples that win into
    (name, type OID, typmod) columns when asked, once per table, not once per record."""

    def __init__(self, columns_of=None):
        self.columns = {}    # table -> (what names its columns, whether a new tuple named them)
        self._columns_of = columns_of or (lambda v: v)
        self.declared = {}   # table -> its declared key columns (a set)

    def learn(self, t, new=None, old=None) -> None:
        """One record's facts: ``new``/``old`` its tuples (None: the record has no such tuple)."""
        if new is not None:
            self.columns[t] = (new, True)
        elif old is not None and t not in self.columns:
            self.columns[t] = (old, False)

    def declare(self, declared: dict) -> None:
        """Declared keys (:func:`parse_keys`) of the tables learned, into ``declared``."""
        declare_keys(self.table_cols(), self.declared, declared)

    def table_cols(self) -> dict:
        return {t: self._columns_of(v) for t, (v, _) in self.columns.items()}


def declare_keys(table_cols: dict, key_cols: dict, declared: dict) -> None:
    """Put the declared keys (:func:`parse_keys`) in ``key_cols`` for the tables the input
    holds, checking that the table has those columns. Shared with the Spark path."""
    for t, cols in table_cols.items():
        want = declared.get((unquote(t[0] or ""), unquote(t[1] or "")))
        if want is None:
            continue
        names = [c[0] for c in cols]
        missing = sorted(want - set(names))
        if missing:
            raise ValueError(f"keys: {t[0]}.{t[1]} has no column {', '.join(map(repr, missing))} "
                             f"(its records name {', '.join(names)})")
        key_cols[t] = set(want)


def record_key(in_force, declared):
    """A DML record's key columns (a set): the table's declared key, else the key in
    force (module docstring: the record's own old tuple's :func:`key_names`, else the
    table's latest earlier old tuple's, else its first later one's; None: the table has
    no old tuple anywhere)."""
    return set(declared) if declared else set(in_force or ())


def record_columns(base, old_tuple) -> tuple:
    """A DML record's columns (name, type OID, typmod): ``base`` — its new tuple's
    :func:`column_types`, or for a record without one the version in force (module
    docstring; None: the table has no new tuple anywhere) — then the columns its old
    tuple names that ``base`` lacks, so that no value the record carries is dropped."""
    cols = tuple(base or ())
    if old_tuple:
        have = {c[0] for c in cols}
        cols += tuple(c for c in column_types(old_tuple) if c[0] not in have)
    return cols


@functools.lru_cache(maxsize=4096)
def relation_of(schema, table, cols: tuple, keys: frozenset):
    """The change rows' ``columns`` and ``relation_version`` of one column list: a few per
    table, so built once rather than once per record (the fingerprint hashes them all)."""
    columns = [dict(flags=1 if (n in keys or (keys and len(keys) >= len(cols))) else 0,
                    name=n, type_oid=o or 0, type_modifier=m) for n, o, m in cols]
    rel = dict(schema=schema, table=table, relation_id=None, replica_identity="", columns=columns)
    return columns, relation_fingerprint(rel)


def change_row(r: dict, seq: int, cols: tuple, keys) -> dict:
    """The change row of one DML record (without its transaction's commit facts), given
    its columns (:func:`record_columns`) and its key columns (:func:`record_key`): the
    rules' plain statement, which :func:`.rows.change_rows` follows a column at a time."""
    names = [c[0] for c in cols]
    full_old = bool(r["old_tuple"]) and len(r["old_tuple"]) >= len(names)
    columns, version = relation_of(r["schema"], r["table"], cols, frozenset(keys or ()))
    return dict(op=r["type"], seq=seq, lsn=r["lsn"], schema=r["schema"], table=r["table"], relation_id=None,
                columns=columns, relation_version=version,
                before_kind=None if r["old_tuple"] is None else ("O" if full_old else "K"),
                before=_align(r["old_tuple"], names), after=_align(r["new_tuple"], names), truncate_options=None)


def commit_timestamps(texts) -> pa.Array:
    """Commit times (``timestamptz`` text, a list or a string array) parsed."""
    texts = pa.array(texts, pa.string()) if not isinstance(texts, (pa.Array, pa.ChunkedArray)) else texts
    kinds = pc.if_else(pc.is_null(texts), "n", "t")
    data = pc.cast(texts, pa.binary())
    try:
        return convert_column(kinds, data, 1184).values   # timestamptz text form
    except ConversionError:   # an unparseable commit time is kept as null, not guessed
        return pa.nulls(len(texts), pa.timestamp("us", tz="UTC"))
