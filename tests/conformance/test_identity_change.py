"""Tables whose REPLICA IDENTITY changes while the archive runs, on real servers.

Each change names its row by the key of its own Relation: the primary key's columns
under DEFAULT, the index's under USING INDEX, the whole old row under FULL. A row
inserted under one identity and deleted or updated under another must still be found:
an archive kept for months spans such an ``ALTER TABLE`` (a team switching to FULL to
get before images), and a replay that keyed every row by one identity would keep rows
the server deleted. The steps are tests/identity_moves.py's; the Spark tests use its
messages, which the first test checks against what the servers send.
"""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest

from pgoutput_codec import decode_changes, encode_message, history, net_changes, snapshot

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import identity_moves as IM  # noqa: E402

NAME = f"public.{IM.TABLE}"


@pytest.fixture(scope="module", params=sorted(IM.SCENARIOS))
def identity_moves(pg_server, request):
    """(scenario, the changes of a slot that saw every step, the server's final rows)."""
    steps = IM.SCENARIOS[request.param]
    with pg_server.connect() as conn:
        conn.execute(f"DROP TABLE IF EXISTS {IM.TABLE}")
        for sql in IM.create_sql():
            conn.execute(sql)
        conn.execute(f"CREATE PUBLICATION pub_{IM.TABLE} FOR TABLE {IM.TABLE}")
        conn.execute(f"SELECT pg_create_logical_replication_slot('slot_{IM.TABLE}', 'pgoutput')")
        try:
            for sql in IM.sql(steps):
                conn.execute(sql)
            rows = conn.execute(
                f"SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes('slot_{IM.TABLE}', NULL, NULL, "
                f"'proto_version', '1', 'publication_names', 'pub_{IM.TABLE}')").fetchall()
        finally:
            conn.execute(f"SELECT pg_drop_replication_slot('slot_{IM.TABLE}')")
            conn.execute(f"DROP PUBLICATION pub_{IM.TABLE}")
        final = conn.execute(f"SELECT id, v, u FROM {IM.TABLE} ORDER BY id").fetchall()
        conn.execute(f"DROP TABLE {IM.TABLE}")
    archive = pa.table({"lsn": [r[0] for r in rows], "data": pa.array([bytes(r[1]) for r in rows], pa.binary())})
    return request.param, archive, sorted(final)


def _rows(table) -> list:
    return sorted((r["id"], r["v"], r["u"]) for r in table.select(["id", "v", "u"]).to_pylist())


def _sent(changes) -> list:
    """What a change says of its row: op, old image kind, images, the Relation's columns
    and key flags (not the server's relation OID, LSNs or xids)."""
    return changes.select(["op", "before_kind", "before", "after", "columns"]).to_pylist()


def test_the_model_sends_what_the_servers_send(identity_moves):
    """tests/identity_moves.py's messages decode to the server's changes, key flags and
    old images included, and its final rows are the server's (so the Spark tests, which
    use the messages, test what servers send)."""
    scenario, archive, final = identity_moves
    msgs, model_final = IM.messages(IM.SCENARIOS[scenario])
    model = pa.table({"seq": list(range(len(msgs))), "data": pa.array([encode_message(m) for m in msgs])})
    assert _sent(decode_changes(archive)) == _sent(decode_changes(model))
    assert model_final == final
    flags = {tuple(c["name"] for c in r["columns"] if c["flags"] & 1) for r in _sent(decode_changes(archive))}
    idents = {s[1] for s in IM.SCENARIOS[scenario] if s[0] == "alter"} | {"default"}
    assert flags == {tuple(n for n, f in zip(IM.NAMES, IM.FLAGS[i], strict=True) if f) for i in idents}


def test_snapshot_finds_rows_across_identity_changes(identity_moves):
    _, archive, final = identity_moves
    assert _rows(snapshot(decode_changes(archive), NAME)) == final


def merged(target: list, net: list, key: list) -> list:
    """``net`` (net_changes rows) applied to ``target`` (rows as dicts) by a MERGE on
    ``key``, as the net_changes docstring says a user applies them."""
    held = {tuple(r[k] for k in key): r for r in target}
    for r in net:
        if r["__OP"] == "truncate":
            held.clear()
        elif r["__OP"] == "delete":
            held.pop(tuple(r[k] for k in key), None)
        else:
            held[tuple(r[k] for k in key)] = {c: r[c] for c in ("id", "v", "u")}
    return sorted((r["id"], r["v"], r["u"]) for r in held.values())


def test_history_and_net_changes_across_identity_changes(identity_moves):
    """Every version ends where the server replaced or deleted it. The net changes of
    the commits after any commit, merged into the snapshot as of that commit on the
    columns every identity of those changes held, give the server's rows; a deleted row
    is named by those columns only."""
    scenario, archive, final = identity_moves
    changes = decode_changes(archive)
    hist = history(changes, NAME).to_pylist()
    assert sorted((r["id"], r["v"], r["u"]) for r in hist if r["__END_LSN"] is None) == final
    steps = IM.SCENARIOS[scenario]
    assert len(hist) == sum(len(s) - 1 for s in steps if s[0] == "insert") + sum(s[0] == "update" for s in steps)
    commits = sorted(set(changes.column("commit_lsn").to_pylist()))
    for cut in [0] + commits:
        later = changes.filter(pa.compute.greater(changes.column("commit_lsn"), pa.scalar(cut, pa.uint64())))
        if not len(later):
            continue
        key = set(IM.NAMES)
        for cols in later.column("columns").to_pylist():
            key &= {c["name"] for c in cols if c["flags"] & 1}
        target = snapshot(changes, NAME, as_of_lsn=cut).to_pylist() if cut else []
        net = net_changes(later, NAME).to_pylist()
        if not key:
            # none in common: rows are named by the newest identity, and a row older than
            # these changes that a change sent under another removed cannot be (its key
            # is null: the documented limit, start the batch after the ALTER); rows the
            # changes hold are. (no_common_key_toast also changes u under DEFAULT, which
            # moves a row's newest key unsaid: no row of the net shows that.)
            key = {c["name"] for c in later.column("columns")[len(later) - 1].as_py() if c["flags"] & 1}
            if target:
                if scenario == "no_common_key":
                    assert any(r["__OP"] == "delete" and all(r[k] is None for k in key) for r in net), cut
                continue
        key = [n for n in IM.NAMES if n in key]
        assert merged(target, net, key) == final, (cut, key)
        assert all({c for c in IM.NAMES if r[c] is not None} == set(key) for r in net if r["__OP"] == "delete")

