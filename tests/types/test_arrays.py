"""Arrays (typecatalog/arrays.py): PostgreSQL's six dimensions at most."""

from __future__ import annotations

import sys





_DEEP_ARRAYS = r'''
import json, struct, sys
import pyarrow as pa
from pgoutput_codec import (Begin, Commit, Insert, Relation, RelationColumn, TupleColumn, decode_changes,
                            decode_table_changes, encode_message, snapshot)
deep = lambda d: b"{" * d + b"1" + b"}" * d
seven = struct.pack(">iiI", 7, 0, 23) + struct.pack(">ii", 1, 1) * 7 + struct.pack(">ii", 4, 5)
tables = {"w": [("t", deep(10000)), ("t", deep(7)), ("t", b"{{1,2}}"), ("b", seven),
                ("t", b"[0:0][1:1][1:1][1:1][1:1][1:1][1:1]=" + deep(7))],
          "v": [("t", deep(10000))]}
msgs = [Begin(final_lsn=10, commit_ts=10, xid=10)]
for rid, (name, values) in enumerate(tables.items(), 16500):
    msgs.append(Relation(relation_id=rid, namespace="public", relation_name=name, replica_identity="d",
                         columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, "a", 1007, -1))))
    msgs += [Insert(relation_id=rid, new_tuple=(TupleColumn("t", str(i).encode()), TupleColumn(k, v)))
             for i, (k, v) in enumerate(values)]
msgs.append(Commit(commit_lsn=10, end_lsn=11, commit_ts=10))
data = [encode_message(m) for m in msgs]
arc = pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())})
out = {}
for name in tables:
    snap = snapshot(decode_changes(arc), "public." + name).sort_by("id")
    after = decode_table_changes(arc, "public." + name).column("after").combine_chunks()
    for how, cols in (("snapshot", dict(zip(snap.column_names, snap.columns))),
                      ("decode_table_changes", dict(zip([f.name for f in after.type], after.flatten())))):
        out[name + " " + how] = {"type": str(cols["a"].type), "a": cols["a"].to_pylist(),
                                 "special": cols["a__special"].to_pylist() if "a__special" in cols else None}
print(json.dumps(out, default=repr))
'''


def test_arrays_deeper_than_six_dimensions_are_refused_per_value(tmp_path):
    """PostgreSQL arrays have at most 6 dimensions (MAXDIM): a text array nested deeper (up
    to 10,000 braces, a few KB), or a bounds prefix naming 7, is refused like a binary one
    whose header says 7: that value is null with its reason, the column's other arrays typed
    as theirs; the process never crashes (run in a subprocess so that a crash fails here)."""
    import json
    import subprocess

    script = tmp_path / "deep.py"
    script.write_text(_DEEP_ARRAYS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    got = json.loads(done.stdout)
    assert len(got) == 4
    for how, t in got.items():
        typed = [[1, 2]] if how.startswith("w") else None
        assert t["type"] == ("list<item: list<item: int32>>" if typed else "list<item: int32>"), how
        want = [None, None, typed, None, None] if typed else [None]
        assert t["a"] == want, how
        for v, note in zip(want, t["special"], strict=True):
            if v is not None:
                assert note is None, how
            else:
                assert note.startswith("refused: ") and "more than 6 dimensions" in note, (how, note)


def test_a_list_depth_beyond_six_dimensions_is_refused(tmp_path):
    """``ndim=`` asks for lists that deep: more than PostgreSQL's 6 dimensions is a
    ValueError naming the limit, for the type and for a column (even one of nulls only),
    not a type Arrow crashes on (run in a subprocess so that a crash fails here)."""
    import subprocess

    code = ("import pytest\n"
            "from pgoutput_codec.typecatalog import arrow_type, convert_column\n"
            "assert str(arrow_type(1007, ndim=6)).count('list') == 6\n"
            "for call in (lambda: arrow_type(1007, ndim=7), lambda: convert_column(['n'], [None], 1007, ndim=10000)):\n"
            "    with pytest.raises(ValueError, match='at most 6 dimensions'):\n"
            "        call()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
