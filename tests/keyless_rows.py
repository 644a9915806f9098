"""A workload of tables with no key on a real server: rows alike in every column, Updates
and Deletes that change one of them (the server's ``ctid`` picks it), all of them, and
none; a Truncate. Shared by the single-process and Spark tests of key-less tables.

``ms`` is REPLICA IDENTITY FULL (Updates and Deletes send the whole old row), ``mn``
REPLICA IDENTITY NOTHING (the server refuses its Updates and Deletes while a publication
publishes them: Inserts only)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

TABLES = ("ms", "mn")
SLOT, PUB = "keyless_slot", "keyless_pub"
STEPS = [
    "INSERT INTO ms VALUES (1, 'a'), (1, 'a'), (1, 'a'), (2, 'b')",
    "INSERT INTO mn VALUES (1, 'x'), (1, 'x')",
    "UPDATE ms SET v = 'c' WHERE ctid = (SELECT min(ctid) FROM ms WHERE v = 'a')",    # one of three
    "DELETE FROM ms WHERE ctid = (SELECT min(ctid) FROM ms WHERE v = 'a')",          # one of two
    "INSERT INTO ms VALUES (2, 'b'), (5, NULL), (5, NULL)",
    "UPDATE ms SET k = 3 WHERE k = 2",                  # two Updates, one old image
    "UPDATE ms SET v = v WHERE k = 1",                  # the rows as they were
    "INSERT INTO mn VALUES (1, 'x')",
    "DELETE FROM ms WHERE k = 3",                       # all of them
    "DELETE FROM ms WHERE k = 9",                       # none
    "BEGIN; INSERT INTO ms VALUES (6, 'd'), (6, 'd'); DELETE FROM ms WHERE ctid = (SELECT min(ctid) FROM ms "
    "WHERE k = 6); COMMIT",                             # two inserted, one deleted: one more
    "TRUNCATE ms",
    "INSERT INTO ms VALUES (7, 'e'), (7, 'e')",
]


def rows_of(table) -> list:
    """A table's rows (Arrow table, or dicts) as a sorted list of (k, v), duplicates kept."""
    rows = table.to_pylist() if isinstance(table, pa.Table) else list(table)
    return sorted(((r["k"], r["v"]) for r in rows), key=repr)


def applied(held: list, net) -> list:
    """``held`` (rows as (k, v)) after a ``net_changes`` batch of a key-less table:
    ``truncate`` empties it, each ``upsert`` row adds one row, each ``delete`` row removes
    one (which must be there)."""
    count = Counter(held)
    for r in net.to_pylist() if isinstance(net, pa.Table) else net:
        row = (r["k"], r["v"])
        if r["__OP"] == "truncate":
            count.clear()
        elif r["__OP"] == "upsert":
            count[row] += 1
        else:
            assert r["__OP"] == "delete" and count[row] > 0, r
            count[row] -= 1
    return sorted(count.elements(), key=repr)


def run(conn) -> list:
    """Run the workload: per step (the SQL, the archive up to it, the server's rows of
    each table then as :func:`rows_of` gives them)."""
    x = conn.execute
    x("CREATE TABLE ms (k int, v text)")
    x("ALTER TABLE ms REPLICA IDENTITY FULL")
    x("CREATE TABLE mn (k int, v text)")
    x("ALTER TABLE mn REPLICA IDENTITY NOTHING")
    x(f"CREATE PUBLICATION {PUB} FOR TABLE ms, mn")
    x(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')")
    out = []
    try:
        for step in STEPS:
            if step.startswith("BEGIN;"):
                with conn.transaction():
                    for part in step.split(";")[1:-1]:
                        x(part)
            else:
                x(step)
            rows = x(f"SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('{SLOT}', NULL, NULL, "
                     "'proto_version', '1', 'publication_names', %s)", (PUB,)).fetchall()
            server = {}
            for t in TABLES:
                cur = x(f"SELECT k, v FROM {t}")
                server[t] = rows_of({"k": k, "v": v} for k, v in cur.fetchall())
            archive = pa.table({"seq": pa.array(range(len(rows)), pa.int64()), "lsn": [r[0] for r in rows],
                                "data": pa.array([bytes(r[1]) for r in rows], pa.binary())})
            out.append((step, archive, server))
    finally:
        x(f"SELECT pg_drop_replication_slot('{SLOT}')")
        x(f"DROP PUBLICATION {PUB}")
        x("DROP TABLE ms, mn")
    return out
