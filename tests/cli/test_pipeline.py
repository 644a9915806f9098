"""The CLI reads, decodes and writes an archive in batches, on several threads: the
output is what decoding the whole archive at once gives."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pgoutput_codec as pc
from pgoutput_codec import threads
from pgoutput_codec.archive import iter_archive, parquet_part
from pgoutput_codec.arrays import plain_list_columns
from pgoutput_codec.cli import decode as cli_decode
from pgoutput_codec.cli.inspect import inspect_archive
from pgoutput_codec.data import sample_archive_path
from pgoutput_codec.threads import prefetch

SAMPLE = sample_archive_path()


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(cli_decode, "BATCH_ROWS", 300)
    monkeypatch.setattr(threads, "MIN_PIECE_ROWS", 20)
    monkeypatch.setattr(threads, "PIECE_BYTES", 2000)


def _archive(tmp_path, files: int):
    src = pq.read_table(SAMPLE).replace_schema_metadata(None)
    d = tmp_path / "arch"
    d.mkdir()
    cuts = np.linspace(0, len(src), files + 1, dtype=int)
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        pq.write_table(src.slice(a, b - a), d / f"part-{k:06d}.parquet", row_group_size=170)
    return src, d


@pytest.mark.parametrize("files", [1, 3])
def test_decode_in_batches_on_threads(tmp_path, small_batches, files):
    src, d = _archive(tmp_path, files)
    msgs = pc.decode_batch(src.column("data"), workers=1)
    want = {f.name: col for f, col in zip(msgs.type, msgs.flatten(), strict=True)}
    for jobs in (1, 3):
        out = tmp_path / f"messages-{jobs}.parquet"
        counts = cli_decode.decode_archive(str(d), str(out), jobs=jobs)
        got = pq.read_table(out)
        assert counts["rows_in"] == counts["rows_out"] == len(src)
        assert got.column("seq").to_pylist() == src.column("seq").to_pylist()
        for name, col in want.items():
            assert got.column(name).combine_chunks().equals(col), name
        out = tmp_path / f"changes-{jobs}.parquet"
        cli_decode.decode_archive(str(d), str(out), changes=True, jobs=jobs)
        changes = pq.read_table(out)
        expected = pc.decode_changes(src, workers=1)
        assert changes.equals(plain_list_columns(expected).cast(changes.schema))
    r1 = inspect_archive(str(d), jobs=1)
    r3 = inspect_archive(str(d), jobs=3)
    assert r1 == r3 and r1["messages"] == len(src)


def test_batches_of_a_file_out_of_seq_order_come_sorted(tmp_path):
    src = pq.read_table(SAMPLE).replace_schema_metadata(None)
    perm = np.random.default_rng(3).permutation(len(src))
    path = tmp_path / "shuffled.parquet"
    pq.write_table(src.take(pa.array(perm)), path)
    got = [t for _, t in iter_archive([parquet_part(str(path))], batch_rows=400)]
    assert max(len(t) for t in got) == 400
    assert pa.concat_tables(got).column("seq").to_pylist() == src.column("seq").to_pylist()


def test_empty_file_still_yields_its_columns(tmp_path):
    src = pq.read_table(SAMPLE).replace_schema_metadata(None)
    path = tmp_path / "empty.parquet"
    pq.write_table(src.slice(0, 0), path)
    got = list(iter_archive([parquet_part(str(path))], batch_rows=100))
    assert len(got) == 1 and len(got[0][1]) == 0 and got[0][1].column_names == src.column_names


def test_prefetch_raises_in_place_and_stops_early():
    def items():
        yield from range(3)
        raise ValueError("broken at 3")

    seen = []
    with pytest.raises(ValueError, match="broken at 3"):
        for x in prefetch(items()):
            seen.append(x)
    assert seen == [0, 1, 2]
    produced = []

    def many():
        for i in range(1000):
            produced.append(i)
            yield i

    for x in prefetch(many(), depth=2):
        if x == 5:
            break
    assert len(produced) < 20
    assert not [t for t in threading.enumerate() if t.name == "pgoutput-codec-prefetch"]


def test_jobs_must_be_positive():
    from pgoutput_codec.cli import main as cli_main
    for bad in ("0", "-2", "many"):
        with pytest.raises(SystemExit):
            cli_main(["decode", "--sample", "/tmp/never.parquet", "--jobs", bad])


def test_lsn_text_column_read_as_parse_lsn_reads_it():
    """A captured archive's ``lsn`` is ``X/Y`` text: read vectorized, it gives what
    ``parse_lsn`` gives row by row, nulls kept, and the first bad row named."""
    from pgoutput_codec.arrays import lsn_array
    from pgoutput_codec.pgoutput.messages import format_lsn, parse_lsn
    rng = np.random.default_rng(11)
    texts = [format_lsn(int(v)) for v in rng.integers(0, 2**64 - 1, 5000, dtype=np.uint64)]
    texts[:6] = ["0/0", "FFFFFFFF/FFFFFFFF", "ab/cD", None, "1/00000001", "00000000/1"]
    want = pa.array([None if t is None else parse_lsn(t) for t in texts], pa.uint64())
    for typ in (pa.string(), pa.large_string()):
        arr = pa.array(texts, typ)
        assert lsn_array(arr, len(arr)).equals(want)
        assert lsn_array(arr.slice(2, 100), 100).equals(want.slice(2, 100))
    assert lsn_array(pa.chunked_array([texts[:7], texts[7:]]), len(texts)).equals(want)
    assert len(lsn_array(pa.array([], pa.string()), 0)) == 0
    for bad in ("1/2/3", "G/1", "123456789/1", " 1/1", "", "0x1/1", "+1/1"):
        with pytest.raises(ValueError, match=r"^lsn of row 2: not an LSN"):
            lsn_array(pa.array(["0/1", None, bad, "zz"]), 4)
