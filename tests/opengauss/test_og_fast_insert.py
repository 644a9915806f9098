"""The compiled decoder's one-pass Insert path (``_parse.fast_insert``) against the Python
twin, on the shapes where it takes shortcuts: word-at-a-time ASCII checks (names around
8 bytes, a high byte at every position), fixed-size copies (lengths around 16 and 32,
strings ending at the very end of the input buffer), and buffers reserved in proportion
to the first frame (later frames much larger)."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from pgoutput_codec.opengauss.batch import decode_batch, decode_batch_py
from pgoutput_codec.opengauss.encode import encode_frame, encode_record
from pgoutput_codec.opengauss.messages import Column, Record

pytest.importorskip("pgoutput_codec.opengauss._parse")


def compiled(values, **kw):
    return decode_batch(values, "b", **kw)


def raw_insert(name: bytes, value: bytes | None = b"v", *, schema: bytes = b"public", table: bytes = b"t",
               oid: int = 0xFFFFFFFE, lsn: int = 7) -> bytes:
    """An Insert record with arbitrary name bytes (the encoder only takes valid text)."""
    col = struct.pack(">H", len(name)) + name + struct.pack(">I", oid)
    col += struct.pack(">I", 0xFFFFFFFF) if value is None else struct.pack(">I", len(value)) + value
    body = (struct.pack(">H", len(schema)) + schema + struct.pack(">H", len(table)) + table
            + b"N" + struct.pack(">H", 1) + col)
    return struct.pack(">IQ", 9 + len(body), lsn) + b"I" + body


def frame(records: list[bytes], end: bytes = b"F") -> bytes:
    return b"P".join(records) + end


def same(values):
    arr = pa.array(values, pa.binary())
    t = compiled(arr)
    assert t.equals(decode_batch_py(arr)), (t.to_pylist(), decode_batch_py(arr).to_pylist())
    return t


@pytest.mark.parametrize("n", [0, 1, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 70])
def test_lengths_around_the_word_and_copy_sizes(n):
    name = bytes(b"abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(n))
    recs = [raw_insert(name, b"x" * n), raw_insert(name, None), raw_insert(b"c", b"y" * (n + 1))]
    t = same([frame(recs)])
    assert t.column("error").null_count == 3
    assert [c["name"] for c in t.column("new_tuple")[0].as_py()] == [name.decode()]
    assert t.column("new_tuple")[0].as_py()[0]["value"] == b"x" * n


@pytest.mark.parametrize("n", [1, 2, 5, 8, 9, 12, 16, 17, 33])
def test_a_high_byte_at_every_position_of_a_name(n):
    for pos in range(n):
        for bad, ok in ((b"\xff", False), (b"\xc3\xa9", True)):
            name = b"a" * pos + bad + b"a" * (n - pos - 1)
            t = same([frame([raw_insert(name)]), frame([raw_insert(b"col", schema=name)]),
                      frame([raw_insert(b"col", table=name)])])
            errors = t.column("error").to_pylist()
            if ok:
                assert errors == [None] * 3
            else:
                assert all(e and "UTF-8" in e for e in errors), errors


def test_high_bytes_right_after_a_name_are_not_part_of_it():
    # the type OID's first byte follows the name: 0xFF there must not fail the name
    t = same([frame([raw_insert(b"abc", oid=0xFFFFFFFF), raw_insert(b"abcdefgh", oid=0x80808080)])])
    assert t.column("error").null_count == 2


def test_strings_at_the_very_end_of_the_input_buffer():
    # the last record's name and value end a few bytes before the data buffer does
    for n in range(0, 40):
        rec = raw_insert(b"n" * n, b"v" * n)
        data = frame([rec])
        arr = pa.array([data], pa.binary())
        assert arr.buffers()[2].size == len(data)
        assert compiled(arr).equals(decode_batch_py(arr))
        # and inside a slice whose buffer goes on
        big = pa.array([data, data + b"", b"\xff" * 64], pa.binary()).slice(0, 2)
        assert compiled(big).equals(decode_batch_py(big))


def test_irregular_inserts_fall_back_to_the_general_path():
    good = raw_insert(b"a", b"1")
    cases = [
        frame([good]) + b"x",                              # bytes after 'F'
        frame([good], b"Q"),                               # bad separator
        frame([good[:-1] + b"\x00" + good[-1:]]),          # length ends mid-value
        frame([good[:4] + good[4:13] + good[13:] + b"O"]),  # old tuple on an insert
        frame([good.replace(b"N\x00\x01", b"N\x00\x02")]),  # more columns than bytes
        frame([good.replace(b"N\x00\x01", b"X\x00\x01")]),  # bad marker
        frame([good, good], b"P\x00\x00\x00\x00"),          # idle-flush end
        frame([good, good], b"P"),                          # 'P' at the end: truncated
    ]
    for c in cases:
        same([c])


def test_later_frames_much_larger_than_the_first():
    cols = tuple(Column(f"column_{i}", 25, b"v" * (i * 7)) for i in range(30))
    big = encode_record(Record("I", 5, schema="s", table="wide_table", new_tuple=cols))
    small = encode_record(Record("I", 4, schema="s", table="t", new_tuple=(Column("a", 23, b"1"),)))
    values = [encode_frame([small])] + [encode_frame([big] * 50)] * 40 + [encode_frame([small] * 3)]
    t = same(values)
    assert t.num_rows == 1 + 2000 + 3 and t.column("error").null_count == t.num_rows


def test_mixed_records_keep_their_order():
    cols = (Column("a", 23, b"1"), Column("b", 25, None))
    recs = [Record("B", 1, csn=3, first_lsn=1, xid=9), Record("I", 2, schema="s", table="t", new_tuple=cols),
            Record("U", 3, schema="s", table="t", new_tuple=cols, old_tuple=cols),
            Record("I", 4, schema="s", table="t", new_tuple=()),
            Record("D", 5, schema="s", table="t", old_tuple=cols), Record("C", 6, xid=9)]
    t = same([encode_frame(recs)])
    assert t.column("type").to_pylist() == list("BIUIDC")


def test_columns_an_insert_leaves_null_across_buffer_growth():
    # Insert rows leave csn/xid/... unwritten until the next other row or the end: runs of
    # thousands of them cross the row buffers' growth (1024, 2048, ...) with rows pending
    ins = encode_record(Record("I", 2, schema="s", table="t", new_tuple=(Column("a", 23, b"1"),)))
    upd = encode_record(Record("U", 3, schema="s", table="t", new_tuple=(Column("a", 23, b"2"),),
                               old_tuple=(Column("a", 23, b"1"),)))
    beg = encode_record(Record("B", 1, csn=5, first_lsn=1, xid=77, commit_time="2024-01-01 00:00:00+00"))
    values = [encode_frame([beg] + [ins] * 3000 + [upd]), encode_frame([ins] * 5000),
              encode_frame([upd] + [ins] * 2500), encode_frame([beg])]
    for _ in range(3):
        t = same(values)
    types = t.column("type").to_pylist()
    assert types.count("I") == 10500 and types.count("U") == 2
    assert t.column("xid").to_pylist()[-1] == 77 and t.column("old_tuple")[3001].as_py()[0]["value"] == b"1"


@pytest.mark.parametrize("ncols", [7, 8, 9, 55, 56, 57, 64, 100])
def test_wide_rows_and_null_patterns(ncols):
    # validity bits gather in one word up to 56 columns, bit by bit beyond; records start
    # at every bit offset of the bitmap
    import random
    rng = random.Random(ncols)
    recs = []
    for r in range(17):
        cols = tuple(Column(f"c{i}", 25, None if rng.random() < 0.3 else b"x" * rng.randint(0, 40))
                     for i in range(ncols - r % 3))
        recs.append(encode_record(Record("I", r, schema="s", table="t", new_tuple=cols)))
    t = same([encode_frame(recs[:5]), encode_frame(recs[5:])])
    assert t.column("error").null_count == 17


@pytest.mark.parametrize("seed", range(10))
def test_columns_set_by_few_rows_anywhere(seed):
    # csn, first_lsn, xid, commit_time, origin_id, user_name, old_tuple and error are
    # written only from the first row that sets each (the null rows before it caught up
    # then, fixed-width null slots skipped): each set by a few rows at random places,
    # first row, last row, or none, across buffer growth and several chunks
    import random
    rng = random.Random(seed)
    ins = encode_record(Record("I", 2, schema="s", table="t", new_tuple=(Column("a", 23, b"1"),)))
    one = (Column("a", 23, b"2"),)
    rare = [
        lambda: encode_record(Record("B", 1, csn=rng.getrandbits(64), first_lsn=rng.getrandbits(64))),
        lambda: encode_record(Record("B", 1, csn=5, first_lsn=1, xid=rng.getrandbits(64), origin_id=3,
                                     user_name="u" * rng.randint(0, 9))),
        lambda: encode_record(Record("C", 6, commit_time="2024-01-01 00:00:0%d+00" % rng.randint(0, 9))),
        lambda: encode_record(Record("C", 6, xid=rng.getrandbits(64))),
        lambda: encode_record(Record("D", 5, schema="s", table="t", old_tuple=one)),
        lambda: encode_record(Record("U", 3, schema="s", table="t", new_tuple=one, old_tuple=one)),
        lambda: ins[:-3],   # a truncated Insert: an error row
    ]
    frames = []
    for _f in range(rng.randint(2, 5)):
        recs = [ins] * rng.choice([0, 1, 700, 2500])
        for _k in range(rng.randint(0, 6)):
            recs.insert(rng.randint(0, len(recs)), rng.choice(rare)())
        if rng.random() < 0.3:
            recs.append(rng.choice(rare)())
        if recs and recs[-1] is not ins and len(recs[-1]) < len(ins):
            frames.append(b"P".join(recs) + b"P" + ins + b"F")   # the error row is not last
        else:
            frames.append(b"P".join(recs) + b"F" if recs else b"\x00\x00\x00\x00")
    chunks = [pa.array(frames[:1], pa.binary()), pa.array(frames[1:], pa.binary())]
    t = compiled(pa.chunked_array(chunks))
    t.validate(full=True)
    assert t.equals(decode_batch_py(pa.chunked_array(chunks)))


def test_an_insert_only_chunk_leaves_the_other_columns_null():
    ins = encode_record(Record("I", 2, schema="s", table="t", new_tuple=(Column("a", 23, b"1"),)))
    t = compiled(pa.array([encode_frame([ins] * 3000)] * 2, pa.binary()))
    t.validate(full=True)
    for name in ("csn", "first_lsn", "xid", "commit_time", "origin_id", "user_name", "old_tuple", "error"):
        assert t.column(name).null_count == 6000, name


def dense_insert(ncols: int, *, null_every: int = 0, lsn: int = 9) -> bytes:
    """An Insert of ``ncols`` columns of 10 bytes each (empty name, empty or NULL value), no
    schema or table: the most columns and rows per byte a frame can hold."""
    cols = b"".join(b"\x00\x00" + struct.pack(">I", 23)
                    + (struct.pack(">I", 0xFFFFFFFF) if null_every and i % null_every == 0 else b"\x00" * 4)
                    for i in range(ncols))
    body = b"\x00\x00" + b"\x00\x00" + b"N" + struct.pack(">H", ncols) + cols
    return struct.pack(">IQ", 9 + len(body), lsn) + b"I" + body


@pytest.mark.parametrize("first", [b"", b"tiny"])
def test_the_densest_frames_stay_within_their_reservation(first):
    # decode_row reserves once per frame, from the frame's length, and the fast path then
    # writes unchecked: a frame of the densest records (10-byte columns, column-less
    # Inserts, and between them 14-byte bare Begins, which the general path turns into
    # error rows) must fit, after a first frame that made the proportional reserve small
    beg = struct.pack(">IQ", 9, 1) + b"B"
    recs = []
    for k in range(3000):
        recs.append([dense_insert(k % 60, null_every=k % 5), dense_insert(0), beg][k % 3])
    values = ([frame([raw_insert(first)])] if first else []) + [frame(recs), frame(recs[::-1])]
    t = same(values)
    t.validate(full=True)
    assert t.num_rows == (1 if first else 0) + 6000
    assert t.column("error").null_count == t.num_rows - 2000
    values_ = t.column("new_tuple").combine_chunks().flatten().field("value")
    assert len(values_) > 50_000 and 0 < values_.null_count < len(values_)
