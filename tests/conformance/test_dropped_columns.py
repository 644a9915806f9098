"""Columns dropped and added within the archive, on real servers: the snapshot as of each commit is the server's table then.

pgoutput sends nothing for ``ALTER TABLE … DROP COLUMN`` or ``ADD COLUMN``; the table's
next change comes with a Relation that lists the columns then. A Relation names columns,
not column numbers, so columns are matched by name. A dropped column is not in the
server's table: the snapshot leaves out the columns its cut's Relation lacks (before
stop 31 it kept them at the end, holding the values last sent for rows not changed
since the drop and null for the others). ``table_changes`` and ``history`` keep every
column, with the values sent while it was there.
"""

from __future__ import annotations

import checks
import pytest

from pgoutput_codec import decode_changes, history, snapshot, table_changes

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


@pytest.fixture(scope="module")
def dropped(pg_server):
    """(archive, the server's table after each committed change: rows by id)."""
    with pg_server.connect() as conn:
        x = conn.execute
        x("CREATE TABLE dropped (id int PRIMARY KEY, a text, b int, c text)")
        x(f"CREATE PUBLICATION {PUB} FOR TABLE dropped")
        x(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')")
        states = []
        try:
            for step in STEPS:
                x(step)
                if not step.startswith("ALTER"):
                    states.append(checks.rows_by_id(conn, "dropped")[0])
            rows = x(f"SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('{SLOT}', NULL, NULL, "
                     "'proto_version', '1', 'publication_names', %s)", (PUB,)).fetchall()
        finally:
            x(f"SELECT pg_drop_replication_slot('{SLOT}')")
            x(f"DROP PUBLICATION {PUB}")
            x("DROP TABLE dropped")
    return checks.archive_of(rows), states


def test_the_snapshot_as_of_each_commit_is_the_servers_table(dropped):
    """As of every commit (each change statement is one transaction; the ALTERs send
    nothing), the snapshot has the server's columns and rows then."""
    archive, states = dropped
    changes = decode_changes(archive)
    commits = sorted(set(changes.column("commit_lsn").to_pylist()))
    assert len(commits) == len(states)
    for lsn, want in zip(commits, states, strict=True):
        got = {r["id"]: r for r in snapshot(changes, "public.dropped", as_of_lsn=lsn).to_pylist()}
        assert got == want, lsn
    assert {r["id"]: r for r in snapshot(changes, "public.dropped").to_pylist()} == states[-1]


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
