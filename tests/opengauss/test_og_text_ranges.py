"""Numbers in text/json BEGIN and commit lines must fit their Arrow columns: an
oversized one is an error row naming it, never an overflow (a case the fuzzer draws)."""

from pathlib import Path

import pyarrow as pa
import pytest

from pgoutput_codec.opengauss import decode_batch
from pgoutput_codec.opengauss.encode import encode_text_frame
from pgoutput_codec.opengauss.messages import Record



@pytest.mark.parametrize("line, what", [
    ("BEGIN CSN: 2359 first_lsn: 0/CFE64D022222222222222 xid: 78109", "first_lsn low half"),
    ("BEGIN CSN: 2359 first_lsn: 1FFFFFFFF/0 xid: 78109", "first_lsn high half"),
    ("BEGIN CSN: 18446744073709551616 first_lsn: 0/1", "CSN"),
    ("BEGIN CSN: 1 first_lsn: 0/1 xid: 18446744073709551616", "xid"),
    ("BEGIN CSN: 1 first_lsn: 0/1 origin_id: 4294967296", "origin id"),
    ("commit xid: 99999999999999999999 (at 2024-02-05 14:46:35+08)", "xid"),
])
@pytest.mark.parametrize("style", ["t", "j"])
def test_oversized_numbers_are_error_rows(line, what, style):
    frame = line.encode()       # sending-batch=0: the bare text is the frame
    t = decode_batch(pa.array([frame], pa.binary()), style=style)
    t.validate(full=True)
    assert t.num_rows == 1
    assert what in t.column("error")[0].as_py()


def test_largest_values_still_decode():
    line = "BEGIN CSN: 18446744073709551615 first_lsn: FFFFFFFF/FFFFFFFF xid: 18446744073709551615"
    t = decode_batch(pa.array([line.encode()], pa.binary()), style="t")
    assert t.column("error")[0].as_py() is None
    assert t.column("first_lsn")[0].as_py() == 2**64 - 1
    assert t.column("csn")[0].as_py() == t.column("xid")[0].as_py() == 2**64 - 1


def test_fuzzer_crash_input_is_an_error_row():
    data = (Path(__file__).parent / "crash_inputs" / "text_first_lsn_overflow.bin").read_bytes()
    t = decode_batch(pa.array([data], pa.binary()), style="t")
    t.validate(full=True)
    assert any(e and "does not fit" in e for e in t.column("error").to_pylist())


def test_well_formed_frames_unchanged():
    frame = encode_text_frame([Record("B", 1, csn=5, first_lsn=(3 << 32) | 7, xid=9), Record("C", 2, xid=9)])
    t = decode_batch(pa.array([frame], pa.binary()), style="t")
    assert t.column("error").null_count == t.num_rows == 2
