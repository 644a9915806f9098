"""Archives of tables whose columns change (``ALTER TABLE … ALTER COLUMN … TYPE``, ``DROP
COLUMN``, ``ADD COLUMN``), as the messages a server sends: the shapes
tests/conformance/test_retyped_columns.py and test_dropped_columns.py see on PostgreSQL
15, 16 and 18, small enough for any test."""

from __future__ import annotations

import struct

from pgoutput_codec import Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn, Update

#: the table's rows after the messages: (id, i, code, word), word None where the server
#: rewrote a text value by ``length(word)``, which the archive never saw
RETYPED_FINAL = [(1, 1000, 11, None), (2, 5_000_000_000, 22, 2), (3, 3000, 33, None), (4, 6, 44, 4)]
#: ``f`` by id: a float8 ``k + 0.5`` rounds half to even into int4 (``rint``), as the
#: server's rewrite rounds it; an Arrow cast would refuse it, and the value be null
RETYPED_F = {1: 2, 2: 20, 3: 4, 4: 40}


def retyped(binary: bool) -> list:
    """What a server sends around ``ALTER TABLE … ALTER COLUMN id TYPE bigint, … i TYPE
    bigint, … code TYPE int USING code::int, … word TYPE int USING length(word), … f TYPE
    int``
    (tests/conformance/test_retyped_columns.py: PostgreSQL 15/16/18, text and binary):
    Inserts under the old types, then a new Relation with the next change."""
    def val(oid, v):
        if not binary or oid == 25:
            return TupleColumn("b" if binary else "t", str(v).encode())
        return TupleColumn("b", struct.pack({23: ">i", 20: ">q", 701: ">d"}[oid], v))

    def rel(types):
        return Relation(relation_id=16500, namespace="public", relation_name="retyped", replica_identity="d",
                        columns=tuple(RelationColumn(int(n == "id"), n, o, -1) for n, o in types))
    old = [("id", 23), ("i", 23), ("code", 25), ("word", 25), ("f", 701)]
    new = [("id", 20), ("i", 20), ("code", 23), ("word", 23), ("f", 23)]

    def row(types, *vs):
        return tuple(val(o, v) for (_, o), v in zip(types, vs, strict=True))
    txns = [[rel(old), *(Insert(relation_id=16500, new_tuple=row(old, k, k * 1000, str(k * 11), "w" * k, k + 0.5))
                         for k in (1, 2, 3))],
            [rel(new), Update(relation_id=16500, new_tuple=row(new, 2, 5_000_000_000, 22, 2, 20))],
            [Insert(relation_id=16500, new_tuple=row(new, 4, 6, 44, 4, 40))]]
    return _transactions(txns)


#: ``zoned``'s rows by id as the server left them under ``SET TimeZone =
#: 'America/New_York'`` (tests/conformance/test_retyped_columns.py's ``ZONED``): the
#: instants, in µs since 1970, of a time the fall back repeats (standard time), one the
#: spring forward skips (the offset before it), and a summer time
ZONED_FINAL = {1: 1_541_313_000_000_000, 2: 1_520_753_400_000_000, 3: 1_719_849_600_000_000}


def zoned(binary: bool) -> list:
    """What a server sends around ``ALTER COLUMN ts TYPE timestamptz`` in a session whose
    ``TimeZone`` is America/New_York: Inserts of wall-clock ``timestamp`` values, then a
    Relation of the new type with the next change."""
    walls = {1: (2018, 11, 4, 1, 30), 2: (2018, 3, 11, 2, 30), 3: (2024, 7, 1, 12, 0)}

    def ts(parts):
        if not binary:
            return TupleColumn("t", "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:00".format(*parts).encode())
        import datetime
        us = int((datetime.datetime(*parts) - datetime.datetime(2000, 1, 1)).total_seconds()) * 10**6
        return TupleColumn("b", struct.pack(">q", us))

    def key(k):
        return TupleColumn("b", struct.pack(">i", k)) if binary else TupleColumn("t", str(k).encode())

    def rel(oid):
        return Relation(relation_id=16600, namespace="public", relation_name="zoned", replica_identity="d",
                        columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "ts", oid, -1)))
    return _transactions([[rel(1114), *(Insert(relation_id=16600, new_tuple=(key(k), ts(walls[k])))
                                        for k in (1, 2, 3))],
                          [rel(1184), Insert(relation_id=16600, new_tuple=(key(4), TupleColumn("n", None)))]])


def _transactions(txns: list) -> list:
    """Each body as one transaction, committed at LSN 100, 110, …"""
    out = []
    for x, body in enumerate(txns):
        lsn = 100 + 10 * x
        out += [Begin(final_lsn=lsn, commit_ts=x, xid=800 + x), *body, Commit(commit_lsn=lsn, end_lsn=lsn + 1,
                                                                                commit_ts=x)]
    return out


#: the columns of the table as of each commit of :func:`dropped`
DROPPED_COLUMNS = [{"id", "a", "b", "c"}, {"id", "a", "c"}, {"id", "a", "c", "d"}, {"id", "c", "d"}, {"id", "c", "d"}]


def dropped() -> list:
    """What a server sends for test_dropped_columns.STEPS: Inserts under (id, a, b, c);
    ``DROP COLUMN b``, an Update; ``ADD COLUMN d``, an Insert; ``DROP COLUMN a``, a
    Delete; an Update. Each change after an ALTER comes with the Relation of then."""
    def rel(*cols):
        return Relation(relation_id=16510, namespace="public", relation_name="dropped", replica_identity="d",
                        columns=tuple(RelationColumn(int(n == "id"), n, o, -1) for n, o in cols))

    def tup(*vs):
        return tuple(TupleColumn("n", None) if v is None else TupleColumn("t", str(v).encode()) for v in vs)
    i, a, b, c, d = ("id", 23), ("a", 25), ("b", 23), ("c", 25), ("d", 23)
    return _transactions([
        [rel(i, a, b, c), *(Insert(relation_id=16510, new_tuple=tup(k, f"a{k}", 10 * k, f"c{k}")) for k in (1, 2, 3))],
        [rel(i, a, c), Update(relation_id=16510, new_tuple=tup(2, "a2", "x2"))],
        [rel(i, a, c, d), Insert(relation_id=16510, new_tuple=tup(4, "a4", "c4", 40))],
        [rel(i, c, d), Delete(relation_id=16510, old_kind="K", old_tuple=tup(3, None, None))],
        [Update(relation_id=16510, new_tuple=tup(1, "c1", 11))],
    ])


def readded() -> list:
    """What a server sends for test_dropped_columns.READDED: ``b`` dropped, an Update,
    ``b`` added again, an Insert; ``a`` dropped and added in one statement (it comes
    back last), an Update; ``c`` dropped, a Delete; ``c`` added again as
    ``varchar(10)``, an Update."""
    def rel(*cols):
        return Relation(relation_id=16520, namespace="public", relation_name="readded", replica_identity="d",
                        columns=tuple(RelationColumn(int(n == "id"), n, o, m) for n, o, m in cols))

    def tup(*vs):
        return tuple(TupleColumn("n", None) if v is None else TupleColumn("t", str(v).encode()) for v in vs)
    i, a, b, c, cv = ("id", 23, -1), ("a", 25, -1), ("b", 23, -1), ("c", 25, -1), ("c", 1043, 14)
    return _transactions([
        [rel(i, a, b, c), *(Insert(relation_id=16520, new_tuple=tup(k, f"a{k}", 10 * k, f"c{k}")) for k in (1, 2, 3))],
        [rel(i, a, c), Update(relation_id=16520, new_tuple=tup(2, "a2", "x2"))],
        [rel(i, a, c, b), Insert(relation_id=16520, new_tuple=tup(4, "a4", "c4", 40))],
        [rel(i, c, b, a), Update(relation_id=16520, new_tuple=tup(3, "y3", None, None))],
        [rel(i, b, a), Delete(relation_id=16520, old_kind="K", old_tuple=tup(4, None, None))],
        [rel(i, b, a, cv), Update(relation_id=16520, new_tuple=tup(1, None, None, "c5"))],
    ])


#: the table after :func:`readded`, as the server has it: (b, a, c) by id
READDED_FINAL = {1: (None, None, "c5"), 2: (None, None, None), 3: (None, None, None)}


def defaulted() -> list:
    """What a server sends for test_dropped_columns.DEFAULTED: ``flag`` and ``n`` added
    with defaults, an Update, an Insert; ``at`` added, an Update; ``n`` dropped and added
    again as ``int``, a Delete."""
    def rel(*cols):
        return Relation(relation_id=16530, namespace="public", relation_name="defaulted", replica_identity="d",
                        columns=tuple(RelationColumn(int(n == "id"), n, o, m) for n, o, m in cols))

    def tup(*vs):
        return tuple(TupleColumn("n", None) if v is None else TupleColumn("t", str(v).encode()) for v in vs)
    i, a, flag, n, at, n2 = ("id", 23, -1), ("a", 25, -1), ("flag", 16, -1), ("n", 1700, ((6 << 16) | 2) + 4), \
        ("at", 1082, -1), ("n", 23, -1)
    return _transactions([
        [rel(i, a), *(Insert(relation_id=16530, new_tuple=tup(k, f"a{k}")) for k in (1, 2, 3))],
        [rel(i, a, flag, n), Update(relation_id=16530, new_tuple=tup(2, "x2", "t", "1.50"))],
        [Insert(relation_id=16530, new_tuple=tup(4, "a4", "t", "1.50"))],
        [rel(i, a, flag, n, at), Update(relation_id=16530, new_tuple=tup(3, "a3", "f", "1.50", "2024-02-29"))],
        [rel(i, a, flag, at, n2), Delete(relation_id=16530, old_kind="K", old_tuple=tup(4, None, None, None, None))],
    ])


#: test_dropped_columns.DEFAULTS, and the table after :func:`defaulted` with them, as the
#: server has it: (a, flag, at, n) by id
DEFAULTS = {"flag": True, "n": 9, "at": "2024-02-29"}
DEFAULTED_FINAL = {1: ("a1", True, "2024-02-29", 9), 2: ("x2", True, "2024-02-29", 9),
                   3: ("a3", False, "2024-02-29", 9)}


def said(rows: list) -> list:
    """Change or table rows (dicts) with null ``__special`` fields left out, in the images
    too: Spark's schema gives every retyped column one, the single process only where a
    value has a note."""
    def plain(v):
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items() if not (k.endswith("__special") and x is None)}
        return type(v)(plain(x) for x in v) if isinstance(v, (list, tuple)) else v
    return [plain(r) for r in rows]
