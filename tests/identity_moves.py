"""Tables whose REPLICA IDENTITY changes while the archive runs: the steps, as SQL for a
real server and as the pgoutput messages PostgreSQL sends for them.

Each step is its own transaction (autocommit). The table is ``ident_moves (id int
PRIMARY KEY, v text, u text NOT NULL)`` with unique indexes on ``(u, id)`` and ``(u)``, ``u``
stored out of line when long (``STORAGE EXTERNAL``). Under DEFAULT an old image names
``id``, under USING INDEX ``(id, u)`` ('K' tuples: the key columns, the others null),
under FULL the whole row ('O'); an Update sends its old key only when the key changed or
one of its columns is stored out of line, under FULL always, and a value it did not
change that is stored out of line as unchanged TOAST ('u'); the Relation is sent again
before the first change after each ``ALTER``. tests/conformance/test_identity_change.py checks that
:func:`messages` gives what the servers send, and uses the SQL; the Spark tests use the
messages.
"""

from __future__ import annotations

from pgoutput_codec import Begin, Commit, Delete, Insert, Relation, RelationColumn, Truncate, TupleColumn, Update

TABLE = "ident_moves"
NAMES = ("id", "v", "u")
#: a ``u`` this long is stored out of line (TOAST): the tuple passes ~2 kB
TOAST_LEN = 2100
FLAGS = {"default": (1, 0, 0), "full": (1, 1, 1), "index": (1, 0, 1), "index_u": (0, 0, 1)}
CODES = {"default": "d", "full": "f", "index": "i", "index_u": "i"}

def _long(c: str) -> str:
    """A ``u`` long enough to be stored out of line (distinct per ``c``)."""
    return c + "-" * TOAST_LEN


#: step lists by name: ("alter", identity), ("insert", (id, v, u), ...), ("delete", id),
#: ("update", id, {column: value}), ("truncate",)
SCENARIOS = {
    # DEFAULT → FULL → INDEX → DEFAULT: the newest key is narrower than every earlier one
    "ends_default": [
        ("insert", (1, "a", "x"), (2, "b", "y"), (3, "c", "z"), (4, "d", "w")),
        ("alter", "full"),
        ("delete", 1),                         # inserted under DEFAULT, deleted under FULL
        ("update", 2, {"v": "b2"}),
        ("insert", (5, "e", "v")),
        ("alter", "index"),
        ("delete", 2),                         # updated under FULL, deleted by (id, u)
        ("update", 4, {"u": "w2"}),            # a key change under the index
        ("alter", "default"),
        ("delete", 5),                         # inserted under FULL, deleted by id
        ("update", 3, {"id": 30}),             # a key change under DEFAULT
        ("insert", (6, "f", "u")),
    ],
    # FULL → DEFAULT → INDEX → FULL: changes under the earlier identities name their rows
    # by fewer columns than the newest key holds
    "ends_full": [
        ("alter", "full"),
        ("insert", (1, "a", "x"), (2, "b", "y"), (3, "c", "z"), (4, "d", "w"), (5, "e", "v")),
        ("alter", "default"),
        ("delete", 1),                         # inserted under FULL, deleted by id
        ("update", 2, {"v": "b2"}),            # no old key: the row's FULL key changes unsaid
        ("update", 3, {"id": 30}),
        ("alter", "index"),
        ("update", 4, {"u": "w2"}),
        ("delete", 5),
        ("update", 2, {"v": "b3"}),            # no old key again, under the index
        ("alter", "full"),
        ("delete", 30),
        ("update", 2, {"v": "b4"}),
        ("insert", (6, "f", "u")),
    ],
    # DEFAULT → USING INDEX (u): no column every identity holds; the changes sent under
    # DEFAULT name their rows by id alone
    "no_common_key": [
        ("insert", (1, "a", "x"), (2, "b", "y"), (3, "c", "z"), (4, "d", "w")),
        ("delete", 1),
        ("update", 2, {"v": "b2"}),
        ("update", 3, {"id": 30}),
        ("alter", "index_u"),
        ("update", 4, {"u": "w2"}),
        ("delete", 2),
        ("update", 30, {"v": "c2"}),
        ("insert", (5, "e", "v")),
    ],
    # no_common_key with long (TOAST) u values: an Update under DEFAULT that leaves u
    # alone sends it as unchanged TOAST, so the row's newest key (u) is not in the
    # change; the row is known only by id then, and the value from its earlier image
    "no_common_key_toast": [
        ("insert", (1, "a", _long("x")), (2, "b", _long("y")), (3, "c", "z"), (4, "d", _long("w")),
         (6, "f", "s")),
        ("update", 1, {"v": "a2"}),            # u unsaid under DEFAULT
        ("update", 1, {"v": "a3"}),            # and again: its last image did not say it either
        ("update", 4, {"u": _long("w2")}),     # u said: a new value
        ("update", 3, {"v": "c2"}),            # short u: sent inline
        ("update", 6, {"v": "f2"}),            # row 6's newest key (s), said inline,
        ("update", 6, {"u": "s2"}),            # then changed with no old key naming it
        ("update", 2, {"id": 20}),             # a key change under DEFAULT, u unsaid: the
        ("update", 20, {"v": "b2"}),           # row's images go on under id 20
        ("alter", "index_u"),
        ("update", 1, {"v": "a4"}),            # under u: the old key is sent (stored out of line)
        ("update", 20, {"v": "b3"}),
        ("delete", 4),
        ("update", 3, {"v": "c3"}),
        ("insert", (5, "e", _long("v"))),
    ],
    # truncated under DEFAULT, then FULL: every row change of a batch after a commit
    # before the Truncate is sent under FULL, but the Truncate was sent under DEFAULT, so
    # a copy made then is keyed by id (the random-archive test's seed 3779: net_changes
    # named rows by the FULL key, and an Update of v gave an upsert and a delete of one id)
    "truncated_then_full": [
        ("insert", (1, "a", "x"), (2, "b", _long("y"))),
        ("insert", (3, "c", "z")),
        ("update", 1, {"v": "a2"}),
        ("delete", 3),
        ("update", 2, {"id": 20}),
        ("truncate",),
        ("alter", "full"),
        ("insert", (4, "d", _long("w")), (5, "e", "v")),
        ("update", 4, {"v": "d2"}),            # u unsaid in the new row, whole in the old
        ("update", 5, {"u": "v2"}),
        ("delete", 5),
    ],
}


def sql_literal(v) -> str:
    return str(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'"


def values_sql(rows) -> str:
    """``VALUES (…), (…)`` of rows of ints and strings (tests/table_moves.py's too)."""
    return "VALUES " + ", ".join("(" + ", ".join(map(sql_literal, row)) + ")" for row in rows)


def sql(steps) -> list[str]:
    """The statements of ``steps``, after ``CREATE TABLE``/``CREATE INDEX``."""
    out = []
    for step in steps:
        kind = step[0]
        if kind == "alter":
            ident = {"default": "DEFAULT", "full": "FULL", "index": f"USING INDEX {TABLE}_u",
                     "index_u": f"USING INDEX {TABLE}_u1"}[step[1]]
            out.append(f"ALTER TABLE {TABLE} REPLICA IDENTITY {ident}")
        elif kind == "insert":
            out.append(f"INSERT INTO {TABLE} {values_sql(step[1:])}")
        elif kind == "delete":
            out.append(f"DELETE FROM {TABLE} WHERE id = {step[1]}")
        elif kind == "truncate":
            out.append(f"TRUNCATE {TABLE}")
        else:
            sets = ", ".join(f"{c} = {sql_literal(v)}" for c, v in step[2].items())
            out.append(f"UPDATE {TABLE} SET {sets} WHERE id = {step[1]}")
    return out


def create_sql() -> list[str]:
    return [f"CREATE TABLE {TABLE} (id int PRIMARY KEY, v text, u text NOT NULL)",
            f"CREATE UNIQUE INDEX {TABLE}_u ON {TABLE} (u, id)",
            f"CREATE UNIQUE INDEX {TABLE}_u1 ON {TABLE} (u)",
            f"ALTER TABLE {TABLE} ALTER COLUMN u SET STORAGE EXTERNAL"]


def _tup(row, keep=NAMES, unsaid=()):
    return tuple(TupleColumn("u", None) if n in unsaid else
                 TupleColumn("t", str(v).encode()) if n in keep else TupleColumn("n", None)
                 for n, v in zip(NAMES, row, strict=True))


def _out_of_line(v) -> bool:
    return isinstance(v, str) and len(v) >= TOAST_LEN


def messages(steps, relation_id: int = 16420, xid: int = 700, lsn: int = 100) -> tuple[list, list]:
    """(the messages a server sends for ``steps``, the table's final rows sorted)."""
    rows, ident, sent, out = {}, "default", None, []
    for step in steps:
        kind = step[0]
        if kind == "alter":
            ident = step[1]
            continue
        body = []
        if sent != ident:
            body.append(Relation(relation_id=relation_id, namespace="public", relation_name=TABLE,
                                 replica_identity=CODES[ident],
                                 columns=tuple(RelationColumn(f, n, o, -1) for f, n, o in
                                               zip(FLAGS[ident], NAMES, (23, 25, 25), strict=True))))
            sent = ident
        keys = [n for n, f in zip(NAMES, FLAGS[ident], strict=True) if f]
        if kind == "insert":
            for row in step[1:]:
                rows[row[0]] = row
                body.append(Insert(relation_id=relation_id, new_tuple=_tup(row)))
        elif kind == "truncate":
            rows.clear()
            body.append(Truncate(options=0, relation_ids=(relation_id,)))
        elif kind == "delete":
            old = rows.pop(step[1])
            body.append(Delete(relation_id=relation_id, old_kind="O" if ident == "full" else "K",
                               old_tuple=_tup(old, keys)))
        else:
            old = rows.pop(step[1])
            new = tuple(step[2].get(n, v) for n, v in zip(NAMES, old, strict=True))
            rows[new[0]] = new
            moved = any(old[NAMES.index(k)] != new[NAMES.index(k)] for k in keys)
            stored_out = any(_out_of_line(old[NAMES.index(k)]) for k in keys)
            old_kind = "O" if ident == "full" else ("K" if moved or stored_out else None)
            unsaid = [n for n, a, b in zip(NAMES, old, new, strict=True) if a == b and _out_of_line(a)]
            body.append(Update(relation_id=relation_id, old_kind=old_kind,
                               old_tuple=None if old_kind is None else _tup(old, keys),
                               new_tuple=_tup(new, unsaid=unsaid)))
        out += [Begin(final_lsn=lsn, commit_ts=xid, xid=xid), *body,
                Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=xid)]
        xid, lsn = xid + 1, lsn + 100
    return out, sorted(rows.values())


def og_frames(steps, frame_records: int = 0) -> list[bytes]:
    """The steps as openGauss parallel decoding sends them ('b' style): each transaction
    whole (Begin, its DML, Commit at its end LSN); an old tuple with the replica
    identity's columns only (``parallel_decode.cpp`` prints those), the whole row under
    FULL; no Relation (each record names its columns). One frame per transaction, or
    frames of ``frame_records`` records cut anywhere."""
    from pgoutput_codec.opengauss import Column, Record
    from pgoutput_codec.opengauss.encode import encode_frame
    oids = dict(zip(NAMES, (23, 25, 25), strict=True))

    def tup(row, keep=NAMES):
        return tuple(Column(n, oids[n], str(v).encode()) for n, v in zip(NAMES, row, strict=True) if n in keep)
    rows, ident, txns, lsn, xid = {}, "default", [], 100, 700
    for step in steps:
        kind = step[0]
        if kind == "alter":
            ident = step[1]
            continue
        if kind == "truncate":
            raise ValueError("openGauss parallel decoding sends no Truncate")
        keys = [n for n, f in zip(NAMES, FLAGS[ident], strict=True) if f]
        dml = []      # (op, new tuple, old tuple)
        if kind == "insert":
            for row in step[1:]:
                rows[row[0]] = row
                dml.append(("I", tup(row), None))
        elif kind == "delete":
            dml.append(("D", None, tup(rows.pop(step[1]), keys)))
        else:
            old = rows.pop(step[1])
            new = tuple(step[2].get(n, v) for n, v in zip(NAMES, old, strict=True))
            rows[new[0]] = new
            moved = any(old[NAMES.index(k)] != new[NAMES.index(k)] for k in keys)
            dml.append(("U", tup(new), tup(old, keys) if ident == "full" or moved else None))
        recs = [Record("B", lsn, csn=xid, first_lsn=lsn, xid=xid)]
        recs += [Record(op, lsn + 1 + i, schema="public", table=TABLE, new_tuple=new, old_tuple=old)
                 for i, (op, new, old) in enumerate(dml)]
        recs.append(Record("C", lsn + 50, xid=xid))
        txns.append(recs)
        lsn, xid = lsn + 100, xid + 1
    if not frame_records:
        return [encode_frame(t) for t in txns]
    flat = [r for t in txns for r in t]
    return [encode_frame(flat[i:i + frame_records]) for i in range(0, len(flat), frame_records)]
