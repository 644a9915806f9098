"""openGauss 'b' frames decoded in pieces on several threads give what one thread gives:
records (with their input row), heartbeats, errors, and change rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pgoutput_codec import decode_changes, threads
from pgoutput_codec.opengauss import decode_batch
from pgoutput_codec.opengauss.encode import encode_frame, encode_heartbeat
from pgoutput_codec.opengauss.messages import Column, Record

TS = "2024-02-05 14:46:35.203057+08"


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch):
    monkeypatch.setattr(threads, "MIN_PIECE_ROWS", 5)
    monkeypatch.setattr(threads, "PIECE_BYTES", 400)


def _frames(n_txn: int, seed: int) -> list:
    """Transactions of a few Inserts, Updates and Deletes, one frame each, with
    heartbeats between some, and every so often a frame damaged."""
    rng = np.random.default_rng(seed)
    frames, lsn = [], 0x1000
    for t in range(n_txn):
        recs = [Record("B", lsn, csn=t, first_lsn=lsn, xid=100 + t, commit_time=TS, options="XT")]
        for k in range(int(rng.integers(1, 5))):
            lsn += 16
            key = str(t * 10 + k).encode()
            op = "IUD"[int(rng.integers(0, 3))]
            if op == "I":
                recs.append(Record("I", lsn, schema="public", table=f"t{k % 2}",
                                   new_tuple=(Column("id", 23, key), Column("v", 25, b"x" * int(rng.integers(0, 40))))))
            elif op == "U":
                recs.append(Record("U", lsn, schema="public", table=f"t{k % 2}",
                                   new_tuple=(Column("id", 23, key), Column("v", 25, None)),
                                   old_tuple=(Column("id", 23, key),)))
            else:
                recs.append(Record("D", lsn, schema="public", table=f"t{k % 2}", old_tuple=(Column("id", 23, key),)))
        lsn += 16
        recs.append(Record("C", lsn, xid=100 + t, commit_time=TS, options="XT"))
        frame = encode_frame(recs)
        if t % 17 == 5:
            frame = frame[:int(rng.integers(1, len(frame)))]          # cut short
        frames.append(frame)
        if t % 7 == 3:
            frames.append(encode_frame([encode_heartbeat(lsn)]))
    return frames


def test_frames_in_pieces():
    values = pa.array(_frames(200, 1), pa.binary())
    want = decode_batch(values, workers=1)
    got = decode_batch(values, workers=3)
    assert got.equals(want) and got.schema.metadata == want.schema.metadata
    assert want.column("error").null_count < len(want)      # the damaged frames are there
    # split over chunks of a chunked array too
    chunked = pa.chunked_array([values.slice(0, 77), values.slice(77)])
    assert decode_batch(chunked, workers=3).equals(want)


def test_change_rows_in_pieces():
    values = pa.array(_frames(200, 2), pa.binary())
    for options in ({"errors": "drop"}, {"errors": "drop", "tables": "public.t1"}):
        want = decode_changes(values, source="opengauss", workers=1, **options)
        assert len(want)
        assert decode_changes(values, source="opengauss", workers=3, **options).equals(want)
