"""transcode.py without a server: what it converts and what it leaves, the walk's state
across calls, envelopes, errors. Real servers' bytes: tests/conformance/test_encodings.py."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgoutput_codec import (Begin, Commit, Delete, Insert, LogicalMessage, Relation, RelationColumn, StreamStart,
                            StreamStop, Transcoder, TupleColumn, Type, Update, XLogData, decode_changes,
                            encode_message, table_changes, transcode_archive, transcode_payloads)
from pgoutput_codec import USING_EXTENSIONS, transcode
from pgoutput_codec.transcode import TranscodeError, is_utf8, pg_encoding_name, python_codec

# text, int4, jsonb, text[], a user type sent by a Type message as a domain over varchar, bytea
COLUMNS = (("t", 25), ("i", 23), ("jb", 3802), ("ta", 1009), ("d", 70000), ("by", 17))


def _rel(xid=None):
    return Relation(xid=xid, relation_id=7, namespace="public", relation_name="t", replica_identity="f",
                    columns=tuple(RelationColumn(0, n, oid, -1) for n, oid in COLUMNS))


def _text_array(items, enc):
    body = b"".join(struct.pack(">i", len(x.encode(enc))) + x.encode(enc) for x in items)
    return struct.pack(">iiIii", 1, 0, 25, len(items), 1) + body


def _row(s, enc, binary):
    """The row's TupleColumns as a session under ``enc`` receives them."""
    if not binary:
        return (TupleColumn("t", s.encode(enc)), TupleColumn("t", b"5"), TupleColumn("t", f'{{"k": "{s}"}}'.encode(enc)),
                TupleColumn("t", f"{{{s},x}}".encode(enc)), TupleColumn("t", s.encode(enc)),
                TupleColumn("t", b"\\xe9"))
    return (TupleColumn("b", s.encode(enc)), TupleColumn("b", struct.pack(">i", 233)),
            TupleColumn("b", b"\x01" + f'{{"k": "{s}"}}'.encode(enc)), TupleColumn("b", _text_array([s, "x"], enc)),
            TupleColumn("b", s.encode(enc)), TupleColumn("b", b"\xe9\xff"))


def _session(enc, binary, s="caf\u00e9 cr\u00e8me", k=0):
    """One session's payloads under client encoding ``enc``: a plain transaction with an
    Insert, a FULL-identity Update and Delete, a message whose content is never
    converted; a streamed one whose Relation carries the xid."""
    msgs = [Begin(final_lsn=100 + 1000 * k, commit_ts=0, xid=5 + k), _rel(),
            Type(xid=None, type_oid=70000, namespace="pg_catalog", type_name="varchar"),
            Insert(xid=None, relation_id=7, new_tuple=_row(s, enc, binary)),
            Update(xid=None, relation_id=7, old_kind="O", old_tuple=_row(s, enc, binary),
                   new_tuple=_row(s + "!", enc, binary)),
            Delete(xid=None, relation_id=7, old_kind="O", old_tuple=_row(s + "!", enc, binary)),
            LogicalMessage(xid=None, flags=1, lsn=90, prefix="p", content="\u00e9".encode("latin-1")),
            Commit(flags=0, commit_lsn=100 + 1000 * k, end_lsn=101 + 1000 * k, commit_ts=0),
            StreamStart(xid=9, first_segment=True), _rel(xid=9),
            Insert(xid=9, relation_id=7, new_tuple=_row(s, enc, binary)), StreamStop()]
    return [encode_message(m) for m in msgs]


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("enc,pg", [("latin-1", "LATIN1"), ("cp1252", "WIN1252"), ("euc_jp", "EUC_JP")])
def test_values_come_out_as_a_utf8_session_receives_them(enc, pg, binary):
    s = "caf\u00e9 cr\u00e8me" if enc != "euc_jp" else "\u65e5\u672c\u8a9e"
    got, report = transcode_payloads(_session(enc, binary, s), pg)
    assert got.to_pylist() == _session("utf-8", binary, s)
    # Insert, Update, Delete, the streamed Insert; the bytea, int4 and the message content unchanged
    assert report.rewritten == 4 and report.kept == 8 and report.rows == 12


def test_the_walk_carries_across_calls():
    """A binary value's type comes from a Relation read by an earlier call; the stream
    state too (the streamed Insert's xid)."""
    theirs, want = _session("latin-1", True), _session("utf-8", True)
    t = Transcoder("LATIN1")
    a, _ = t.payloads(theirs[:9])
    b, _ = t.payloads(theirs[9:])
    assert a.to_pylist() + b.to_pylist() == want
    # a fresh walk over the second part alone does not know the relation: the value stays
    alone, _ = transcode_payloads(theirs[10:], "LATIN1", in_stream=True)
    assert alone.to_pylist()[0] == theirs[10] != want[10]


def test_xlogdata_envelopes_and_nulls():
    theirs = [encode_message(XLogData(wal_start=1, wal_end=2, send_time=0, payload=m))
              for m in (_rel(), Insert(xid=None, relation_id=7, new_tuple=_row("\u00e9", "latin-1", False)))]
    got, report = transcode_payloads(pa.array(theirs + [None], pa.binary()), "latin1")
    assert got.to_pylist() == [theirs[0], encode_message(XLogData(
        wal_start=1, wal_end=2, send_time=0,
        payload=Insert(xid=None, relation_id=7, new_tuple=_row("\u00e9", "utf-8", False)))), None]
    assert report.rows == 3 and report.rewritten == 1


def test_an_archive_table_keeps_its_columns_and_says_what_it_was():
    theirs = _session("latin-1", False)
    table = pa.table({"seq": list(range(len(theirs))), "data": pa.array(theirs, pa.binary())},
                     metadata={b"x": b"y"})
    out, report = transcode_archive(table, "latin-1")
    assert out.column("seq").to_pylist() == list(range(len(theirs)))
    assert out.column("data").to_pylist() == _session("utf-8", False)
    assert out.schema.metadata[b"x"] == b"y" and out.schema.metadata[b"pgoutput_codec.transcoded_from"] == b"LATIN1"
    rows = table_changes(decode_changes(out), "public.t").column("after").to_pylist()
    assert rows[0]["t"] == "caf\u00e9 cr\u00e8me" and rows[0]["ta"] == ["caf\u00e9 cr\u00e8me", "x"]


def test_utf8_changes_nothing_and_ascii_is_not_decoded():
    theirs = _session("utf-8", False)
    got, report = transcode_payloads(theirs, "UTF8")
    assert got.to_pylist() == theirs and report.kept == len(theirs)
    # an all-ASCII payload is the same in every client encoding: kept, malformed or not
    bad = [b"I\x00\x00"]
    assert transcode_payloads(bad, "LATIN1")[0].to_pylist() == bad


def test_a_payload_it_cannot_rewrite():
    theirs = _session("latin-1", False)
    theirs[3] = theirs[3][:-2]                      # the Insert, cut inside its last value
    with pytest.raises(TranscodeError, match=r"archive row 3: Insert \('I'\) at byte \d+") as e:
        transcode_payloads(theirs, "LATIN1")
    assert e.value.row == 3 and e.value.message_type == "I" and e.value.offset > 0
    got, report = transcode_payloads(theirs, "LATIN1", errors="keep")
    assert got.to_pylist()[3] == theirs[3] and [r for r, _ in report.left_as_sent] == [3]
    assert report.rows == report.rewritten + report.kept
    # text that is not the encoding: EUC-JP's lead byte 0xA4 needs a trail byte
    t = Transcoder("EUC_JP")
    t.payloads([encode_message(_rel())])
    with pytest.raises(TranscodeError, match="archive row 1: .*not euc_jp"):
        t.payloads([encode_message(Insert(xid=None, relation_id=7, new_tuple=(TupleColumn("t", b"\xa4 "),)))])


@pytest.mark.parametrize("name,codec", [("LATIN1", "iso8859-1"), ("latin1", "iso8859-1"), ("WIN1252", "cp1252"),
                                        ("win-1252", "cp1252"), ("SJIS", "cp932"), ("UTF8", "utf-8"),
                                        ("utf-8", "utf-8"), ("latin-1", "iso8859-1"), ("EUC_JP", "euc_jp")])
def test_encoding_names(name, codec):
    assert python_codec(name) == codec


@pytest.mark.parametrize("name,pg", [("LATIN1", "LATIN1"), ("latin-1", "LATIN1"), ("iso-8859-1", "LATIN1"),
                                     ("cp1252", "WIN1252"), ("euc-jp", "EUC_JP"), ("iso8859-15", "LATIN9"),
                                     ("ISO_8859_5", "ISO_8859_5"), ("utf-8", "UTF8"), ("mac_roman", "mac-roman")])
def test_an_archive_records_the_encoding_by_postgresql_s_name(name, pg):
    """The CLI and ``transcode_archive`` record one spelling whatever name is given
    (``LATIN1``, ``iso8859-1``): PostgreSQL's, or Python's where it has none."""
    assert pg_encoding_name(name) == pg


@pytest.mark.parametrize("name,utf8", [("UTF8", True), ("utf-8", True), ("Utf_8", True), ("unicode", True),
                                       ("LATIN1", False), ("cp1252", False), ("utf-16", False)])
def test_one_answer_to_whether_an_archive_needs_rewriting(name, utf8):
    """The CLI, the data source and spark.transcode ask is_utf8: each had its own test."""
    assert is_utf8(name) is utf8


def test_names_that_are_no_encoding():
    with pytest.raises(ValueError, match="SQL_ASCII is no encoding"):
        python_codec("SQL_ASCII")
    with pytest.raises(ValueError, match="unknown encoding 'KLINGON'"):
        python_codec("KLINGON")
    for name in ("SQL_ASCII", "KLINGON"):
        with pytest.raises(ValueError):
            is_utf8(name)
    with pytest.raises(ValueError, match="errors must be"):
        Transcoder("LATIN1", errors="ignore")


# ---- the compiled loop against the plain path ---------------------------------------
_OIDS = st.sampled_from([25, 23, 3802, 1009, 1043, 17, 99999])
_VALUE = st.one_of(st.just(TupleColumn("n", None)), st.just(TupleColumn("u", None)),
                   st.builds(TupleColumn, st.sampled_from("tb"),
                             st.one_of(st.sampled_from([b"\x01{\"\xe9\"}", b"\xe9t\xe9", b"\xa4\xa2", b"\x81", b"",
                                                        _text_array(["\xe9", "x"], "latin-1"),
                                                        _text_array(["\u3042"], "euc_jp")]),
                                       st.binary(max_size=12))))
_TUPLE = st.lists(_VALUE, max_size=5).map(tuple)


@st.composite
def _row_changes(draw):
    xid = draw(st.sampled_from([None, 77]))
    rel = Relation(xid=xid, relation_id=7, namespace="s", relation_name="t", replica_identity="f",
                   columns=tuple(RelationColumn(0, f"c{i}", draw(_OIDS), -1) for i in range(draw(st.integers(0, 5)))))
    rid = st.sampled_from([7, 8])
    msgs = draw(st.lists(st.one_of(
        st.builds(Insert, xid=st.just(xid), relation_id=rid, new_tuple=_TUPLE),
        st.builds(Update, xid=st.just(xid), relation_id=rid, old_kind=st.sampled_from([None, "K", "O"]),
                  old_tuple=_TUPLE, new_tuple=_TUPLE).map(
                      lambda u: u if u.old_kind else Update(xid=u.xid, relation_id=u.relation_id, old_kind=None,
                                                            old_tuple=None, new_tuple=u.new_tuple)),
        st.builds(Delete, xid=st.just(xid), relation_id=rid, old_kind=st.sampled_from("KO"), old_tuple=_TUPLE)),
        min_size=1, max_size=6))
    payloads = [encode_message(m) for m in [rel, *msgs]]
    for _ in range(draw(st.integers(0, 2))):      # mutations: the loop must hand odd bytes to the plain path
        i = draw(st.integers(1, len(payloads) - 1))
        b = bytearray(payloads[i])
        op, pos = draw(st.integers(0, 2)), draw(st.integers(0, len(b) - 1))
        if op == 0:
            del b[pos]
        elif op == 1:
            b.insert(pos, draw(st.integers(0, 255)))
        else:
            b[pos] = draw(st.integers(0, 255))
        payloads[i] = bytes(b)
    return payloads, xid is not None


@settings(max_examples=300, deadline=None)
@given(_row_changes(), st.sampled_from(["LATIN1", "EUC_JP", "WIN1252"]))
@pytest.mark.skipif(not USING_EXTENSIONS, reason="the compiled loop is not built")
def test_the_compiled_loop_gives_what_the_plain_path_gives(case, enc):
    payloads, in_stream = case
    fast, fast_report = transcode_payloads(payloads, enc, errors="keep", in_stream=in_stream)
    saved = transcode._rewrite_batch
    transcode._rewrite_batch = None
    try:
        plain, plain_report = transcode_payloads(payloads, enc, errors="keep", in_stream=in_stream)
    finally:
        transcode._rewrite_batch = saved
    assert fast.to_pylist() == plain.to_pylist()
    assert fast_report == plain_report


def archive(enc, sessions=60):
    """A longer archive (for Spark): ``_session`` again and again, text and binary values
    in turn, each value and commit LSN its own (the streamed transactions never commit)."""
    out = []
    for k in range(sessions):
        out += _session(enc, k % 2 == 1, f"caf\u00e9 {k} cr\u00e8me" if enc != "euc_jp" else f"\u65e5\u672c {k}", k)
    return out


@pytest.mark.parametrize("loop", [True, False])
def test_a_bare_row_where_every_row_must_be_a_frame_is_left_as_sent(loop):
    """envelope='xlogdata': a row change without its 'w' frame is malformed; the compiled
    loop, like the plain path, leaves it as sent, never rewritten (a case
    tests/fuzz/fuzz_transcode.py draws)."""
    theirs = _session("latin-1", False)[:4]
    framed = [encode_message(XLogData(wal_start=1, wal_end=2, send_time=0, payload=m)) for m in (
        _rel(), Type(xid=None, type_oid=70000, namespace="pg_catalog", type_name="varchar"))]
    rows = framed + [theirs[3]]
    saved = transcode._rewrite_batch
    if not loop:
        transcode._rewrite_batch = None
    try:
        got, report = transcode_payloads(rows, "LATIN1", envelope="xlogdata", errors="keep")
    finally:
        transcode._rewrite_batch = saved
    assert got.to_pylist()[2] == theirs[3] and [r for r, _ in report.left_as_sent] == [2]
    assert "not a replication envelope" in report.left_as_sent[0][1]
