"""Tables dropped, created again, renamed and swapped while the archive runs: the steps,
as SQL for a real server and as the pgoutput messages PostgreSQL sends for them.

pgoutput sends nothing for ``CREATE``/``DROP``/``ALTER TABLE … RENAME``: a table is
known by the relation id of its Relation messages, and a name can pass from one
relation to another (a table dropped and created again; a full refresh that builds
``t_new`` beside ``t`` and swaps the names). The server's ``t`` is then only the last
relation's rows. Every table is ``(id int PRIMARY KEY, v text)``; each step is its own
transaction; the Relation is sent before a relation's first change and again after a
rename. tests/conformance/test_table_moves.py checks that :func:`messages` gives what
the servers send, and uses the SQL; the Spark tests use the messages.
"""

from __future__ import annotations

from identity_moves import sql_literal, values_sql

from pgoutput_codec import Begin, Commit, Delete, Insert, Relation, RelationColumn, TupleColumn, Update

NAME = "t_moves"          # the name every scenario asks for, as public.t_moves
NAMES = ("id", "v")

#: step lists by name: ("create", table), ("drop", table), ("rename", (old, new), ...)
#: (the renames of one transaction, in order), ("insert", table, (id, v), ...),
#: ("update", table, id, v), ("delete", table, id)
SCENARIOS = {
    # dropped and created again: the first relation's rows are not the table's
    "drop_recreate": [
        ("create", NAME),
        ("insert", NAME, (1, "a"), (2, "b")),
        ("drop", NAME),
        ("create", NAME),
        ("insert", NAME, (3, "c")),
        ("update", NAME, 3, "c2"),
    ],
    # a full refresh: a copy built beside the table takes its name in one transaction
    "swap": [
        ("create", NAME),
        ("insert", NAME, (1, "a"), (2, "b")),
        ("create", NAME + "_new"),
        ("insert", NAME + "_new", (5, "x"), (6, "y")),
        ("rename", (NAME, NAME + "_old"), (NAME + "_new", NAME)),
        ("update", NAME + "_old", 1, "a2"),        # the old table, changed under its new name
        ("drop", NAME + "_old"),
        ("insert", NAME, (7, "z")),
        ("delete", NAME, 5),
    ],
    # renamed into the name: the rows inserted under the old name are the table's
    "rename": [
        ("create", NAME + "_v1"),
        ("insert", NAME + "_v1", (1, "a"), (2, "b")),
        ("rename", (NAME + "_v1", NAME)),
        ("insert", NAME, (3, "c")),
        ("update", NAME, 2, "b2"),
    ],
    # renamed away, and an empty table takes the name: the name holds no rows
    "renamed_away": [
        ("create", NAME),
        ("insert", NAME, (1, "a")),
        ("rename", (NAME, NAME + "_arch")),
        ("create", NAME),
        ("insert", NAME + "_arch", (2, "b")),
    ],
    # three relations bear the name in turn: only the last one's rows are the table's
    "three_generations": [
        ("create", NAME),
        ("insert", NAME, (1, "a")),
        ("drop", NAME),
        ("create", NAME),
        ("insert", NAME, (2, "b"), (3, "c")),
        ("delete", NAME, 2),
        ("drop", NAME),
        ("create", NAME),
        ("insert", NAME, (4, "d")),
        ("update", NAME, 4, "d2"),
    ],
}


def sql(steps) -> list[str]:
    """The statements of ``steps``: one string per transaction (``;``-separated)."""
    out = []
    for step in steps:
        kind, t = step[0], step[1]
        if kind == "create":
            out.append(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
        elif kind == "drop":
            out.append(f"DROP TABLE {t}")
        elif kind == "rename":
            out.append("; ".join(f"ALTER TABLE {a} RENAME TO {b}" for a, b in step[1:]))
        elif kind == "insert":
            out.append(f"INSERT INTO {t} {values_sql(step[2:])}")
        elif kind == "update":
            out.append(f"UPDATE {t} SET v = {sql_literal(step[3])} WHERE id = {step[2]}")
        else:
            out.append(f"DELETE FROM {t} WHERE id = {step[2]}")
    return out


def tables(steps) -> list[str]:
    """Every name the steps use (to drop before and after)."""
    return sorted({t for s in steps for t in ((s[1],) if s[0] != "rename" else [n for p in s[1:] for n in p])})


def _tup(row):
    return tuple(TupleColumn("t", str(v).encode()) for v in row)


def messages(steps, first_relation_id: int = 16500, xid: int = 900, lsn: int = 100) -> tuple[list, dict]:
    """(the messages a server sends for ``steps``, {name: its final rows, sorted} of the
    tables that exist at the end)."""
    by_name = {}           # name -> relation id
    rows = {}              # relation id -> {id: row}
    sent = {}              # relation id -> the name its last Relation carried
    next_id, out = first_relation_id, []
    for step in steps:
        kind, t = step[0], step[1]
        if kind == "create":
            by_name[t], rows[next_id] = next_id, {}
            next_id += 100
            continue
        if kind == "drop":
            rows.pop(by_name.pop(t))
            continue
        if kind == "rename":
            for a, b in step[1:]:
                by_name[b] = by_name.pop(a)
            continue
        rid = by_name[t]
        body = []
        if sent.get(rid) != t:
            body.append(Relation(relation_id=rid, namespace="public", relation_name=t, replica_identity="d",
                                 columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1))))
            sent[rid] = t
        held = rows[rid]
        if kind == "insert":
            for row in step[2:]:
                held[row[0]] = row
                body.append(Insert(relation_id=rid, new_tuple=_tup(row)))
        elif kind == "update":
            held[step[2]] = (step[2], step[3])
            body.append(Update(relation_id=rid, old_kind=None, old_tuple=None, new_tuple=_tup(held[step[2]])))
        else:
            held.pop(step[2])
            body.append(Delete(relation_id=rid, old_kind="K",
                               old_tuple=(TupleColumn("t", str(step[2]).encode()), TupleColumn("n", None))))
        out += [Begin(final_lsn=lsn, commit_ts=xid, xid=xid), *body,
                Commit(commit_lsn=lsn, end_lsn=lsn + 1, commit_ts=xid)]
        xid, lsn = xid + 1, lsn + 100
    return out, {n: sorted(rows[r].values()) for n, r in by_name.items()}


def bearer_shown(steps, name: str = NAME) -> bool:
    """Whether a change has shown, by the end of ``steps``, which relation bears
    ``name`` now: it was changed under that name since it took it (a rename is sent
    only with the relation's next change), or no relation bears it."""
    by_name, shown = {}, set()
    for n, step in enumerate(steps):
        if step[0] == "create":
            by_name[step[1]] = n
        elif step[0] == "drop":
            by_name.pop(step[1])
        elif step[0] == "rename":
            for a, b in step[1:]:
                by_name[b] = by_name.pop(a)
                shown = {s for s in shown if s != (b, by_name[b])}
        else:
            shown.add((step[1], by_name[step[1]]))
    return name not in by_name or (name, by_name[name]) in shown
