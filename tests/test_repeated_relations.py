"""A Relation resent unchanged costs nothing: a 1,600-column Relation message repeated
thousands of times (a capture landing the same definition in every file, files put
together) is held once by ``inspect``, ``decode --changes``, the control plan and the
mirror. Peak memory is measured in a process of its own (as ``memory_probe.py`` does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pgoutput_codec.pgoutput.encode import encode_message
from pgoutput_codec.pgoutput.messages import Begin, Commit, Insert, Relation, RelationColumn, TupleColumn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 1 << 20
REL = 16384
COLUMNS = 1600
RELATIONS = 2000

#: what ``inspect`` and ``decode --changes`` may grow by: the batch read (its payloads,
#: their decoded messages: every Relation's column list as Arrow arrays, ~25 bytes a
#: column) and the interpreter's own growth — not a Python object per column per Relation
BOUND = 400 * MB

_PROBE = """
import json, resource, sys
from pgoutput_codec import cli
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
code = cli.main(sys.argv[1:])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"code": code, "grew": after - before}))
"""


def _relation(name="wide", ncols=COLUMNS):
    cols = tuple(RelationColumn(1 if i == 0 else 0, f"c{i:04d}", 23, -1) for i in range(ncols))
    return encode_message(Relation(relation_id=REL, namespace="public", relation_name=name, replica_identity="d",
                                   columns=cols))


def _insert(v, ncols=COLUMNS):
    return encode_message(Insert(relation_id=REL, new_tuple=(TupleColumn("t", str(v).encode()),)
                                 + (TupleColumn("n", None),) * (ncols - 1)))


def _begin(i):
    return encode_message(Begin(final_lsn=0x1000 + i, commit_ts=0, xid=1000 + i))


def _commit(i):
    return encode_message(Commit(flags=0, commit_lsn=0x1000 + i, end_lsn=0x1001 + i, commit_ts=0))


def _write(path, data):
    pq.write_table(pa.table({"seq": pa.array(range(len(data)), pa.int64()), "data": pa.array(data, pa.binary())}),
                   path, compression="zstd")
    return sum(map(len, data))


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """Each transaction resending the Relation (as a capture's files do), and one
    transaction holding it thousands of times."""
    d = tmp_path_factory.mktemp("wide")
    rel = _relation()
    each = [p for i in range(RELATIONS) for p in (_begin(i), rel, _insert(i), _commit(i))]
    one = [_begin(0), *[rel] * RELATIONS, _insert(0), _commit(0)]
    return {"each": (str(d / "each.parquet"), _write(d / "each.parquet", each), RELATIONS),
            "one": (str(d / "one.parquet"), _write(d / "one.parquet", one), 1)}


def _grew(*args):
    res = subprocess.run([sys.executable, "-c", _PROBE, *map(str, args)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["code"] == 0, (res.stdout, res.stderr[-2000:])
    return got["grew"], res.stdout


@pytest.mark.parametrize("layout", ["each", "one"])
def test_inspect_holds_a_repeated_relation_once(archives, layout):
    path, payload, _ = archives[layout]
    grew, out = _grew("inspect", path, "--jobs", "1")
    assert f"{RELATIONS + 3 if layout == 'one' else RELATIONS * 4} messages" in out, out
    assert grew <= BOUND, f"inspect grew {grew / MB:.0f} MB over {payload / MB:.0f} MB of payloads"


@pytest.mark.parametrize("layout", ["each", "one"])
def test_decode_changes_holds_a_repeated_relation_once(archives, layout, tmp_path):
    path, payload, rows = archives[layout]
    out = tmp_path / "c.parquet"
    grew, text = _grew("decode", path, out, "--changes", "--jobs", "1", "--checkpoint", tmp_path / "cp.json")
    assert f"change rows written: {rows} " in text, text
    assert grew <= BOUND, f"decode --changes grew {grew / MB:.0f} MB over {payload / MB:.0f} MB of payloads"
    t = pq.read_table(out)
    assert t.num_rows == rows and len(t.column("after")[0].as_py()) == COLUMNS


def test_a_relation_resent_after_another_definition_takes_its_own_again():
    """A, then A changed, then A as first sent; a Type renamed between two equal
    Relations: each change row gets the definition in force when it came."""
    from pgoutput_codec import decode_changes
    from pgoutput_codec.pgoutput.messages import Type

    def rel(name, oid=23):
        return encode_message(Relation(relation_id=REL, namespace="public", relation_name="t", replica_identity="d",
                                       columns=(RelationColumn(1, "id", 23, -1), RelationColumn(0, name, oid, -1))))

    def ins(i):
        return encode_message(Insert(relation_id=REL, new_tuple=(TupleColumn("t", str(i).encode()),
                                                                  TupleColumn("t", b"x"))))

    typ = lambda name: encode_message(Type(type_oid=90000, namespace="public", type_name=name))  # noqa: E731
    data = [_begin(0), rel("a"), ins(0), rel("a"), ins(1), rel("b"), ins(2), rel("a"), ins(3), rel("a"), ins(4),
            typ("mood"), rel("m", 90000), ins(5), rel("m", 90000), ins(6), typ("feeling"), rel("m", 90000), ins(7),
            rel("m", 90000), ins(8), _commit(0)]
    for vectorized in (True, False):
        from pgoutput_codec import ChangeDecoder
        ChangeDecoder._VECTORIZED = vectorized
        try:
            t = decode_changes(pa.array(data, pa.binary()))
        finally:
            ChangeDecoder._VECTORIZED = True
        cols = [[c["name"] for c in r][1] for r in t.column("columns").to_pylist()]
        assert cols == ["a", "a", "b", "a", "a", "m", "m", "m", "m"]
        types = [r[1].get("type_name") for r in t.column("columns").to_pylist()]
        assert types[5:] == ["mood", "mood", "feeling", "feeling"]
        from pgoutput_codec.changes import decode_changes_parallel
        p = decode_changes_parallel(pa.array(data, pa.binary()), splits=3)
        assert p.column("columns").to_pylist() == t.column("columns").to_pylist()


def test_threads_give_the_same_rows(tmp_path):
    """Repeated and changed Relations cut across the pieces of several threads: the
    messages and change rows of --jobs 1, 2 and 5 are the same."""
    from pgoutput_codec.cli import main

    data = []
    for i in range(300):
        data += [_begin(i), _relation("wide" if i % 7 else "renamed", 400), _insert(i, 400), _commit(i)]
    path = tmp_path / "a.parquet"
    _write(path, data)
    got = {}
    for jobs in (1, 2, 5):
        for what in ((), ("--changes",)):
            out = tmp_path / f"{jobs}{len(what)}.parquet"
            assert main(["decode", str(path), str(out), "--jobs", str(jobs), *what]) == 0
            got.setdefault(what, []).append(pq.read_table(out))
    for what, tables in got.items():
        assert all(t.equals(tables[0]) for t in tables[1:]), what
    assert got[("--changes",)][0].column("table").to_pylist() == ["renamed" if i % 7 == 0 else "wide"
                                                                  for i in range(300)]
