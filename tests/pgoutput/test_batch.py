"""decode_batch against decode_message: same values in every field of every row, for
both implementations; input forms, envelope modes, stream state tracking."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies as S
from pgoutput_codec import PgoutputDecodeError
from pgoutput_codec.pgoutput.encode import encode_message
from pgoutput_codec.pgoutput.facts import STREAMABLE_TAGS
from pgoutput_codec.pgoutput.messages import StreamStart, StreamStop, XLogData
from pgoutput_codec.schema import MESSAGE_STRUCT, TS

from vectors import BY_NAME, VECTORS

EPOCH_SHIFT = 946_684_800_000_000
TS_FIELDS = {f.name for f in MESSAGE_STRUCT if f.type == TS}


def arrow_ts(us):
    v = (us + EPOCH_SHIFT) % 2**64
    return v - 2**64 if v >= 2**63 else v


def expected_row(msg):
    """The row decode_batch must produce for a decoded message (schema.py)."""
    row = {f.name: None for f in MESSAGE_STRUCT}
    if isinstance(msg, XLogData):
        row.update(wal_start=msg.wal_start, wal_end=msg.wal_end, send_time=arrow_ts(msg.send_time))
        msg = msg.payload
    row["type"] = msg.type
    for f in dataclasses.fields(msg):
        v = getattr(msg, f.name)
        if v is None:
            continue
        if f.name in TS_FIELDS:
            v = arrow_ts(v)
        elif f.name in ("new_tuple", "old_tuple"):
            v = [{"kind": c.kind, "data": c.data} for c in v]
        elif f.name == "columns":
            v = [{"flags": c.flags, "name": c.name, "type_oid": c.type_oid, "type_modifier": c.type_modifier}
                 for c in v]
        elif f.name == "relation_ids":
            v = list(v)
        row[f.name] = v
    return row


def batch_rows(arr):
    """Rows of a decode_batch result, timestamps as the int64 µs Arrow stores.

    A null input row's error text is normalized to "null payload" (its wording beyond
    that is free)."""
    assert isinstance(arr, pa.StructArray)
    assert arr.type == MESSAGE_STRUCT
    assert arr.null_count == 0
    cols = {}
    for f in MESSAGE_STRUCT:
        col = arr.field(f.name)
        cols[f.name] = (col.cast(pa.int64()) if f.name in TS_FIELDS else col).to_pylist()
    rows = [{name: cols[name][i] for name in cols} for i in range(len(arr))]
    for r in rows:
        if r["error"] is not None and r["error"].startswith("null payload"):
            r["error"] = "null payload"
    return rows


def error_row(text):
    row = {f.name: None for f in MESSAGE_STRUCT}
    row["error"] = text
    return row


def reference_rows(impl, payloads, in_stream):
    """Rows as decode_message gives them, tracking S/E like decode_batch (DESIGN.md)."""
    state = initial_state(payloads) if in_stream is None else in_stream
    rows = []
    for raw in payloads:
        if raw is None:
            rows.append(error_row("null payload"))
            continue
        try:
            msg = impl.decode_message(raw, in_stream=state)
        except PgoutputDecodeError as e:
            rows.append(error_row(str(e)))
            continue
        inner = msg.payload if isinstance(msg, XLogData) else msg
        if isinstance(inner, StreamStart):
            state = True
        elif isinstance(inner, StreamStop):
            state = False
        rows.append(expected_row(msg))
    return rows


def V(name):
    return BY_NAME[name].data


# A realistic order: plain messages, then a streamed block, then plain again.
SEQUENCE = (
    [v.data for v in VECTORS if v.in_stream is False or (v.in_stream is None and v.message.type not in "SE")]
    + [V("stream_start_first")]
    + [v.data for v in VECTORS if v.in_stream is True]
    + [V("stream_stop"), V("stream_commit"), V("insert_text_null_unchanged"), None]
)


def test_batch_equals_decode_message_every_field(impl):
    out = impl.decode_batch(SEQUENCE, in_stream=False)
    got = batch_rows(out)
    want = reference_rows(impl, SEQUENCE, False)
    assert len(got) == len(SEQUENCE)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, (i, SEQUENCE[i] and SEQUENCE[i].hex())
    assert sum(r["error"] is None for r in got) == len(SEQUENCE) - 1


@pytest.mark.parametrize("form", ["list", "binary", "large_binary", "chunked", "chunked_large"])
def test_input_forms(impl, form):
    rows = SEQUENCE
    split = rows.index(V("stream_start_first")) + 2  # chunk 2 starts inside the stream block
    if form == "list":
        values = rows
    elif form == "binary":
        values = pa.array(rows, type=pa.binary())
    elif form == "large_binary":
        values = pa.array(rows, type=pa.large_binary())
    else:
        typ = pa.large_binary() if form == "chunked_large" else pa.binary()
        values = pa.chunked_array([pa.array(rows[:split], typ), pa.array(rows[split:], typ)])
    assert batch_rows(impl.decode_batch(values, in_stream=False)) == reference_rows(impl, rows, False)


def test_sliced_array(impl):
    arr = pa.array([V("begin")] + SEQUENCE, type=pa.binary()).slice(1)
    assert batch_rows(impl.decode_batch(arr, in_stream=False)) == reference_rows(impl, SEQUENCE, False)


def test_chunked_stream_state_carried(impl):
    chunks = pa.chunked_array([
        pa.array([V("stream_start_first"), V("insert_streamed")], pa.binary()),
        pa.array([V("delete_streamed"), V("stream_stop")], pa.binary()),
        pa.array([V("insert_text_null_unchanged")], pa.binary()),
    ])
    rows = batch_rows(impl.decode_batch(chunks, in_stream=False))
    assert [r["error"] for r in rows] == [None] * 5
    assert [r["xid"] for r in rows] == [777, 1234, 777, None, None]


def test_empty_input(impl):
    for values in ([], pa.array([], pa.binary()), pa.chunked_array([], pa.binary())):
        out = impl.decode_batch(values)
        assert len(out) == 0 and out.type == MESSAGE_STRUCT


def test_stream_start_stop_tracking(impl):
    rows = [V("stream_start_first"), V("insert_streamed"), V("stream_stop"), V("insert_text_null_unchanged")]
    for in_stream in (False, True, None):
        got = batch_rows(impl.decode_batch(rows, in_stream=in_stream))
        assert [r["error"] for r in got] == [None] * 4, in_stream
        assert [r["type"] for r in got] == ["S", "I", "E", "I"]
        assert got[1]["xid"] == 1234 and got[3]["xid"] is None


def test_initial_in_stream_state(impl):
    rows = [V("insert_streamed"), V("stream_stop"), V("insert_text_null_unchanged")]
    got = batch_rows(impl.decode_batch(rows, in_stream=True))
    assert [r["error"] for r in got] == [None] * 3
    got = batch_rows(impl.decode_batch(rows, in_stream=False))
    assert got[0]["error"] is not None and "('I') at byte 5" in got[0]["error"]
    assert got[1]["error"] is None and got[2]["error"] is None


def test_error_row_keeps_stream_state(impl):
    bad_start = bytes.fromhex("53 00000001 02")  # first_segment 2
    rows = [bad_start, V("insert_text_null_unchanged"), V("insert_streamed")]
    got = batch_rows(impl.decode_batch(rows, in_stream=False))
    assert got[0]["error"] is not None and got[0]["type"] is None
    assert got[1]["error"] is None
    assert got[2]["error"] is not None


def test_stream_state_inside_xlogdata(impl):
    w = bytes.fromhex("77 0000000000000001 0000000000000002 0000000000000003")
    rows = [w + V("stream_start_first"), w + V("insert_streamed"), w + V("stream_stop"),
            w + V("insert_text_null_unchanged")]
    got = batch_rows(impl.decode_batch(rows, in_stream=False))
    assert [r["error"] for r in got] == [None] * 4
    assert [r["type"] for r in got] == ["S", "I", "E", "I"]
    assert [r["wal_start"] for r in got] == [1] * 4
    assert got[1]["xid"] == 1234


# DESIGN.md: in_stream=None infers the initial state from the first row that decides it:
# a Stream Start (outside), a Stream Stop (inside), or a R/Y/I/U/D/T/M row that decodes
# only with the streaming xid or only without it; no such row: outside.


def initial_state(payloads, envelope="auto"):
    from pgoutput_codec import decode_message

    for raw in payloads:
        if not raw:
            continue
        t = raw[25] if envelope != "none" and raw[0] == 0x77 and len(raw) > 25 else raw[0]
        if t == ord("S"):
            return False
        if t == ord("E"):
            return True
        if chr(t) not in "RYIUDTM":
            continue
        fits = []
        for state in (False, True):
            try:
                decode_message(raw, in_stream=state)
            except PgoutputDecodeError:
                continue
            fits.append(state)
        if len(fits) == 1:
            return fits[0]
    return False


def test_unknown_state_no_row_decides_means_outside(impl):
    # a Relation whose namespace has 4+ characters parses both ways; a Begin has no xid
    # to place
    rows = [V("relation"), V("begin")]
    got = batch_rows(impl.decode_batch(rows))
    assert got == reference_rows(impl, rows, False)
    assert [r["error"] for r in got] == [None, None] and got[0]["xid"] is None


def test_unknown_state_without_markers_is_decided_by_a_data_row_inside_a_block(impl):
    # A batch cut inside a stream block (bigger than the batch: logical_decoding_work_mem)
    # has no S/E; its Insert parses only with the xid.
    rows = [V("relation_streamed"), V("insert_streamed"), V("relation_streamed")]
    got = batch_rows(impl.decode_batch(rows))
    assert got == reference_rows(impl, rows, True)
    assert [r["error"] for r in got] == [None] * 3
    assert [r["xid"] for r in got] == [1234] * 3


def test_unknown_state_without_markers_is_decided_by_a_data_row_outside(impl):
    rows = [V("relation"), V("insert_text_null_unchanged"), V("relation")]
    got = batch_rows(impl.decode_batch(rows))
    assert got == reference_rows(impl, rows, False)
    assert [r["error"] for r in got] == [None] * 3 and got[0]["namespace"] == "public"


def test_unknown_state_skips_a_row_that_fits_neither_reading(impl):
    rows = [b"I\x00\x00\x40", V("insert_streamed"), V("relation_streamed")]
    got = batch_rows(impl.decode_batch(rows))
    assert got == reference_rows(impl, rows, True)
    assert got[0]["error"] is not None and [r["error"] for r in got[1:]] == [None] * 2


def test_unknown_state_decided_in_a_later_chunk(impl):
    rows = [V("relation_streamed"), V("insert_streamed")]
    got = batch_rows(impl.decode_batch(pa.chunked_array([pa.array(rows[:1], pa.binary()),
                                                         pa.array(rows[1:], pa.binary())])))
    assert [r["error"] for r in got] == [None, None] and [r["xid"] for r in got] == [1234, 1234]


def test_unknown_state_stream_start_first_means_outside(impl):
    # The Relation alone is ambiguous for decode_message(in_stream=None).
    rows = [V("relation"), V("stream_start_first"), V("relation_streamed"), V("stream_stop")]
    got = batch_rows(impl.decode_batch(rows))
    assert got == reference_rows(impl, rows, False)
    assert [r["error"] for r in got] == [None] * 4
    assert got[0]["namespace"] == "public" and got[2]["xid"] == 1234


def test_unknown_state_stream_stop_first_means_inside(impl):
    rows = [V("relation_streamed"), V("insert_streamed"), V("stream_stop"), V("relation"),
            V("stream_start_first"), V("insert_streamed")]
    got = batch_rows(impl.decode_batch(rows))
    assert got == reference_rows(impl, rows, True)
    assert [r["error"] for r in got] == [None] * 6


def test_unknown_state_looks_inside_xlogdata(impl):
    w = bytes.fromhex("77 0000000000000001 0000000000000002 0000000000000003")
    rows = [w + V("insert_streamed"), w + V("stream_stop")]
    assert [r["error"] for r in batch_rows(impl.decode_batch(rows))] == [None, None]
    got = batch_rows(impl.decode_batch(rows, envelope="none"))  # 'w' is no envelope here
    assert got[0]["error"] is not None


def test_unknown_state_chunked_equals_contiguous(impl):
    rows = [V("insert_streamed"), V("stream_stop"), V("insert_text_null_unchanged")]
    contiguous = batch_rows(impl.decode_batch(rows))
    chunked = batch_rows(impl.decode_batch(pa.chunked_array([pa.array(rows[:1], pa.binary()),
                                                             pa.array(rows[1:], pa.binary())])))
    assert [r["error"] for r in contiguous] == [None] * 3
    assert chunked == contiguous


def test_envelope_modes(impl):
    w = bytes.fromhex("77 0000000000000001 0000000000000002 0000000000000003")
    rows = [V("begin"), w + V("commit"), V("keepalive_reply")]
    auto = batch_rows(impl.decode_batch(rows, envelope="auto"))
    assert [r["type"] for r in auto] == ["B", "C", "k"]
    assert [r["error"] is None for r in auto] == [True] * 3
    assert auto[1]["wal_end"] == 2 and auto[2]["reply_requested"] is True
    none = batch_rows(impl.decode_batch(rows, envelope="none"))
    assert [r["type"] for r in none] == ["B", None, None]
    assert none[1]["error"] and "at byte 0" in none[1]["error"]
    assert none[2]["error"] and "at byte 0" in none[2]["error"]
    xlog = batch_rows(impl.decode_batch(rows, envelope="xlogdata"))
    assert [r["type"] for r in xlog] == [None, "C", "k"]
    assert xlog[0]["error"] and "at byte 0" in xlog[0]["error"]
    with pytest.raises(ValueError):
        impl.decode_batch(rows, envelope="bogus")


def test_arrow_values(impl):
    rows = [V("begin_high_values"), V("begin_lsn_above_2_63"), V("relation_oid_above_2_31_pg_catalog_full")]
    out = impl.decode_batch(rows, in_stream=False)
    assert out.field("xid").to_pylist()[:2] == [0x80000001, 2**32 - 1]
    assert out.field("final_lsn").to_pylist()[:2] == [0xFFFFFFFF00000010, 2**63]
    assert out.field("relation_id").to_pylist()[2] == 0x80000000
    assert out.field("commit_ts").cast(pa.int64()).to_pylist()[:2] == [EPOCH_SHIFT - 1,
                                                                       arrow_ts(-(2**63))]
    assert out.field("commit_ts").slice(0, 1).to_pylist()[0].isoformat() == "1999-12-31T23:59:59.999999+00:00"


def _stream_sequence(messages, xids):
    """Give streamable messages a streaming xid exactly inside S…E blocks."""
    state, out = False, []
    for msg, xid in zip(messages, xids, strict=True):
        inner = msg.payload if isinstance(msg, XLogData) else msg
        if inner.type in STREAMABLE_TAGS:
            inner = dataclasses.replace(inner, xid=xid if state else None)
            msg = dataclasses.replace(msg, payload=inner) if isinstance(msg, XLogData) else inner
        if isinstance(inner, StreamStart):
            state = True
        elif isinstance(inner, StreamStop):
            state = False
        out.append(msg)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batch_roundtrip_generated_streams(impl, data):
    msgs = data.draw(st.lists(st.one_of(S.any_message, st.sampled_from([StreamStart(xid=9, first_segment=True),
                                                                       StreamStop()])), max_size=15))
    xids = data.draw(st.lists(S.u32, min_size=len(msgs), max_size=len(msgs)))
    msgs = _stream_sequence(msgs, xids)
    payloads = [encode_message(m) for m in msgs]
    cut = data.draw(st.integers(0, len(payloads)))
    values = pa.chunked_array([pa.array(payloads[:cut], pa.binary()), pa.array(payloads[cut:], pa.binary())])
    got = batch_rows(impl.decode_batch(values, in_stream=False))
    assert got == [expected_row(m) for m in msgs]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batch_differential(compiled_impl, python_impl, data):
    """Mutated payloads through both decode_batch implementations: same rows, same
    errors (error text may differ; whether a row is an error may not)."""
    msgs = data.draw(st.lists(S.any_message, max_size=8))
    payloads = []
    for m in msgs:
        raw = encode_message(m)
        cut = data.draw(st.integers(0, len(raw)))
        payloads.append(raw[:cut] + data.draw(st.binary(max_size=2)) if data.draw(st.booleans()) else raw)
    in_stream = data.draw(st.sampled_from([None, True, False]))
    got = batch_rows(compiled_impl.decode_batch(payloads, in_stream=in_stream))
    want = batch_rows(python_impl.decode_batch(payloads, in_stream=in_stream))
    for g, w in zip(got, want, strict=True):
        assert (g["error"] is None) == (w["error"] is None), (g["error"], w["error"])
        g["error"] = w["error"] = None
        assert g == w


def test_large_binary_input_is_sliced_under_the_offset_limit(monkeypatch):
    """Output columns have int32 offsets: a LargeBinary input over the slice limit is
    decoded in slices and returned chunked, rows and stream state intact."""
    from pgoutput_codec import arrays as arrays_mod
    from pgoutput_codec import decode_batch, decode_message
    monkeypatch.setattr(arrays_mod, "MAX_CHUNK_BYTES", 40)
    rows = [V("stream_start_first"), V("insert_streamed"), V("insert_streamed"), V("stream_stop"),
            V("insert_text_null_unchanged")] * 3
    out = decode_batch(pa.array(rows, pa.large_binary()))
    assert isinstance(out, (pa.StructArray, pa.ChunkedArray))
    flat = out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out
    assert len(flat) == len(rows)
    assert flat.field("error").null_count == len(rows)
    want = decode_batch(pa.array(rows, pa.binary()))
    assert flat.equals(want)
    assert decode_message(rows[1], in_stream=True).relation_id == flat.field("relation_id")[1].as_py()


def test_a_payload_over_2_gib_is_an_error_row_not_a_wrapped_offset():
    """An Insert whose two values hold 2.2 GB cannot land in an output column with 32-bit
    offsets: it is an error row naming its type and size, and the rows around it decode.
    The input is calloc'd zeros with three headers written: only those pages are touched."""
    import numpy as np

    from pgoutput_codec import decode_batch
    from pgoutput_codec.pgoutput._batch import MAX_PAYLOAD_BYTES
    half = 1_100_000_000
    small = V("insert_text_null_unchanged")
    head = b"I" + (16400).to_bytes(4, "big") + b"N" + (2).to_bytes(2, "big")
    size = len(head) + 2 * (5 + half)
    assert size > MAX_PAYLOAD_BYTES
    data = np.zeros(2 * len(small) + size, np.uint8)
    for piece, pos in ((small, 0), (head, len(small)), (b"t" + half.to_bytes(4, "big"), len(small) + len(head)),
                       (b"t" + half.to_bytes(4, "big"), len(small) + len(head) + 5 + half),
                       (small, len(small) + size)):
        data[pos:pos + len(piece)] = np.frombuffer(piece, np.uint8)
    offsets = np.array([0, len(small), len(small) + size, 2 * len(small) + size], np.int64)
    arr = pa.Array.from_buffers(pa.large_binary(), 3, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    out = decode_batch(arr)
    out = out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out
    errors = out.field("error").to_pylist()
    assert errors[0] is None and errors[2] is None
    assert errors[1] == (f"Insert ('I') at byte 0: the payload is {size:,} bytes, more than the "
                         f"{MAX_PAYLOAD_BYTES:,} an output column can hold")
    assert out.field("new_tuple")[1].as_py() is None
    assert out.field("new_tuple")[0] == out.field("new_tuple")[2]


def test_offsets_outside_the_buffers_are_refused_before_any_read():
    """pyarrow checks only an array's last offset when it is made from buffers (and
    Arrow IPC, the C data interface and other producers may hand over arrays never
    fully validated): offsets that go back, or one past the data in the middle, are
    refused with a ValueError by every reader of payload arrays, before any is followed."""
    import numpy as np

    from pgoutput_codec import decode_batch
    from pgoutput_codec import opengauss
    from pgoutput_codec.typecatalog import convert_column
    data = pa.py_buffer(b"I" * 10)
    bad = {"go back": (pa.binary(), np.array([0, 8, 2], np.int32)),
           "past the data in the middle": (pa.binary(), np.array([0, 50, 10], np.int32)),
           "large, going back": (pa.large_binary(), np.array([0, 1 << 40, 10], np.int64))}
    for why, (typ, offs) in bad.items():
        arr = pa.Array.from_buffers(typ, 2, [None, pa.py_buffer(offs), data])
        with pytest.raises(ValueError, match="offsets go back at row 1"):
            decode_batch(arr)
            pytest.fail(why)
        with pytest.raises(ValueError, match="offsets go back at row 1"):
            opengauss.decode_batch(arr, "b")
        if typ == pa.binary():
            with pytest.raises(ValueError, match="offsets go back at row 1"):
                convert_column(pa.array(["t", "t"]), arr, 25)
    good = pa.Array.from_buffers(pa.binary(), 2, [None, pa.py_buffer(np.array([0, 0, 1], np.int32)), data])
    assert [e.split(":")[0] for e in decode_batch(good).field("error").to_pylist()] == \
        ["empty payload", "Insert ('I') at byte 1"]
