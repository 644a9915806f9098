"""The placement of a chunk copied while the stream runs (cli/watermarks.py) over
hand-made streams: which transactions touch the table, which the chunk's snapshot sees,
and the splice of the chunk into the chosen watermark transaction."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pgoutput_codec.pgoutput.encode import encode_message as enc
from pgoutput_codec.cli import watermarks as wm
from pgoutput_codec.pgoutput.messages import (
    Begin, BeginPrepare, Commit, CommitPrepared, Delete, Insert, LogicalMessage, Prepare, StreamCommit,
    StreamStart, StreamStop, Truncate, TupleColumn, Update,
)

REL, OTHER = 16384, 16390
ROW = (TupleColumn("t", b"1"),)


def tx(xid, *changes, lsn=100):
    """A committed transaction: Begin, its changes, Commit."""
    return [enc(Begin(final_lsn=lsn, commit_ts=0, xid=xid)), *changes,
            enc(Commit(commit_lsn=lsn, end_lsn=lsn + 8, commit_ts=0))]


def ins(rel=REL, xid=None):
    return enc(Insert(relation_id=rel, new_tuple=ROW, xid=xid))


def mark(chunk, which, xid=None):
    return enc(LogicalMessage(flags=1, lsn=1, prefix=wm.PREFIX, content=wm.mark_content(chunk, which).encode(),
                              xid=xid))


def watermark(xid, chunk, which):
    return tx(xid, mark(chunk, which))


def scan(rows, relids=(REL,)):
    s = wm.Scanner(relids)
    for i, data in enumerate(rows):
        s.feed(i, data)
    return s.committed


# snapshot: sees xids below 102 except 97 (in progress when it was taken)
SNAP = wm.Snapshot(96, 102, frozenset({97}))


def test_snapshot_parse_and_visibility():
    s = wm.Snapshot.parse("100:105:101,103")
    assert s == wm.Snapshot(100, 105, frozenset({101, 103}))
    assert s.visible(50) and not s.visible(101) and s.visible(104) and not s.visible(103)
    assert not s.visible(105) and not s.visible(200)
    # 64-bit snapshot xids (epoch 1) against the stream's 32-bit xids
    e = wm.Snapshot((1 << 32) + 100, (1 << 32) + 105, frozenset())
    assert e.visible(99) and not e.visible(105)
    assert e.visible(0xFFFFFFF0)      # just before the wrap: the epoch before, long finished


def test_no_touching_transaction_between_puts_the_chunk_into_the_low_watermark():
    rows = watermark(90, 1, "low") + tx(91, ins(OTHER)) + tx(102, ins()) + watermark(103, 1, "high")
    got = wm.place(scan(rows), 1, REL, SNAP)
    assert got.mark == (1, "low") and got.begin == 0 and got.commit == 2


def test_only_visible_touching_transactions_put_it_into_the_high_watermark():
    rows = watermark(90, 1, "low") + tx(91, ins()) + tx(92, enc(Delete(relation_id=REL, old_kind="K", old_tuple=ROW))) \
        + watermark(103, 1, "high")
    got = wm.place(scan(rows), 1, REL, SNAP)
    assert got.mark == (1, "high")


@pytest.mark.parametrize("between", [
    [91, 102],     # visible then invisible
    [102, 91],     # invisible then visible (an older xid committing later)
    [97, 91],      # in xip then visible
])
def test_a_mix_is_taken_again(between):
    rows = watermark(90, 1, "low")
    for xid in between:
        rows += tx(xid, enc(Update(relation_id=REL, new_tuple=ROW)))
    rows += watermark(103, 1, "high")
    assert wm.place(scan(rows), 1, REL, SNAP) == wm.RETAKE


def test_an_invisible_touching_transaction_before_the_low_watermark_is_taken_again():
    rows = tx(97, ins()) + watermark(98, 1, "low") + watermark(103, 1, "high")
    assert wm.place(scan(rows), 1, REL, SNAP) == wm.RETAKE
    rows = tx(97, ins(OTHER)) + watermark(98, 1, "low") + watermark(103, 1, "high")   # another table
    assert wm.place(scan(rows), 1, REL, SNAP).mark == (1, "low")


def test_a_truncate_naming_the_table_touches_it():
    t = enc(Truncate(options=0, relation_ids=(OTHER, REL)))
    rows = watermark(90, 1, "low") + tx(91, t) + tx(102, ins(OTHER)) + watermark(103, 1, "high")
    assert wm.place(scan(rows), 1, REL, SNAP).mark == (1, "high")


def test_no_high_watermark_yet_waits():
    rows = watermark(90, 1, "low") + tx(91, ins())
    assert wm.place(scan(rows), 1, REL, SNAP) is None
    assert wm.place(scan(watermark(90, 2, "low") + watermark(91, 2, "high")), 1, REL, SNAP) is None


def test_streamed_and_prepared_transactions_count_at_their_commit():
    rows = [enc(StreamStart(xid=102, first_segment=True)), ins(xid=102), enc(StreamStop())]
    rows += watermark(90, 1, "low")
    rows += [enc(StreamCommit(xid=102, commit_lsn=5, end_lsn=6, commit_ts=0))]     # invisible, after low
    rows += [enc(BeginPrepare(prepare_lsn=7, end_lsn=8, prepare_ts=0, xid=104, gid="g")), ins(),
             enc(Prepare(prepare_lsn=7, end_lsn=8, prepare_ts=0, xid=104, gid="g"))]
    rows += watermark(103, 1, "high")
    assert wm.place(scan(rows), 1, REL, SNAP).mark == (1, "low")     # the prepared one commits later
    rows += [enc(CommitPrepared(commit_lsn=9, end_lsn=10, commit_ts=0, xid=104, gid="g"))]
    assert wm.place(scan(rows), 1, REL, SNAP).mark == (1, "low")
    # a streamed transaction whose first block went by before the scan: taken as touching
    rows = [enc(StreamStart(xid=91, first_segment=False)), ins(OTHER, xid=91), enc(StreamStop())]
    rows += watermark(90, 1, "low") + [enc(StreamCommit(xid=91, commit_lsn=5, end_lsn=6, commit_ts=0))]
    rows += tx(102, ins()) + watermark(103, 1, "high")
    assert wm.place(scan(rows), 1, REL, SNAP) == wm.RETAKE
    # ... and one whose blocks were all seen and touch another table: not touching
    rows[0] = enc(StreamStart(xid=91, first_segment=True))
    assert wm.place(scan(rows), 1, REL, SNAP).mark == (1, "low")


def test_splice_makes_the_watermark_a_copy_transaction():
    rows = tx(91, ins(OTHER)) + watermark(90, 1, "low") + watermark(103, 1, "high")
    low = wm.place(scan(rows), 1, REL, SNAP)
    assert (low.begin, low.commit) == (3, 5)
    n = len(rows)
    table = pa.table({"seq": pa.array(range(n), pa.int64()), "lsn": [f"0/{i:X}" for i in range(n)],
                      "lsn_ordinal": pa.array([0] * n, pa.int32()), "xid": pa.array([91] * 3 + [90] * 3 + [103] * 3,
                                                                                     pa.int64()),
                      "data": pa.array(rows, pa.binary())})
    chunk = [pa.table({"data": pa.array([b"Rrel", b"I1"], pa.binary())}), pa.table({"data": pa.array([b"I2"])})]
    for cut in (1, 4, 5, 9):       # the file's rows in pieces cut anywhere
        pieces = [table.slice(0, cut), table.slice(cut)] if cut < n else [table]
        out = pa.concat_tables(wm.splice(pieces, 0, low, chunk))
        data = out.column("data").to_pylist()
        assert data[:4] == rows[:3] + [wm.copy_begin(rows[3])]
        assert data[3][:17] == rows[3][:17] and data[3][17:] == b"\0\0\0\0"
        assert data[4:9] == [rows[4], b"Rrel", b"I1", b"I2", rows[5]]
        assert data[9:] == rows[6:]
        assert out.column("xid").to_pylist() == [91] * 3 + [0] * 6 + [103] * 3
        assert out.column("lsn").to_pylist()[5:8] == ["0/5"] * 3     # the Commit's


def test_a_chunk_is_judged_with_the_transactions_of_the_last_file_too(tmp_path):
    """A transaction of the archive's last file, touching the table and still in progress
    for the chunk's snapshot (its commit decoded before the backend left the snapshot's
    running set), has the chunk taken again: its change is not in the chunk and lies
    before the watermarks."""
    from pgoutput_codec.cli.capture import _SCHEMA, _last_file_transactions, _write_new

    def write(name, rows):
        n = len(rows)
        _write_new(str(tmp_path / name), _SCHEMA, [pa.table({
            "seq": pa.array(range(n), pa.int64()), "lsn": ["0/1"] * n, "lsn_ordinal": pa.array([0] * n, pa.int32()),
            "xid": pa.array([0] * n, pa.int64()), "data": pa.array(rows, pa.binary())}, schema=_SCHEMA)])

    assert _last_file_transactions(str(tmp_path), REL) == []
    write("part-000000.parquet", tx(97, ins()))                     # (not the last file)
    write("part-000001.parquet", tx(91, ins()) + tx(92, ins(OTHER)))
    before = _last_file_transactions(str(tmp_path), REL)
    assert [(t.xid, t.commit < 0) for t in before] == [(91, True)]
    peeked = scan(watermark(98, 1, "low") + watermark(103, 1, "high"))
    assert wm.place(before + peeked, 1, REL, SNAP).mark == (1, "low")
    write("part-000002.parquet", tx(97, ins()) + watermark(99, 2, "low"))
    before = _last_file_transactions(str(tmp_path), REL)
    assert [t.xid for t in before] == [97]
    assert wm.place(before + peeked, 1, REL, SNAP) == wm.RETAKE


def test_a_copy_file_with_foreign_copy_metadata_is_refused_in_one_line(tmp_path):
    import json

    from pgoutput_codec.archive import META_KEY
    from pgoutput_codec.cli.capture import _SCHEMA, _copy_state, _write_new
    from pgoutput_codec.cli.console import CliError

    path = str(tmp_path / "part-000000.parquet")
    meta = {"copy": {"kind": "initial", "tables": [{"table": "t"}]}}
    _write_new(path, _SCHEMA.with_metadata({META_KEY: json.dumps(meta).encode()}), [])
    with pytest.raises(CliError, match="copy metadata is not what capture writes"):
        _copy_state([path])
