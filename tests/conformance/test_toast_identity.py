"""Unchanged TOAST values and REPLICA IDENTITY FULL, on real servers.

An Update that leaves a TOASTed value unchanged sends it as 'u': the value is not in the
new tuple. Under REPLICA IDENTITY FULL the old row is sent too, with its TOAST values
inline, so the change carries the value after all; under the default identity it does
not. An archive that starts after the row's Insert (a lake kept since last month, a
slot created after the table) shows the difference.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from pgoutput_codec import decode_changes, decode_table_changes, net_changes, snapshot, table_changes

BIG = "x" * 10000


@pytest.fixture(scope="module")
def updates_only(pg_server):
    """Per identity ('full', 'default'): the changes of a slot created after the Insert —
    an update of another column, then a key change — and the server's final rows."""
    out = {}
    with pg_server.connect() as conn:
        for ident in ("full", "default"):
            t = f"toast_{ident}"
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, note text, big text)")
            conn.execute(f"ALTER TABLE {t} ALTER COLUMN big SET STORAGE EXTERNAL")
            conn.execute(f"ALTER TABLE {t} REPLICA IDENTITY {ident.upper()}")
            conn.execute(f"INSERT INTO {t} VALUES (1, 'a', %s)", (BIG,))
            conn.execute(f"CREATE PUBLICATION pub_{t} FOR TABLE {t}")
            conn.execute(f"SELECT pg_create_logical_replication_slot('slot_{t}', 'pgoutput')")
            try:
                conn.execute(f"UPDATE {t} SET note = 'b' WHERE id = 1")
                conn.execute(f"UPDATE {t} SET id = 2 WHERE id = 1")
                rows = conn.execute(
                    "SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes(%s, NULL, NULL, "
                    "'proto_version', '1', 'publication_names', %s)", (f"slot_{t}", f"pub_{t}")).fetchall()
            finally:
                conn.execute(f"SELECT pg_drop_replication_slot('slot_{t}')")
            final = conn.execute(f"SELECT id, note, big FROM {t}").fetchall()
            out[ident] = (pa.table({"lsn": [r[0] for r in rows],
                                    "data": pa.array([bytes(r[1]) for r in rows], pa.binary())}), final)
    return out


def test_full_identity_updates_carry_their_toast_values(updates_only):
    """FULL: every typed change, the snapshot and the net changes hold the value, none
    lists it unchanged; the snapshot equals the server's table. Default identity: the
    value is not in the changes, and says so (null, listed unchanged)."""
    archive, final = updates_only["full"]
    changes = decode_changes(archive)
    assert [c["kind"] for c in changes.column("after")[0].as_py()] == ["t", "t", "u"]   # what the server sent
    assert changes.column("before_kind").to_pylist() == ["O", "O"]
    for typed in (table_changes(changes, "public.toast_full"), decode_table_changes(archive, "public.toast_full")):
        assert [r["big"] for r in typed.column("after").to_pylist()] == [BIG, BIG]
        assert typed.column("unchanged").to_pylist() == [None, None]
    snap = snapshot(changes, "public.toast_full")
    assert [(r["id"], r["note"], r["big"]) for r in snap.to_pylist()] == final == [(2, "b", BIG)]
    net = net_changes(changes, "public.toast_full")
    # (FULL identity: rows are counted whole, so each update removes one and adds another,
    # and (1, 'b') came and went)
    assert sorted((r["__OP"], r["id"], r["note"], r["big"], r["__UNCHANGED"], r["__UNCHANGED_FROM"])
                  for r in net.to_pylist()) == [("delete", 1, "a", BIG, [], None), ("upsert", 2, "b", BIG, [], None)]

    archive, final = updates_only["default"]
    changes = decode_changes(archive)
    typed = table_changes(changes, "public.toast_default")
    assert [r["big"] for r in typed.column("after").to_pylist()] == [None, None]
    assert typed.column("unchanged").to_pylist() == [["big"], ["big"]]
    snap = snapshot(changes, "public.toast_default")
    assert [(r["id"], r["note"], r["big"]) for r in snap.to_pylist()] == [(2, "b", None)] and final[0][2] == BIG
    net = net_changes(changes, "public.toast_default")
    assert sorted((r["__OP"], r["id"], r["__UNCHANGED"], r["__UNCHANGED_FROM"]) for r in net.to_pylist()) == [
        ("delete", 1, [], None), ("upsert", 2, ["big"], {"id": 1})]
