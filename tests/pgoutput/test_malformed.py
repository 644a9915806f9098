"""Malformed payloads: always ``PgoutputDecodeError`` with the offset and message type
DESIGN.md defines (never a crash, never another exception type)."""

from __future__ import annotations

import pytest

from pgoutput_codec import PgoutputDecodeError
from pgoutput_codec.pgoutput.encode import encode_message
from pgoutput_codec.pgoutput.messages import MAX_IDENTIFIER_BYTES

from vectors import VECTORS

H24 = "00000000016B3748 00000000016B3748 0002C8E45A3B1C40"  # an XLogData header
TIMES = "00000000016B3748 00000000016B3778 0002C8E45A3B1C40"  # lsn, end lsn, ts

# (id, hex, in_stream, offset, message_type) — offsets counted by hand.
CASES = [
    ("empty", "", None, 0, None),
    ("unknown_tag", "5A", None, 0, "Z"),
    ("unknown_tag_high", "FF 0000", None, 0, "\xff"),
    ("unknown_tag_nul", "00", None, 0, "\x00"),
    ("standby_status_tag_is_not_envelope", "68 00", None, 0, "h"),
    ("stream_stop_trailing", "45 00", None, 1, "E"),
    ("begin_trailing", "42 00000000016B3748 0002C8E45A3B1C40 000002E7 00", None, 21, "B"),
    ("begin_short_xid", "42 00000000016B3748 0002C8E45A3B1C40 0002", None, 17, "B"),
    ("insert_value_past_end", "49 00004000 4E 0001 74 00000010 3132", False, 13, "I"),
    ("insert_negative_value_length", "49 00004000 4E 0001 74 FFFFFFFF", False, 9, "I"),
    ("insert_negative_binary_length", "49 00004000 4E 0002 6E 62 80000000 00", False, 10, "I"),
    ("insert_negative_ncols", "49 00004000 4E FFFF", False, 6, "I"),
    ("insert_ncols_32767_no_data", "49 00004000 4E 7FFF", False, 8, "I"),
    ("insert_ncols_32767_some_data", "49 00004000 4E 7FFF 6E 75 6E", False, 11, "I"),
    ("insert_bad_kind", "49 00004000 4E 0001 78", False, 8, "I"),
    ("insert_bad_kind_b_upper", "49 00004000 4E 0002 6E 42 00000000", False, 9, "I"),
    ("insert_marker_K", "49 00004000 4B 0000", False, 5, "I"),
    ("insert_no_marker", "49 00004000", False, 5, "I"),
    ("insert_trailing", "49 00004000 4E 0000 00", False, 8, "I"),
    ("update_bad_marker", "55 00004000 58 0000", False, 5, "U"),
    ("update_second_marker_not_N", "55 00004000 4B 0001 6E 4B 0001 6E", False, 9, "U"),
    ("update_missing_new_tuple", "55 00004000 4F 0001 6E", False, 9, "U"),
    ("delete_marker_N", "44 00004000 4E 0000", False, 5, "D"),
    ("relation_ncols_32767_no_data", "52 00004000 00 78 00 64 7FFF", False, 11, "R"),
    ("relation_negative_ncols", "52 00004000 00 78 00 64 8000", False, 9, "R"),
    ("relation_bad_replica_identity", "52 00004000 00 78 00 78 0000", False, 8, "R"),
    ("relation_namespace_invalid_utf8", "52 00004000 FF 00 78 00 64 0000", False, 5, "R"),
    ("relation_column_name_overlong_utf8",
     "52 00004000 00 78 00 64 0001 01 C080 00 00000017 FFFFFFFF", False, 12, "R"),
    ("relation_name_no_nul", "52 00004000 00 7878", False, 6, "R"),
    ("relation_column_short_typmod", "52 00004000 00 78 00 64 0001 01 61 00 00000017 FFFF", False, 18, "R"),
    ("type_name_surrogate_utf8", "59 00004100 00 EDA080 00", False, 6, "Y"),
    ("type_name_above_10FFFF", "59 00004100 00 F4908080 00", False, 6, "Y"),
    ("relation_namespace_too_long", "52 00004000" + " 61" * 253 + " 00 78 00 64 0000", False, 5, "R"),
    ("relation_name_too_long", "52 00004000 00" + " 61" * 253 + " 00 64 0000", False, 6, "R"),
    ("relation_column_name_too_long",
     "52 00004000 00 78 00 64 0001 01" + " 61" * 253 + " 00 00000017 FFFFFFFF", False, 12, "R"),
    ("type_name_too_long", "59 00004100 00" + " 61" * 253 + " 00", False, 6, "Y"),
    ("origin_no_nul", "4F 0000000000000001 616263", None, 9, "O"),
    ("origin_invalid_utf8", "4F 0000000000000001 C328 00", None, 9, "O"),
    ("truncate_negative_nrels", "54 80000000 00", False, 1, "T"),
    ("truncate_nrels_past_end", "54 00000003 00 00004000", False, 6, "T"),
    ("truncate_nrels_int32_max", "54 7FFFFFFF 00", False, 6, "T"),
    ("message_negative_length", "4D 00 0000000000000000 00 80000000", False, 11, "M"),
    ("message_content_past_end", "4D 00 0000000000000000 00 00000005 0102", False, 15, "M"),
    ("message_prefix_invalid_utf8", "4D 00 0000000000000000 FF 00 00000000", False, 10, "M"),
    ("stream_start_first_segment_2", "53 00000001 02", None, 5, "S"),
    ("stream_start_short", "53 000000", None, 1, "S"),
    ("stream_commit_short", "63 00000001 00 0000", None, 6, "c"),
    ("stream_abort_4_extra", "41 00000001 00000002 00000000", None, 9, "A"),
    ("stream_abort_1_extra", "41 00000001 00000002 00", None, 9, "A"),
    ("stream_abort_12_extra", "41 00000001 00000002 000000000000000000000000", None, 17, "A"),
    ("stream_abort_17_extra", "41 00000001 00000002 0000000000000000 0000000000000000 00", None, 25, "A"),
    ("begin_prepare_gid_invalid_utf8", f"62 {TIMES} 00000001 FF 00", None, 29, "b"),
    ("prepare_gid_no_nul", f"50 00 {TIMES} 00000001 6769", None, 30, "P"),
    ("stream_prepare_gid_missing", f"70 00 {TIMES} 00000001", None, 30, "p"),
    ("commit_prepared_short_xid", f"4B 00 {TIMES} 0000", None, 26, "K"),
    ("rollback_prepared_short_ts", "72 00 00000000016B3748 00000000016B3778 0002C8E45A3B1C40 0000",
     None, 26, "r"),
    ("keepalive_reply_2", "6B 0000000000000001 0000000000000002 02", None, 17, "k"),
    ("keepalive_trailing", "6B 0000000000000001 0000000000000002 01 00", None, 18, "k"),
    ("keepalive_short", "6B 0000", None, 1, "k"),
    ("xlogdata_short_wal_start", "77 0000", None, 1, "w"),
    ("xlogdata_short_send_time", "77 0000000000000000 0000000000000000 00", None, 17, "w"),
    ("xlogdata_empty_payload", f"77 {H24}", None, 25, "w"),
    ("xlogdata_inner_negative_ncols", f"77 {H24} 49 00004000 4E FFFF", False, 31, "I"),
    ("xlogdata_nested_xlogdata", f"77 {H24} 77 {H24} 45", None, 25, "w"),
    ("xlogdata_nested_keepalive", f"77 {H24} 6B 0000000000000001 0000000000000002 01", None, 25, "k"),
    ("xlogdata_inner_trailing", f"77 {H24} 45 00", None, 26, "E"),
    ("xlogdata_inner_unknown_tag", f"77 {H24} 5A", None, 25, "Z"),
    # in_stream=None and neither reading works: the one that got further is reported
    ("no_hint_plain_further", "49 00004000 4E 0001 74 00000010 31", None, 13, "I"),
    ("no_hint_streamed_further", "49 000004D2 00004000 4E 0001 74 00000010 31", None, 17, "I"),
    ("no_hint_tie_reports_plain", "49 0000", None, 1, "I"),
    ("no_hint_in_xlogdata", f"77 {H24} 49 000004D2 00004000 4E 0001 74 00000010 31", None, 42, "I"),
]


@pytest.mark.parametrize("case_id, hexdata, in_stream, offset, message_type", CASES, ids=[c[0] for c in CASES])
def test_malformed_case(impl, case_id, hexdata, in_stream, offset, message_type):
    data = bytes.fromhex(hexdata)
    with pytest.raises(PgoutputDecodeError) as ei:
        impl.decode_message(data, in_stream=in_stream)
    e = ei.value
    assert type(e) is PgoutputDecodeError
    assert (e.offset, e.message_type) == (offset, message_type), str(e)
    text = str(e)
    assert f"at byte {offset}" in text
    if message_type is not None and message_type.isalpha() and case_id != "unknown_tag":
        assert f"('{message_type}')" in text or f"'{message_type}'" in text, text


def test_names_up_to_the_server_limit(impl):
    """Names as long as a server writes decode; one byte more is refused, naming the
    limit (a name is copied into every change row of its relation)."""
    longest = "é" * (MAX_IDENTIFIER_BYTES // 2)
    rel = impl.decode_message(bytes.fromhex("52 00004000") + longest.encode() + b"\0" + longest.encode()
                              + bytes.fromhex("00 64 0001 01") + longest.encode() + bytes.fromhex("00 00000017 FFFFFFFF"),
                              in_stream=False)
    assert (rel.namespace, rel.relation_name, rel.columns[0].name) == (longest, longest, longest)
    with pytest.raises(PgoutputDecodeError, match=f"at most {MAX_IDENTIFIER_BYTES} bytes"):
        impl.decode_message(bytes.fromhex("59 00004100 00") + longest.encode() + b"x\0", in_stream=False)


# Proper prefixes that are themselves a complete message.
VALID_PREFIXES = {("stream_abort_parallel", 9)}


@pytest.mark.parametrize("vec", VECTORS, ids=[v.name for v in VECTORS])
def test_every_truncation_point(impl, vec):
    data = vec.data
    inner_tag = vec.message.payload.type if vec.message.type == "w" else vec.message.type
    for n in range(len(data)):
        prefix = data[:n]
        if (vec.name, n) in VALID_PREFIXES:
            assert impl.decode_message(prefix, in_stream=vec.in_stream) is not None
            continue
        with pytest.raises(PgoutputDecodeError) as ei:
            impl.decode_message(prefix, in_stream=vec.in_stream)
        e = ei.value
        assert type(e) is PgoutputDecodeError, (n, e)
        assert 0 <= e.offset <= n, (n, str(e))
        if n == 0:
            assert e.message_type is None
        elif vec.message.type == "w" and n <= 25:
            assert e.message_type == "w", (n, str(e))
        else:
            assert e.message_type == inner_tag, (n, str(e))
        # Without a hint, a prefix is still an error or a message that is exactly the prefix.
        try:
            msg = impl.decode_message(prefix)
        except PgoutputDecodeError as e2:
            assert 0 <= e2.offset <= n
        else:
            assert encode_message(msg) == prefix


@pytest.mark.parametrize("vec", VECTORS, ids=[v.name for v in VECTORS])
def test_every_trailing_byte(impl, vec):
    data = vec.data + b"\x00"
    # trailing byte offset; for a short Stream Abort it is where abort_lsn would start
    expected = len(vec.data)
    with pytest.raises(PgoutputDecodeError) as ei:
        impl.decode_message(data, in_stream=vec.in_stream)
    assert ei.value.offset == expected


def test_non_bytes_input_is_type_error(impl):
    with pytest.raises(TypeError):
        impl.decode_message("B")


def test_batch_mixed_good_and_bad_rows(impl):
    good = [v for v in VECTORS if v.in_stream is None and v.message.type not in "SE"]
    bad = [bytes.fromhex(c[1]) for c in CASES if c[2] is None]
    rows = []
    for i in range(max(len(good), len(bad))):
        if i < len(good):
            rows.append(good[i].data)
        if i < len(bad):
            rows.append(bad[i])
        if i % 7 == 0:
            rows.append(None)
    # in_stream=False: the inference of an unknown initial state is tested in test_batch.py
    out = impl.decode_batch(rows, in_stream=False)
    assert len(out) == len(rows)
    errors = out.field("error").to_pylist()
    types = out.field("type").to_pylist()
    n_ok = n_err = 0
    for raw, err, typ in zip(rows, errors, types, strict=True):
        if raw is None:
            assert err is not None and "null payload" in err
            n_err += 1
            continue
        try:
            msg = impl.decode_message(raw, in_stream=False)
        except PgoutputDecodeError as e:
            assert err == str(e)
            assert typ is None
            n_err += 1
        else:
            assert err is None
            inner = msg.payload if msg.type == "w" else msg
            assert typ == inner.type
            n_ok += 1
    assert n_ok == len(good) and n_err == len(rows) - len(good)
    assert n_ok + n_err == len(rows)


def test_batch_all_null_rows(impl):
    out = impl.decode_batch([None, None])
    assert out.field("error").to_pylist() == ["null payload"] * 2 or all(
        e and "null payload" in e for e in out.field("error").to_pylist())
    assert out.field("type").to_pylist() == [None, None]


def test_an_opengauss_json_frame_nested_too_deep_is_an_error_row():
    """A JSON frame of 100,000 nested objects or arrays (a few hundred KB) is a malformed
    frame like any other, an error row naming it, not a RecursionError out of the decoder;
    the frames beside it decode."""
    import pyarrow as pa

    from pgoutput_codec.opengauss import decode_batch

    frames = [b'{"a":' * 100_000 + b"1" + b"}" * 100_000, b"[" * 100_000, b"{bad"]
    rows = decode_batch(pa.array(frames, pa.binary()), style="j").to_pylist()
    assert [r["row"] for r in rows] == [0, 1, 2]
    assert all(r["error"].startswith("Frame at byte") for r in rows), rows
    assert "nested too deep" in rows[0]["error"] and "nested too deep" in rows[1]["error"]
