"""Columns dropped and added within the archive, on real servers: the snapshot as of each commit is the server's table then.

pgoutput sends nothing for ``ALTER TABLE … DROP COLUMN`` or ``ADD COLUMN``; the table's
next change comes with a Relation that lists the columns then. A Relation names columns,
not column numbers, so columns are matched by name. A dropped column is not in the
server's table: the snapshot leaves out the columns its cut's Relation lacks (it does
not keep them at the end with the values last sent). ``table_changes`` and ``history`` keep every
column, with the values sent while it was there.
"""

from __future__ import annotations

import checks
import pytest

from pgoutput_codec import decode_changes, history, net_changes, snapshot, table_changes

SLOT, PUB = "dropped_slot", "dropped_pub"
STEPS = [
    "INSERT INTO dropped VALUES (1, 'a1', 10, 'c1'), (2, 'a2', 20, 'c2'), (3, 'a3', 30, 'c3')",
    "ALTER TABLE dropped DROP COLUMN b",
    "UPDATE dropped SET c = 'x2' WHERE id = 2",
    "ALTER TABLE dropped ADD COLUMN d int",
    "INSERT INTO dropped VALUES (4, 'a4', 'c4', 40)",
    "ALTER TABLE dropped DROP COLUMN a",
    "DELETE FROM dropped WHERE id = 3",
    "UPDATE dropped SET d = 11 WHERE id = 1",
]


#: a column dropped and added again by its name: a new column, null in the rows not
#: changed since (the dropped one's values are gone on the server). ``b``: a change comes
#: between the DROP and the ADD, so a Relation without ``b`` is sent; ``a``: dropped and
#: added in one statement, nothing sent between, but the column comes back last; ``c``:
#: back as another type (``varchar``: a snapshot types a column by its newest type at
#: every cut, and the server's ``text`` ones read as it)
READDED = [
    "INSERT INTO readded VALUES (1, 'a1', 10, 'c1'), (2, 'a2', 20, 'c2'), (3, 'a3', 30, 'c3')",
    "ALTER TABLE readded DROP COLUMN b",
    "UPDATE readded SET c = 'x2' WHERE id = 2",
    "ALTER TABLE readded ADD COLUMN b int",
    "INSERT INTO readded VALUES (4, 'a4', 'c4', 40)",
    "ALTER TABLE readded DROP COLUMN a, ADD COLUMN a text",
    "UPDATE readded SET c = 'y3' WHERE id = 3",
    "ALTER TABLE readded DROP COLUMN c",
    "DELETE FROM readded WHERE id = 4",
    "ALTER TABLE readded ADD COLUMN c varchar(10)",
    "UPDATE readded SET c = 'c5' WHERE id = 1",
]


#: columns added with a DEFAULT: the server gives the rows older than the column the
#: default (attmissingval) and sends nothing; ``n`` dropped and added again with another
DEFAULTED = [
    "INSERT INTO defaulted VALUES (1, 'a1'), (2, 'a2'), (3, 'a3')",
    "ALTER TABLE defaulted ADD COLUMN flag boolean NOT NULL DEFAULT true",
    "ALTER TABLE defaulted ADD COLUMN n numeric(6,2) DEFAULT 1.5",
    "UPDATE defaulted SET a = 'x2' WHERE id = 2",
    "INSERT INTO defaulted (id, a) VALUES (4, 'a4')",
    "ALTER TABLE defaulted ADD COLUMN at date DEFAULT '2024-02-29'",
    "UPDATE defaulted SET flag = false WHERE id = 3",
    "ALTER TABLE defaulted DROP COLUMN n, ADD COLUMN n int DEFAULT 9",
    "DELETE FROM defaulted WHERE id = 4",
]
#: the defaults as the archive ends: what ``missing=`` names
DEFAULTS = {"flag": True, "n": 9, "at": "2024-02-29"}


def _run(pg_server, table: str, ddl: str, steps: list) -> tuple:
    """(archive, the server's table after each committed change: rows by id)."""
    with pg_server.connect() as conn:
        x = conn.execute
        x(ddl)
        x(f"CREATE PUBLICATION {PUB} FOR TABLE {table}")
        x(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')")
        states = []
        try:
            for step in steps:
                x(step)
                if not step.startswith("ALTER"):
                    states.append(checks.rows_by_id(conn, table)[0])
            rows = x(f"SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('{SLOT}', NULL, NULL, "
                     "'proto_version', '1', 'publication_names', %s)", (PUB,)).fetchall()
        finally:
            x(f"SELECT pg_drop_replication_slot('{SLOT}')")
            x(f"DROP PUBLICATION {PUB}")
            x(f"DROP TABLE {table}")
    return checks.archive_of(rows), states


@pytest.fixture(scope="module")
def dropped(pg_server):
    return _run(pg_server, "dropped", "CREATE TABLE dropped (id int PRIMARY KEY, a text, b int, c text)", STEPS)


@pytest.fixture(scope="module")
def defaulted(pg_server):
    return _run(pg_server, "defaulted", "CREATE TABLE defaulted (id int PRIMARY KEY, a text)", DEFAULTED)


@pytest.fixture(scope="module")
def readded(pg_server):
    return _run(pg_server, "readded", "CREATE TABLE readded (id int PRIMARY KEY, a text, b int, c text)", READDED)


def _as_of_each_commit(changes, name: str, states: list) -> None:
    """The snapshot as of every commit (each change statement is one transaction; the
    ALTERs send nothing) has the server's columns and rows then, and so has the last."""
    commits = sorted(set(changes.column("commit_lsn").to_pylist()))
    assert len(commits) == len(states)
    for lsn, want in zip(commits, states, strict=True):
        got = {r["id"]: r for r in snapshot(changes, name, as_of_lsn=lsn).to_pylist()}
        assert got == want, lsn
    assert {r["id"]: r for r in snapshot(changes, name).to_pylist()} == states[-1]


def test_the_snapshot_as_of_each_commit_is_the_servers_table(dropped):
    archive, states = dropped
    _as_of_each_commit(decode_changes(archive), "public.dropped", states)


def test_table_changes_and_history_keep_every_column(dropped):
    """The changes hold what was sent: the first Inserts ``a`` and ``b``, the last
    Update neither; history's versions alive at the end, on the snapshot's columns, are
    the snapshot."""
    archive, states = dropped
    changes = decode_changes(archive)
    typed = table_changes(changes, "public.dropped")
    assert typed.schema.field("after").type.names == ["id", "c", "d", "a", "b"]
    after = typed.column("after").to_pylist()
    assert after[0] == {"id": 1, "c": "c1", "d": None, "a": "a1", "b": 10}
    assert after[-1] == {"id": 1, "c": "c1", "d": 11, "a": None, "b": None}
    hist = history(changes, "public.dropped").to_pylist()
    alive = {h["id"]: {k: h[k] for k in ("id", "c", "d")} for h in hist if h["__END_LSN"] is None}
    assert alive == states[-1]


def test_a_column_dropped_and_added_again_is_a_new_column(readded):
    """The snapshot as of every commit is the server's table: a column of a name dropped
    before holds null in the rows not changed since it was added again (the dropped
    column's values, 10 and 30 in ``b``, ``a1`` and ``a2`` in ``a``, ``x2`` in ``c``, must
    not come back); so do the net changes. history keeps what was sent."""
    archive, states = readded
    changes = decode_changes(archive)
    _as_of_each_commit(changes, "public.readded", states)
    final = states[-1]
    assert final[2] == {"id": 2, "b": None, "a": None, "c": None}
    # a copy built from nothing by the net changes of the whole archive is the table (a
    # copy made before a column was added again must drop and add it as the server did:
    # the net changes hold only the rows changed)
    net = net_changes(changes, "public.readded").to_pylist()
    assert {r["__OP"] for r in net} == {"upsert", "delete"}
    assert {r["id"]: {c: r[c] for c in final[1]} for r in net if r["__OP"] == "upsert"} == final
    hist = [h for h in history(changes, "public.readded").to_pylist() if h["id"] == 1]
    assert [(h["b"], h["c"]) for h in hist] == [(10, "c1"), (None, "c5")]


def test_the_defaults_of_columns_added_are_given_by_missing(defaulted):
    """pgoutput sends nothing for the rows an ``ADD COLUMN … DEFAULT`` fills: without
    ``missing=`` they are null (``flag`` is NOT NULL on the server); with the defaults
    named, the snapshot is the server's table, and so are the net changes' upserts.
    A value the column's type does not read, or a column the table never had, is refused."""
    archive, states = defaulted
    changes = decode_changes(archive)
    final = states[-1]
    assert final[1]["flag"] is True and str(final[2]["n"]) == "9" and str(final[1]["at"]) == "2024-02-29"
    plain = {r["id"]: r for r in snapshot(changes, "public.defaulted").to_pylist()}
    assert plain[1]["flag"] is None and plain[1]["n"] is None and plain != final
    got = {r["id"]: r for r in snapshot(changes, "public.defaulted", missing=DEFAULTS).to_pylist()}
    assert got == final
    net = net_changes(changes, "public.defaulted", missing=DEFAULTS).to_pylist()
    assert {r["id"]: {c: r[c] for c in final[1]} for r in net if r["__OP"] == "upsert"} == final
    with pytest.raises(ValueError, match="not a value of the column's type"):
        snapshot(changes, "public.defaulted", missing={"at": "tomorrowish"})
    with pytest.raises(ValueError, match="does not have: 'nope'"):
        snapshot(changes, "public.defaulted", missing={"nope": 1})
