"""Tables dropped and created again, renamed, swapped, on real servers.

pgoutput sends no message for ``DROP TABLE`` or a rename: an archive kept for months
holds the rows of every relation that ever bore a name (a nightly full refresh builds
``t_new`` and swaps it in; a migration drops and re-creates). A table rebuilt by name
would keep the rows of a table the server dropped, and lose the rows a renamed table
held under its old name. The steps are tests/table_moves.py's; the Spark tests use its
messages, which the first test checks against what the servers send.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import table_moves as TM

from pgoutput_codec import (decode_changes, decode_table_changes, encode_message, history, net_changes, snapshot,
                            table_changes)

NAME = f"public.{TM.NAME}"


@pytest.fixture(scope="module", params=sorted(TM.SCENARIOS))
def table_moves(pg_server, request):
    """(scenario, the archive of a slot that saw every step, the server's final rows of
    ``NAME`` (None: no such table))."""
    steps = TM.SCENARIOS[request.param]
    names = TM.tables(steps)
    with pg_server.connect() as conn:
        for t in names:
            conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute("CREATE PUBLICATION pub_moves FOR ALL TABLES")
        conn.execute("SELECT pg_create_logical_replication_slot('slot_moves', 'pgoutput')")
        try:
            for statement in TM.sql(steps):
                with conn.transaction():
                    for part in statement.split("; "):
                        conn.execute(part)
            rows = conn.execute(
                "SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('slot_moves', NULL, NULL, "
                "'proto_version', '1', 'publication_names', 'pub_moves')").fetchall()
        finally:
            conn.execute("SELECT pg_drop_replication_slot('slot_moves')")
            conn.execute("DROP PUBLICATION pub_moves")
        final = {}
        for t in names:
            if conn.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0] is not None:
                final[t] = sorted(conn.execute(f"SELECT id, v FROM {t}").fetchall())
                conn.execute(f"DROP TABLE {t}")
    archive = pa.table({"lsn": [r[0] for r in rows], "data": pa.array([bytes(r[1]) for r in rows], pa.binary())})
    return request.param, archive, final


def _rows(table) -> list:
    return sorted((r["id"], r["v"]) for r in table.select(["id", "v"]).to_pylist()) if table.num_columns else []


def _sent(changes) -> list:
    """What each change says (not the server's OIDs, LSNs or xids), and which changes
    are of one relation: relation ids numbered in order of first appearance."""
    ids = {}
    out = []
    for r in changes.select(["op", "table", "relation_id", "before", "after", "columns"]).to_pylist():
        r["relation_id"] = ids.setdefault(r["relation_id"], len(ids))
        out.append(r)
    return out


def test_the_model_sends_what_the_servers_send(table_moves):
    """tests/table_moves.py's messages decode to the server's changes (relations, names,
    images) and its final tables are the server's."""
    scenario, archive, final = table_moves
    msgs, model_final = TM.messages(TM.SCENARIOS[scenario])
    model = pa.table({"seq": list(range(len(msgs))), "data": pa.array([encode_message(m) for m in msgs])})
    assert _sent(decode_changes(archive)) == _sent(decode_changes(model))
    assert model_final == final


def test_snapshot_is_the_relation_that_bears_the_name(table_moves):
    """The server's table, not every relation that bore its name; empty where the
    relation last changed under it was renamed away."""
    _, archive, final = table_moves
    changes = decode_changes(archive)
    assert _rows(snapshot(changes, NAME)) == final.get(TM.NAME, [])
    got = history(changes, NAME).to_pylist()
    assert sorted((r["id"], r["v"]) for r in got if r["__END_LSN"] is None) == final.get(TM.NAME, [])
    # one relation's changes, whatever name each was sent under
    typed = table_changes(changes, NAME)
    assert typed.num_rows == decode_table_changes(archive, NAME).num_rows
    assert typed.to_pylist() == decode_table_changes(archive, NAME).to_pylist()


def test_snapshot_as_of_each_commit_is_the_table_then(table_moves):
    """As of every commit, the relation that bore the name then (the model's table up
    to that step), once a change has shown which one it is."""
    scenario, archive, _ = table_moves
    changes = decode_changes(archive)
    commits = sorted(set(changes.column("commit_lsn").to_pylist()))
    steps = TM.SCENARIOS[scenario]
    dml = [i for i, s in enumerate(steps) if s[0] in ("insert", "update", "delete")]
    assert len(dml) == len(commits)
    for i, cut in zip(dml, commits, strict=True):
        want = TM.messages(steps[:i + 1])[1]
        # the model's table at that step, unless the relation last changed under the
        # name has been changed under another since (then the name shows no rows)
        got = _rows(snapshot(changes, NAME, as_of_lsn=cut))
        if TM.bearer_shown(steps[:i + 1]):
            assert got == want.get(TM.NAME, []), (scenario, i)
        else:   # renamed into the name, not changed under it yet: no change says so
            assert got == [], (scenario, i)


def _merged(target: list, net: list) -> list:
    held = {r[0]: r for r in target}
    for r in net:
        if r["__OP"] == "truncate":
            held.clear()
        elif r["__OP"] == "delete":
            held.pop(r["id"], None)
        else:
            held[r["id"]] = (r["id"], r["v"])
    return sorted(held.values())


def test_net_changes_clear_a_replaced_table(table_moves):
    """A batch in which another relation took the name begins with a truncate, and every
    row says its relation (``__RELATION_ID``). Merged into the copy as of any commit, it
    gives the server's table when the copy is of the batch's relation; where it is not
    (the name passed to another relation between the copy and the batch), the relation
    ids differ: what an incremental job checks before it merges."""
    scenario, archive, final = table_moves
    changes = decode_changes(archive)
    want = final.get(TM.NAME, [])
    whole = net_changes(changes, NAME).to_pylist()
    assert _merged([], whole) == want
    if len({r["relation_id"] for r in changes.to_pylist() if r["table"] == TM.NAME}) > 1 and whole:
        assert whole[0]["__OP"] == "truncate"
    stale = 0
    for cut in sorted(set(changes.column("commit_lsn").to_pylist())):
        later = changes.filter(pc.greater(changes.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
        net = net_changes(later, NAME).to_pylist()
        if not net:
            continue
        relation = {r["__RELATION_ID"] for r in net}
        assert len(relation) == 1 and None not in relation
        before = changes.filter(pc.less_equal(changes.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
        earlier = {r["__RELATION_ID"] for r in net_changes(before, NAME).to_pylist()}
        copy = _rows(snapshot(changes, NAME, as_of_lsn=cut))
        renamed_in = relation & {r["relation_id"] for r in before.to_pylist() if r["table"] != TM.NAME}
        if earlier and earlier != relation and net[0]["__OP"] != "truncate":
            # the name passed to another relation between the copy and the batch
            stale += 1
            assert copy and _merged(copy, net) != want, cut
        elif renamed_in and not earlier:
            # the batch's relation bore another name when the copy was made: its rows
            # from then are the copy of that name's, not of this one
            stale += 1
            assert _merged(copy, net) != want, cut
        else:
            assert _merged(copy, net) == want, cut
    assert stale == {"swap": 3, "drop_recreate": 1, "three_generations": 1, "rename": 1}.get(scenario, 0)
