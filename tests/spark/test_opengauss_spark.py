"""Spark ``opengauss_decode_changes`` equals the single-process
``pgoutput_codec.opengauss.changes.decode_changes`` on generated frames whose
transactions span frames, in 1 and 4 partitions, with the rows of a partition in any
order."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pgoutput_codec.errors import PgoutputDecodeError
from pgoutput_codec.opengauss.changes import decode_changes
from pgoutput_codec.opengauss.encode import encode_frame, encode_heartbeat, encode_record
from pgoutput_codec.opengauss.messages import Column, Record

pytest.importorskip("pyspark")

from pgoutput_codec.spark import types as ST  # noqa: E402
from pgoutput_codec.spark import opengauss_change_type, opengauss_decode_changes  # noqa: E402

from archive_model import soak_seeds  # noqa: E402  (tests/ is on sys.path: conftest)
from altered_columns import said  # noqa: E402

TABLES = {("public", "t1"): [("a", 23), ("b", 25), ('"Mixed"', 25)],
          ("public", "t2"): [("id", 20), ("v", 1700)],
          ("app", "t3"): [("k", 25), ("n", 23)]}


# the same tables after two ALTER TABLEs (``_records(alter=True)``): a column dropped, one
# added, one whose type changed
ALTERED = [TABLES,
           {**TABLES, ("public", "t1"): TABLES[("public", "t1")][:2],
            ("public", "t2"): TABLES[("public", "t2")] + [("w", 25)]},
           {**TABLES, ("public", "t1"): TABLES[("public", "t1")][:2] + [("c", 23)],
            ("public", "t2"): [("id", 20), ("v", 25), ("w", 25)]}]


def _tuple(table, rng, *, key_only=False, shape=TABLES):
    cols = shape[table][:1] if key_only else shape[table]
    return tuple(Column(n, o, None if rng.random() < 0.15 else str(rng.randint(-99, 999)).encode())
                 for n, o in cols)


def _records(seed, n_txns=40, alter=False):
    """A record stream: transactions (some empty, some of an excluded user, some never
    committed), DML outside any transaction, heartbeats; with ``alter`` the tables' columns
    change twice (``ALTERED``), so a Delete's key-only old tuple must take the columns in
    force, set by a record in another frame, maybe of another partition, maybe of a
    transaction not given, and a full one may name columns those lack."""
    rng = random.Random(seed)
    recs, lsn, xid = [], 0x1000, 500
    tables = list(TABLES)
    # a DML record before any Begin opens a transaction the next Commit closes
    recs.append(encode_record(Record("I", lsn, schema="public", table="t1", new_tuple=_tuple(tables[0], rng))))
    recs.append(encode_record(Record("C", lsn + 8, xid=499, commit_time="2024-02-05 14:40:00.5+08")))
    for t in range(n_txns):
        xid += 1
        lsn += 0x100
        user = rng.choice([None, "alice", "etl_bot"])
        recs.append(encode_record(Record(
            "B", lsn, csn=2000 + t, first_lsn=lsn, xid=xid if rng.random() < 0.8 else None,
            commit_time="2024-02-05 14:46:%02d.203057+08" % (t % 60) if rng.random() < 0.7 else None,
            origin_id=rng.choice([None, 3]), user_name=user)))
        shape = ALTERED[3 * t // n_txns] if alter else TABLES
        for _ in range(rng.choice([0, 1, 2, 3, 5, 8])):
            lsn += 0x20
            table = rng.choice(tables)
            op = rng.choice("IIUD")
            if op == "I":
                rec = Record("I", lsn, schema=table[0], table=table[1], new_tuple=_tuple(table, rng, shape=shape))
            elif op == "U":
                rec = Record("U", lsn, schema=table[0], table=table[1], new_tuple=_tuple(table, rng, shape=shape),
                             old_tuple=_tuple(table, rng, key_only=rng.random() < 0.7, shape=shape))
            else:
                rec = Record("D", lsn, schema=table[0], table=table[1],
                             old_tuple=_tuple(table, rng, key_only=rng.random() < 0.5, shape=shape))
            recs.append(encode_record(rec))
            if rng.random() < 0.05:
                recs.append(encode_heartbeat(lsn))
        if t == n_txns - 1 or rng.random() < 0.05:
            continue       # never committed: its rows are dropped
        lsn += 0x20
        recs.append(encode_record(Record(
            "C", lsn, xid=xid if rng.random() < 0.5 else None,
            commit_time="2024-02-05 14:47:%02d.1+08" % (t % 60) if rng.random() < 0.5 else None)))
    return recs


def _frames(recs, seed):
    """Cut the stream into frames of 1..7 records: transactions span frames."""
    rng = random.Random(seed + 1)
    frames, i = [], 0
    while i < len(recs):
        k = rng.randint(1, 7)
        frames.append(encode_frame(recs[i:i + k], end=rng.choice(["F", "P0"])))
        i += k
    return frames


def _expected(frames, opts):
    table = decode_changes(pa.array(frames, pa.binary()), **opts)
    target = ST.arrow_schema_for(opengauss_change_type(**{k: v for k, v in opts.items() if k.startswith("include")}))
    return [dict(zip(target.names, row, strict=True)) for row in zip(*[
        ST.to_spark_arrow(table.column(n).combine_chunks(), target.field(n).type).to_pylist()
        for n in target.names], strict=True)]


def _spark_rows(df):
    if hasattr(df, "toArrow"):                      # PySpark >= 4.0
        return df.toArrow().to_pylist()
    # PySpark 3.5: the same Arrow batches toPandas() is built from
    return [row for batch in df._collect_as_arrow() for row in batch.to_pylist()]


def _df(spark, frames, partitions, seed=0):
    rows = [(i * 3 + 7, f) for i, f in enumerate(frames)]     # arrival order: seq, not row order
    random.Random(seed).shuffle(rows)
    df = spark.createDataFrame(rows, "seq long, data binary")
    return df.repartition(partitions) if partitions > 1 else df.coalesce(1)


OPTIONS = [
    {},
    {"skip_empty_xacts": False, "exclude_users": "etl_bot"},
    {"tables": "public.*", "include_xids": False, "include_origin": False},
    {"tables": "*.t3,public.t2", "skip_empty_xacts": False, "include_timestamp": False,
     "exclude_users": ["alice"]},
]


@pytest.mark.parametrize("partitions", [1, 4])
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_equals_single_process(spark, partitions, opts):
    frames = _frames(_records(seed=len(opts), alter=True), seed=len(opts))
    expected = _expected(frames, opts)
    assert len(expected) > 30
    versions = {}     # the altered tables' rows carry several column lists
    for r in expected:
        if r["op"] in ("I", "U", "D"):
            versions.setdefault((r["schema"], r["table"]), set()).add(r["relation_version"])
    assert all(len(v) >= 3 for t, v in versions.items() if t[0] == "public") and len(versions) >= 2, versions
    got = _spark_rows(opengauss_decode_changes(_df(spark, frames, partitions), order_by="seq", sort=True, **opts))
    assert got == expected


def test_transactions_span_frames_and_partitions(spark):
    # every transaction's Begin, DML and Commit in different frames
    recs = _records(seed=11, n_txns=12)
    frames = [encode_frame([r]) for r in recs]
    expected = _expected(frames, {})
    assert sum(1 for r in expected if r["op"] in "IUD") > 10
    df = _df(spark, frames, 4, seed=3)
    got = _spark_rows(opengauss_decode_changes(df, order_by="seq", sort=True))
    assert got == expected
    # unsorted: the same rows
    unsorted = _spark_rows(opengauss_decode_changes(df, order_by="seq"))
    key = lambda r: (r["commit_lsn"], r["seq"] if r["seq"] is not None else -1)  # noqa: E731
    assert sorted(unsorted, key=key) == sorted(expected, key=key)


@pytest.mark.on_cluster
def test_decode_changes_takes_the_opengauss_source(spark):
    from pgoutput_codec.spark import decode_changes
    frames = _frames(_records(seed=2), seed=2)
    df = _df(spark, frames, 2)
    assert _spark_rows(decode_changes(df, source="opengauss", order_by="seq")) == _expected(frames, {})
    with pytest.raises(ValueError, match="source"):
        decode_changes(df, source="mysql")


def test_the_opengauss_functions_are_the_others_with_the_opengauss_source(spark):
    """``opengauss_messages``, ``opengauss_decode_changes`` and ``opengauss_change_type``
    are ``decode_messages``, ``decode_changes`` (unsorted by default) and ``change_type``
    with ``source="opengauss"``, as ``pgoutput_codec.decode_changes`` takes it in one
    process; an option of one source is refused with the other."""
    from pgoutput_codec.spark import change_type, decode_changes, decode_messages, opengauss_messages
    frames = _frames(_records(seed=3), seed=3)
    df = _df(spark, frames, 2)
    for opts in ({}, {"include_xids": False, "mode": "PERMISSIVE"}):
        assert change_type(source="opengauss", **opts) == opengauss_change_type(**opts)
    assert change_type(source="opengauss") != change_type()
    records = decode_messages(df, source="opengauss", style="b")
    assert records.schema == opengauss_messages(df).schema
    by_place = lambda r: (r["seq"], r["record"])  # noqa: E731
    assert sorted(_spark_rows(records), key=by_place) == sorted(_spark_rows(opengauss_messages(df)), key=by_place)
    key = lambda r: (r["commit_lsn"], r["seq"])  # noqa: E731
    assert sorted(_spark_rows(decode_changes(df, source="opengauss", order_by="seq", sort=False)), key=key) == \
        sorted(_expected(frames, {}), key=key)
    assert _spark_rows(opengauss_decode_changes(df, order_by="seq", sort=True)) == _expected(frames, {})
    with pytest.raises(ValueError, match="fields: options of source='pgoutput'"):
        decode_messages(df, source="opengauss", fields=["type"])
    with pytest.raises(ValueError, match="style: an option of source='opengauss'"):
        decode_messages(df, style="t")
    for call in (lambda: decode_messages(df, source="mysql"), lambda: change_type(source="mysql")):
        with pytest.raises(ValueError, match="source must be 'pgoutput' or 'opengauss'"):
            call()


def test_error_frames(spark):
    frames = _frames(_records(seed=5, n_txns=10), seed=5)
    bad = bytearray(frames[3])
    bad[4:12] = b"\xff" * 8     # lsn is free-form; break the length instead
    bad[0:4] = b"\x00\x00\xff\xff"
    frames[3] = bytes(bad)
    df = _df(spark, frames, 2)
    with pytest.raises(PgoutputDecodeError, match="order key 16"):
        opengauss_decode_changes(df, order_by="seq")
    expected = _expected(frames, {"errors": "drop"})
    got = _spark_rows(opengauss_decode_changes(df, order_by="seq", sort=True, errors="drop"))
    assert got == expected


def test_duplicate_order_keys_are_refused(spark):
    frames = _frames(_records(seed=2, n_txns=3), seed=2)
    df = spark.createDataFrame([(1, f) for f in frames], "seq long, data binary")
    with pytest.raises(ValueError, match="appears on two frames"):
        opengauss_decode_changes(df, order_by="seq")


def test_transactions_received_again_given_once_and_frames_out_of_order_refused(spark):
    """The frames from the 10th on received a second time (a consumer that reconnected
    before confirming them): the same rows as the frames once; swapped frames: refused."""
    from pgoutput_codec.errors import ArchiveOrderError
    from pgoutput_codec.spark import replayed_of

    frames = _frames(_records(seed=4, n_txns=16), seed=4)
    again = frames + frames[10:]
    replayed = []
    expected = _expected(frames, {})
    assert _expected(again, {}) == expected
    decode_changes(pa.array(again, pa.binary()), replayed=replayed)
    assert len(replayed) >= 3
    out = opengauss_decode_changes(_df(spark, again, 3), order_by="seq", sort=True)
    assert _spark_rows(out) == expected
    assert [(r["xid"], r["commit_lsn"]) for r in replayed_of(out)] == [
        (r["xid"], r["commit_lsn"]) for r in replayed]
    kept = opengauss_decode_changes(_df(spark, again, 3), order_by="seq", sort=True, replays="keep")
    assert _spark_rows(kept) == _expected(again, {"replays": "keep"}) != expected
    commits = [i for i, f in enumerate(frames) if _expected([f], {"skip_empty_xacts": False})]
    i, j = commits[2], commits[5]
    swapped = frames[:i] + [frames[j]] + frames[i + 1:j] + [frames[i]] + frames[j + 1:]
    with pytest.raises(ArchiveOrderError, match="not in arrival order"):
        opengauss_decode_changes(_df(spark, swapped, 2), order_by="seq")


def _ins(lsn, table=("public", "t2"), v=b"1"):
    return Record("I", lsn, schema=table[0], table=table[1], new_tuple=(Column("id", 20, v), Column("v", 1700, v)))


EDGE_STREAMS = {
    # an uncommitted transaction replaced by the next Begin in the same frame
    "begin_replaces_open": [[Record("B", 1, csn=1, first_lsn=1, xid=7), _ins(2),
                             Record("B", 3, csn=2, first_lsn=3, xid=8), _ins(4), Record("C", 5, xid=8)]],
    # the same across frames, then an empty transaction and DML outside any transaction
    "across_frames": [[Record("B", 1, csn=1, first_lsn=1, xid=7), _ins(2)],
                      [Record("B", 3, csn=2, first_lsn=3, xid=8)], [_ins(4)], [Record("C", 5, xid=8)],
                      [Record("B", 6, csn=3, first_lsn=6, xid=9), Record("C", 7)],
                      [_ins(8, ("app", "t3"))], [_ins(9)], [Record("C", 10, xid=10, commit_time="2024-01-01 00:00:00+00")],
                      [Record("C", 11, xid=11)]],
}


@pytest.mark.parametrize("name", sorted(EDGE_STREAMS))
@pytest.mark.parametrize("opts", [{}, {"skip_empty_xacts": False}, {"skip_empty_xacts": False, "tables": "app.*"}],
                         ids=["defaults", "keep-empty", "keep-empty-t3"])
def test_transaction_edges(spark, name, opts):
    frames = [encode_frame(recs) for recs in EDGE_STREAMS[name]]
    expected = _expected(frames, opts)
    got = _spark_rows(opengauss_decode_changes(_df(spark, frames, 4, seed=1), order_by="seq", sort=True, **opts))
    assert got == expected


@pytest.mark.parametrize("style", ["t", "j"])
def test_text_styles(spark, style):
    from pgoutput_codec.opengauss.encode import encode_text_frame
    from pgoutput_codec.opengauss import decode_batch

    recs = [Record("B", 1, csn=1, first_lsn=1, xid=7, commit_time="2024-02-05 14:46:35.203057+08"),
            Record("I", 2, schema="public", table="t1", new_tuple=(Column("a", None, b"1", type_name="integer"),)),
            Record("C", 3, xid=7, commit_time="2024-02-05 14:46:35.203057+08"),
            Record("B", 4, csn=2, first_lsn=4, xid=8),
            Record("U", 5, schema="public", table="t1", new_tuple=(Column("a", None, b"2", type_name="integer"),),
                   old_tuple=(Column("a", None, b"1", type_name="integer"),))]
    frames = [encode_text_frame(recs[:2], style=style), encode_text_frame(recs[2:4], style=style),
              encode_text_frame(recs[4:], style=style), encode_text_frame([Record("C", 6, xid=8)], style=style)]
    assert decode_batch(pa.array(frames, pa.binary()), style=style).column("error").null_count == len(recs) + 1
    expected = decode_changes(pa.array(frames, pa.binary()), style=style)
    assert expected.num_rows == 2
    got = _spark_rows(opengauss_decode_changes(_df(spark, frames, 2), order_by="seq", style=style, sort=True))
    assert got == _expected(frames, {"style": style})
    # typed by the type names the text styles send (they send no OID)
    from pgoutput_codec.spark import snapshot
    snap = snapshot(opengauss_decode_changes(_df(spark, frames, 2), order_by="seq", style=style), "public.t1")
    assert snap.schema["a"].dataType.typeName() == "integer" and _spark_rows(snap) == [{"a": 2}]


# --------------------------------------------------------------------------- modes

def _malformed(seed=7):
    """Frames with three malformed ones: a first record's length past the end of its frame
    (key 13), a frame cut in half (key 25) and a null payload (key 31)."""
    frames = _frames(_records(seed=seed, n_txns=12), seed=seed)
    past = bytearray(frames[2])
    past[0:4] = b"\x00\x00\xff\xff"
    frames[2] = bytes(past)
    frames[6] = frames[6][:len(frames[6]) // 2]
    frames[8] = None
    return frames, [2, 6, 8]


def test_modes_failfast_names_key_lsn_and_offset(spark):
    from pgoutput_codec.spark.modes import MalformedPayloadError
    frames, _bad = _malformed()
    df = _df(spark, frames, 3)
    with pytest.raises(MalformedPayloadError,
                       match=r"order key 13, lsn [0-9A-F]+/[0-9A-F]+\): \w+ \('\w'\) at byte 4: record: needs "
                             r"65535 bytes.*Parse mode: FAILFAST"):
        opengauss_decode_changes(df, order_by="seq")
    with pytest.raises(MalformedPayloadError, match="order key 13"):   # the default mode, via the dispatcher
        from pgoutput_codec.spark import decode_changes as spark_decode_changes
        spark_decode_changes(df, source="opengauss", order_by="seq", mode="FAILFAST")


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.on_cluster
def test_modes_permissive_and_dropmalformed_count_every_frame(spark, partitions):
    from pyspark.sql import Observation

    from pgoutput_codec.spark import decode_changes as spark_decode_changes
    frames, bad = _malformed()
    expected = _expected(frames, {"errors": "drop"})
    assert len(expected) > 20
    df = _df(spark, frames, partitions, seed=partitions)

    obs = Observation("og_permissive")
    got = _spark_rows(spark_decode_changes(df, source="opengauss", order_by="seq", mode="PERMISSIVE",
                                           observation=obs))
    errs = {int(r["error"].split("order key ")[1].split(",")[0].split(")")[0]): r
            for r in got if r["error"] is not None}
    assert sorted(errs) == [i * 3 + 7 for i in bad]          # one row per malformed frame
    assert [errs[i * 3 + 7][ST.CORRUPT_RECORD] for i in bad] == [frames[i] for i in bad]
    assert all(r["op"] is None and r["commit_lsn"] is None and r["seq"] is not None for r in errs.values())
    assert "at byte 4: record: needs 65535 bytes" in errs[13]["error"] and errs[13]["lsn"] is not None
    assert "at byte" in errs[25]["error"] and "null input row" in errs[31]["error"]
    ok = [{k: v for k, v in r.items() if k not in ("error", ST.CORRUPT_RECORD)} for r in got
          if r["error"] is None]
    assert ok == expected
    assert obs.get == {"rows_in": len(frames), "rows_decoded": len(frames) - len(bad), "rows_in_error": len(bad)}

    obs = Observation("og_drop")
    dropped = _spark_rows(opengauss_decode_changes(df, order_by="seq", sort=True, mode="DROPMALFORMED",
                                                   observation=obs))
    assert dropped == expected and "error" not in dropped[0] and ST.CORRUPT_RECORD not in dropped[0]
    assert obs.get == {"rows_in": len(frames), "rows_decoded": len(frames) - len(bad), "rows_in_error": len(bad)}
    # the older spelling
    assert _spark_rows(opengauss_decode_changes(df, order_by="seq", sort=True, errors="drop")) == expected


def test_commit_window(spark):
    """after_lsn/until_lsn: the single-process rows filtered on commit_lsn, in Spark the
    same; PERMISSIVE keeps every row in error whatever the window."""
    from pgoutput_codec.pgoutput.messages import format_lsn
    frames = _frames(_records(seed=4), seed=4)
    full = decode_changes(pa.array(frames, pa.binary()))
    lsns = sorted(set(full.column("commit_lsn").to_pylist()))
    a, u = lsns[len(lsns) // 3], lsns[2 * len(lsns) // 3]
    c = full.column("commit_lsn")
    inside = full.filter(pc.and_(pc.greater(c, a), pc.less_equal(c, u)))
    assert 0 < len(inside) < len(full)
    assert decode_changes(pa.array(frames, pa.binary()), after_lsn=a, until_lsn=format_lsn(u)).equals(inside)
    expected = _expected(frames, {"after_lsn": a, "until_lsn": u})
    got = _spark_rows(opengauss_decode_changes(_df(spark, frames, 3), order_by="seq", sort=True,
                                               after_lsn=a, until_lsn=format_lsn(u)))
    assert got == expected and len(got) == len(inside)
    bad_frames, bad = _malformed()
    perm = _spark_rows(opengauss_decode_changes(_df(spark, bad_frames, 3), order_by="seq", mode="PERMISSIVE",
                                                after_lsn=a))
    assert sum(r["error"] is not None for r in perm) == len(bad)
    assert all(r["commit_lsn"] > a for r in perm if r["error"] is None)


def test_a_table_whose_key_the_records_never_name(spark):
    """Inserts and Updates that keep their key name no key (openGauss sends an old key only
    for key changes and Deletes): snapshot, history and net_changes refuse such an Update
    where they meet it rather than keep both images; declared ``keys`` rebuild the table
    as the single-process decoder does."""
    import importlib.util
    from pathlib import Path
    from pgoutput_codec.spark import snapshot
    from pgoutput_codec.tables import snapshot as snapshot_1
    spec = importlib.util.spec_from_file_location(
        "_og_changes", Path(__file__).resolve().parents[1] / "opengauss" / "test_og_changes.py")
    og = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(og)
    values = og._kept_key_frames()
    df = _df(spark, values.to_pylist(), 2)
    ch = opengauss_decode_changes(df, order_by="seq")
    with pytest.raises(Exception, match=r"public\.t: an Update committed at 130 carries no old key"):
        _spark_rows(snapshot(ch, "public.t"))     # (history and net_changes: the same events, one check)
    keys = "public.t(id)"
    got = opengauss_decode_changes(df, order_by="seq", keys=keys)
    want = snapshot_1(decode_changes(values, keys=keys), "public.t").to_pylist()
    assert sorted(_spark_rows(snapshot(got, "public.t")), key=str) == sorted(want, key=str) == [
        {"id": 1, "v": "a2"}, {"id": 2, "v": "b"}]
    with pytest.raises(ValueError, match="public.t has no column 'x'"):
        opengauss_decode_changes(df, order_by="seq", keys="public.t(x)")


@pytest.mark.same_code_on_connect
@pytest.mark.same_code_on_spark35
# (the text path: types by name, unchanged TOAST), then the soak's seeds in 'b' and 't' by turns
@pytest.mark.parametrize("style,seed", [("t", 1)] + [("bt"[s % 2], s) for s in soak_seeds()])
def test_random_sessions_rebuild_the_model_tables(spark, style, seed):
    """A random session sent as openGauss does (tests/archive_model.py OpenGaussSession:
    key changes, unchanged TOAST in 't', FULL identity, frames cut anywhere), its frames
    in 3 partitions out of order: Spark's changes equal single-process, and snapshot (now
    and as of a commit), history and net_changes give the model's tables (seed 1: public.a's
    key never named, declared)."""
    import archive_model
    import change_cases as TC
    from pyspark.sql import functions as F
    from pgoutput_codec.spark import history, net_changes, snapshot
    model = archive_model.OpenGaussSession(seed, events=50)
    if seed % 4 < 2:
        model.fixed_keys = {16400}
    model.build(finish=False)
    frames = model.frames(style)
    keys = "public.a(id)" if seed % 4 < 2 else None
    ch = opengauss_decode_changes(_df(spark, frames, 3, seed=seed), order_by="seq", style=style, keys=keys)
    assert _spark_rows(ch.orderBy("commit_lsn", "seq")) == _expected(frames, {"style": style, "keys": keys})
    lsn, then = model.states[len(model.states) // 2]
    lsn += 4      # (the Commit record's LSN is the transaction's end)
    for rid, (tname, _) in model.TABLES.items():
        name = f"public.{tname}"
        assert TC._norm(_spark_rows(snapshot(ch, name))) == TC._norm(model.rows(model.committed, rid)), name
        assert TC._norm(_spark_rows(snapshot(ch, name, as_of_lsn=lsn))) == TC._norm(model.rows(then, rid)), name
        alive = model.alive(_spark_rows(history(ch, name)), lsn)
        assert TC._norm(alive) == TC._norm(model.rows(then, rid)), name
        net = pa.Table.from_pylist(_spark_rows(net_changes(ch.where(F.col("commit_lsn") > F.lit(lsn)), name)))
        assert TC._apply_net(model.table(then, rid), net, model.key_columns(rid)) == TC._norm(model.rows(model.committed, rid)), name


@pytest.mark.parametrize("partitions", [1, 3])
def test_an_archive_spanning_alter_table(spark, partitions):
    """The column lists of an altered table (tests/opengauss/ogdata.altered_table_frames:
    a Delete's columns set by a record of an earlier frame — of an excluded user's or a
    never committed transaction — or of its own frame, or by the table's first later new
    tuple) equal the single-process decoder's, frames in any partition and order."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "opengauss"))
    from ogdata import altered_table_frames
    frames, names = altered_table_frames()
    opts = {"exclude_users": "etl", "keys": "public.t(id)"}
    expected = _expected(frames, opts)
    assert [[c["name"] for c in r["columns"]] for r in expected] == names
    for seed in range(3):
        got = _spark_rows(opengauss_decode_changes(_df(spark, frames, partitions, seed), order_by="seq", sort=True,
                                                   **opts))
        assert got == expected, seed
    # Spark's typed table over them: every version's columns, as the single-process one
    from pgoutput_codec import tables as T
    from pgoutput_codec.spark import table_changes
    local = T.table_changes(decode_changes(pa.array(frames, pa.binary()), **opts), "public.t")
    typed = table_changes(opengauss_decode_changes(_df(spark, frames, partitions), order_by="seq", **opts), "public.t")
    got = _spark_rows(typed.orderBy("seq").select(*local.column_names))
    # (b changed type: Spark's schema gives it a __special, null here)
    assert said([(r["seq"], r["before"], r["after"]) for r in got]) == \
        said([(r["seq"], r["before"], r["after"]) for r in local.to_pylist()])


@pytest.mark.parametrize("scenario", [
    pytest.param("ends_default", marks=[pytest.mark.same_code_on_connect, pytest.mark.same_code_on_spark35]),
    pytest.param("ends_full", marks=[pytest.mark.same_code_on_connect, pytest.mark.same_code_on_spark35]),
    "no_common_key"])
def test_rows_are_found_across_replica_identity_changes(spark, scenario):
    """A table whose REPLICA IDENTITY changes while the archive runs
    (tests/identity_moves.py, frames of 3 records cut across transactions): each record's
    key is its old tuple's, else the key in force, which may come from an earlier frame
    or the table's first later one; Spark's rows equal the single-process ones in 1 and 3
    partitions, and Spark's snapshot, history and net_changes give the final rows as the
    single-process functions do."""
    import identity_moves as IM

    from pgoutput_codec import tables as T1
    from pgoutput_codec.spark import history, net_changes, snapshot
    steps = IM.SCENARIOS[scenario]
    _, final = IM.messages(steps)
    frames = IM.og_frames(steps, 3)
    expected = _expected(frames, {})
    local = decode_changes(pa.array(frames, pa.binary()))
    name = f"public.{IM.TABLE}"

    def rows(t):
        return sorted(tuple(r[c] for c in IM.NAMES) for r in t)

    def hist(t):
        return sorted((r["id"], r["v"], r["u"], r["__OP"], r["__START_LSN"], r["__END_LSN"]) for r in t)

    def net(t):
        return sorted((r["__OP"], r["id"], r["v"], r["u"], r["__COMMIT_LSN"]) for r in t)
    assert rows(T1.snapshot(local, name).to_pylist()) == final
    for partitions, seed in ((1, 0), (3, 1), (3, 2)):
        ch = opengauss_decode_changes(_df(spark, frames, partitions, seed), order_by="seq", sort=True)
        assert _spark_rows(ch) == expected, (partitions, seed)
    assert rows(_spark_rows(snapshot(ch, name))) == final
    assert hist(_spark_rows(history(ch, name))) == hist(T1.history(local, name).to_pylist())
    assert net(_spark_rows(net_changes(ch, name))) == net(T1.net_changes(local, name).to_pylist())
