"""'b' style: every record type and option combination, both batch modes and both end
markers, XLogData wrapping, malformed input; compiled decoder against the Python twin."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgoutput_codec.errors import PgoutputDecodeError
from pgoutput_codec.opengauss import RECORD_SCHEMA, decode_batch, decode_frame, decode_record, heartbeats
from pgoutput_codec.opengauss.batch import decode_batch_py
from pgoutput_codec.opengauss.encode import encode_frame, encode_heartbeat, encode_record, xlogdata

from ogdata import begin_variants, commit_variants, expected_rows, records, sample_records


def test_compiled_module_is_loaded():
    from pgoutput_codec._native import USING_EXTENSIONS
    from pgoutput_codec.opengauss import _parse as _binary
    assert USING_EXTENSIONS and _binary.__file__.endswith((".so", ".pyd"))


def test_schema_matches_builder(batch_decoder):
    t = batch_decoder([encode_frame(sample_records())])
    assert t.schema.remove_metadata() == RECORD_SCHEMA
    t.validate(full=True)


def test_known_bytes_of_an_insert():
    # laid out by hand from parallel_decode.cpp AppendRelation/AppendTuple
    body = (b"\0\0\0\0\0\0\0\x2a" b"I" b"\0\x06public" b"\0\x02t1" b"N" b"\0\x02"
            b"\0\x01a" b"\0\0\0\x17" b"\0\0\0\x011"
            b"\0\x01b" b"\0\0\0\x19" b"\xff\xff\xff\xff")
    frame = struct.pack(">I", len(body)) + body + b"F"
    rec = decode_frame(frame).records[0]
    assert (rec.type, rec.lsn, rec.schema, rec.table) == ("I", 42, "public", "t1")
    assert rec.new_tuple == (("a", 23, b"1", None, False), ("b", 25, None, None, False))
    assert encode_frame([rec]) == frame


@pytest.mark.parametrize("end", ["F", "P0"])
@pytest.mark.parametrize("wrap", [None, (1, 2, -3)])
def test_batch_round_trip(end, wrap, batch_decoder):
    recs = sample_records()
    frame = encode_frame(recs, end=end, xlog=wrap)
    f = decode_frame(frame)
    assert f.records == tuple(recs) and f.end == end and f.xlogdata == wrap
    assert [r.options for r in f.records] == [r.options for r in recs]
    assert encode_frame(f) == frame
    t = batch_decoder([frame])
    assert t.to_pylist() == expected_rows([(0, recs)])


def test_sending_batch_0_each_record_its_own_frame(batch_decoder):
    recs = sample_records()
    frames = [encode_frame([r]) for r in recs]
    assert all(f.endswith(b"F") for f in frames)
    t = batch_decoder(pa.array(frames, pa.large_binary()))
    assert t.to_pylist() == expected_rows([(i, [r]) for i, r in enumerate(recs)])
    assert [decode_record(encode_record(r)) for r in recs] == recs
    assert decode_record(encode_record(recs[0]) + b"P") == recs[0]


@pytest.mark.parametrize("variants", [begin_variants, commit_variants])
def test_every_option_combination(variants, batch_decoder):
    recs = list(variants())
    frame = encode_frame(recs)
    got = decode_frame(frame).records
    assert got == tuple(recs) and [r.options for r in got] == [r.options for r in recs]
    assert encode_frame(got) == frame
    assert batch_decoder([frame]).to_pylist() == expected_rows([(0, recs)])


def test_empty_batch_and_heartbeats(batch_decoder):
    recs = sample_records()[:2]
    frame = encode_frame([encode_heartbeat(1, b"\0" * 16), recs[0], encode_heartbeat(2), recs[1]], end="P0")
    t = batch_decoder([frame, b"\0\0\0\0", xlogdata(b"\0\0\0\0")])
    assert heartbeats(t) == 2
    assert t.to_pylist() == expected_rows([(0, recs)])
    assert decode_frame(frame).heartbeats == 2 and decode_frame(b"\0\0\0\0").end == "0"


def test_chunked_and_sliced_input(batch_decoder):
    recs = sample_records()
    frames = [encode_frame([r]) for r in recs]
    arr = pa.chunked_array([pa.array(frames[:3]), pa.array([None] + frames[3:]).slice(1)])
    assert batch_decoder(arr).to_pylist() == expected_rows([(i, [r]) for i, r in enumerate(recs)])


def _errors(t):
    return [(r["row"], r["type"], r["error"]) for r in t.to_pylist() if r["error"]]


def test_error_texts(batch_decoder):
    good = encode_record(sample_records()[1])
    bad_tag = struct.pack(">I", 9) + b"\0" * 8 + b"Z"
    cases = {
        b"": "Frame at byte 0: empty frame",
        b"\0\0": "Frame at byte 0: record length: needs 4 bytes, 2 left; the rest of the frame was not decoded",
        b"\0\0\0\x05abcde": "Frame at byte 0: record length 5 is less than 9 (UInt64 lsn + tag); the rest of the frame was not decoded",
        good + b"X": "Insert ('I') at byte %d: separator: unexpected byte 'X'; the rest of the frame was not decoded" % len(good),
        good: "Insert ('I') at byte %d: separator: needs 1 bytes, 0 left; the rest of the frame was not decoded" % len(good),
        good + b"P": "Frame at byte %d: record length: needs 4 bytes, 0 left; the rest of the frame was not decoded" % (len(good) + 1),
        good + b"Fxx": "Frame at byte %d: 2 bytes left after the batch end 'F'; the rest of the frame was not decoded" % (len(good) + 1),
        good + b"P\0\0\0\0x": "Frame at byte %d: 1 bytes left after the UInt32 0 that ends the batch; the rest of the frame was not decoded" % (len(good) + 5),
        b"w\0\0": "XLogData ('w') at byte 1: XLogData header: needs 24 bytes, 2 left; the rest of the frame was not decoded",
        bad_tag + b"F": "Record ('Z') at byte 12: unknown record type 'Z'",
        struct.pack(">I", 100) + good: "Record ('\\x0c') at byte 4: record: needs 100 bytes, %d left; the rest of the frame was not decoded" % len(good),
    }
    for data, text in cases.items():
        t = batch_decoder([data])
        assert [e[2] for e in _errors(t)] == [text], data
    with pytest.raises(PgoutputDecodeError) as ei:
        decode_frame(bad_tag + b"F")
    assert ei.value.offset == 12 and ei.value.message_type == "Z"
    t = batch_decoder([None])
    assert _errors(t) == [(0, None, "Frame at byte 0: null input row")]
    t = batch_decoder([good + b"F"], envelope="xlogdata")
    assert _errors(t) == [(0, None, "Frame at byte 0: not an XLogData ('w') frame")]


def test_bad_record_in_the_middle_is_an_error_row_and_the_rest_is_decoded(batch_decoder):
    recs = sample_records()
    bad = bytearray(encode_record(recs[1]))
    bad[4 + 8 + 1 + 2 + 6 + 2 + 2 + 1 + 2 + 2] = 0xFF  # first column name -> invalid UTF-8
    frame = encode_frame([encode_record(recs[0]), bytes(bad)] + recs[2:])
    t = batch_decoder([frame])
    rows = t.to_pylist()
    assert len(rows) == len(recs)
    assert rows[1]["type"] == "I" and rows[1]["lsn"] == recs[1].lsn
    assert rows[1]["error"].startswith("Insert ('I') at byte ") and "column name of column 0 is not valid UTF-8" in rows[1]["error"]
    assert "rest of the frame" not in rows[1]["error"]
    ok = [r for i, r in enumerate(rows) if i != 1]
    assert ok == expected_rows([(0, [recs[0]] + recs[2:])])


@pytest.mark.parametrize("wrap", [None, (5, 6, 7)])
def test_truncated_at_every_byte(wrap, batch_decoder):
    recs = sample_records()
    for end in ("F", "P0"):
        frame = encode_frame(recs, end=end, xlog=wrap)
        prefixes = [frame[:k] for k in range(len(frame))]
        t = batch_decoder(prefixes)
        assert t.equals(decode_batch_py(prefixes))
        per_row = {}
        for r in t.to_pylist():
            per_row.setdefault(r["row"], []).append(r)
        for k in range(len(frame)):
            assert per_row[k][-1]["error"], (end, k)   # every prefix ends in an error row
            with pytest.raises(PgoutputDecodeError):
                decode_frame(frame[:k])


@pytest.mark.parametrize("mutation", ["length", "separator", "tag"])
def test_corrupted_byte(mutation, batch_decoder):
    recs = sample_records()
    frame = bytearray(encode_frame(recs))
    first = len(encode_record(recs[0]))
    if mutation == "length":
        frame[first + 1:first + 5] = b"\x7f\xff\xff\xff"
    elif mutation == "separator":
        frame[first] = ord("Q")
    else:
        frame[first + 1 + 12] = ord("q")
    t = batch_decoder([bytes(frame)])
    assert t.equals(decode_batch_py([bytes(frame)]))
    assert t.column("error").null_count < t.num_rows
    rows = t.to_pylist()
    if mutation == "separator":   # the record whose separator is broken is the error row
        assert rows[0]["type"] == "B" and "separator: unexpected byte 'Q'" in rows[0]["error"]
    else:
        assert rows[0]["error"] is None and rows[1]["error"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=6), st.sampled_from(["F", "P0"]),
       st.one_of(st.none(), st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
                                      st.integers(-2**63, 2**63 - 1))))
def test_hypothesis_round_trip(recs, end, wrap):
    frame = encode_frame(recs, end=end, xlog=wrap)
    f = decode_frame(frame)
    assert f.records == tuple(recs)
    assert encode_frame(f) == frame
    t = decode_batch([frame])
    assert t.to_pylist() == expected_rows([(0, recs)])


@settings(max_examples=150, deadline=None)
@given(st.lists(records(), min_size=1, max_size=3), st.data())
def test_hypothesis_mutations_compiled_equals_python(recs, data):
    frame = bytearray(encode_frame(recs))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    frame = bytes(frame[:data.draw(st.integers(0, len(frame)))])
    t = decode_batch([frame])
    assert t.equals(decode_batch_py([frame]))
    t.validate(full=True)
