"""A table's Relation sent in a prepared transaction that another transaction commits before, on real servers.

pgoutput sends a relation's schema once per decoding session (``RelationSyncEntry.schema_sent``)
and a decoded ``PREPARE TRANSACTION`` counts as sending it. So after a prepared transaction
that wrote to a table, a plain transaction that commits before ``COMMIT PREPARED`` (or with
the prepared one rolled back) changes the table with no Relation message of its own. A
reader that took a relation's definition to start with the commit of the transaction that
sent it would find no table as of the plain commit (snapshot empty; with
``ROLLBACK PREPARED``, every query of the table empty).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pgoutput_codec import decode_changes, snapshot
from pgoutput_codec.changes import ControlPlan, control_candidates

OPTIONS = ["proto_version", "3", "publication_names", "prep_pub", "two_phase", "true"]


def _get(conn) -> list:
    return conn.execute("SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes("
                        "'prep_slot', NULL, NULL, VARIADIC %s::text[])", (OPTIONS,)).fetchall()


@pytest.fixture(scope="module", params=["COMMIT", "ROLLBACK", "open"])
def prepared_first(pg_server, request):
    """(how the prepared transaction ended, the archive a live consumer leaves, the
    server's final rows). The slot is read once the plain transaction has committed,
    while the prepared one is still open, and again after it ends, as a consumer
    streaming all along reads it: read only after a ROLLBACK PREPARED, the server sends
    the prepare empty, and the plain transaction its own Relation."""
    if pg_server.spec.major < 15:
        pytest.skip("two_phase slots of pg_logical_slot_get_binary_changes need PostgreSQL 15")
    ending = request.param
    with pg_server.connect() as conn:
        conn.execute("CREATE TABLE prep_rel (id int PRIMARY KEY, v text)")
        conn.execute("CREATE PUBLICATION prep_pub FOR TABLE prep_rel")
        conn.execute("SELECT pg_create_logical_replication_slot('prep_slot', 'pgoutput', false, true)")
        try:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO prep_rel VALUES (1, 'prepared')")
            conn.execute("PREPARE TRANSACTION 'prep_g'")
            conn.execute("INSERT INTO prep_rel VALUES (2, 'plain')")
            rows = _get(conn)
            if ending != "open":
                conn.execute(f"{ending} PREPARED 'prep_g'")
                rows += _get(conn)
            final = sorted(conn.execute("SELECT id, v FROM prep_rel").fetchall())
        finally:
            if ending == "open":
                conn.execute("ROLLBACK PREPARED 'prep_g'")
            conn.execute("SELECT pg_drop_replication_slot('prep_slot')")
            conn.execute("DROP PUBLICATION prep_pub")
            conn.execute("DROP TABLE prep_rel")
    archive = pa.table({"seq": pa.array(range(len(rows)), pa.int64()), "lsn": [r[0] for r in rows],
                        "data": pa.array([bytes(r[1]) for r in rows], pa.binary())})
    return request.param, archive, final


def test_the_server_sends_the_relation_once_and_the_table_is_found(prepared_first):
    """What the server sends: the Relation inside the prepared transaction only, and the
    plain transaction's Insert without one. The single process and the plan (Spark's
    rows straight from decode_changes) find the table as of the plain commit and at the
    end, with the server's rows."""
    ending, archive, final = prepared_first
    tags = [bytes(d[:1]).decode() for d in archive.column("data").to_pylist()]
    assert tags == ["b", "R", "I", "P", "B", "I", "C"] + {"COMMIT": ["K"], "ROLLBACK": ["r"], "open": []}[ending]
    changes = decode_changes(archive)
    plain = changes.filter(pc.equal(changes.column("seq"), 5)).column("commit_lsn")[0].as_py()
    assert sorted(tuple(r.values()) for r in snapshot(changes, "public.prep_rel").to_pylist()) == final
    assert snapshot(changes, "public.prep_rel", as_of_lsn=plain).to_pylist() == [{"id": 2, "v": "plain"}]
    values, keys = archive.column("data").combine_chunks(), np.arange(len(archive))
    mask = control_candidates(values)
    plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask])
    for cut, want in ((None, len(final)), (plain, 1)):
        mine = plan.for_table("public", "prep_rel", cut)
        got = (mine if cut is None else mine.between(until_lsn=cut)).changes(values, keys)
        assert len(got) == want, cut
        assert mine._chosen[1] == changes.column("relation_id")[0].as_py(), cut
