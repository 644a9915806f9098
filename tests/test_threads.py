"""Several threads decoding and converting at once give what one thread gives; the
default number of threads follows the input's size.

The converters release the GIL and grow their output through the shared block cache
(``_memory``) while other threads decode with the GIL held: every output is compared
with the single-threaded one."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pgoutput_codec import ChangeDecoder, decode_batch, decode_changes, decode_table_changes, threads
from pgoutput_codec.pgoutput.batch import decode_batch_pieces
from pgoutput_codec.opengauss import decode_batch as og_decode_batch
from pgoutput_codec.opengauss.encode import encode_frame, encode_record
from pgoutput_codec.opengauss.messages import Column, Record
from pgoutput_codec.data import sample_archive_path
from pgoutput_codec.typecatalog.columns import convert_columns


def _columns(seed: int):
    """Text values of int8, text and numeric columns: outputs of several MiB each, so
    their blocks come from and go back to the cache."""
    rng = np.random.default_rng(seed)
    n = 300_000
    ints = rng.integers(-10**12, 10**12, n)
    text = [str(v).encode() * (1 + v % 3) for v in ints]
    data = pa.array([str(v).encode() for v in ints] + text + [f"{v / 1000:.3f}".encode() for v in ints], pa.binary())
    kinds = pa.array(["t"] * len(data))
    index = [np.arange(k * n, (k + 1) * n, dtype=np.int64) for k in range(3)]
    return kinds, data, [(20, -1), (25, -1), (1700, ((20 << 16) | 3) + 4)], index


def _convert(args):
    kinds, data, types, index = args
    return [(c.values, c.special) for c in convert_columns(kinds, data, types, indexes=index)]


def test_threads_convert_and_decode_as_one_thread_does():
    archive = pq.read_table(sample_archive_path())
    values = pa.concat_arrays([archive.column("data").combine_chunks()] * 20)
    inputs = [_columns(s) for s in range(4)]
    want_conv = [_convert(a) for a in inputs]
    want_msgs = decode_batch(values)
    want_changes = decode_changes(values)
    with ThreadPoolExecutor(4) as pool:
        jobs = [(pool.submit(_convert, inputs[k % 4]), k % 4) for k in range(12)]
        jobs += [(pool.submit(decode_batch, values), "msgs") for _ in range(4)]
        jobs += [(pool.submit(decode_changes, values), "changes") for _ in range(2)]
        for job, what in jobs:
            got = job.result()
            if what == "msgs":
                assert got.equals(want_msgs)
            elif what == "changes":
                assert got.equals(want_changes)
            else:
                for (gv, gs), (wv, ws) in zip(got, want_conv[what], strict=True):
                    assert gv.equals(wv)
                    assert (gs is None) == (ws is None) and (gs is None or gs.equals(ws))


class _PoolSpy:
    """``threads.ThreadPoolExecutor``, noting the size of each pool started."""

    def __init__(self, monkeypatch):
        self.sizes = []
        real = threads.ThreadPoolExecutor

        def pool(max_workers, **kw):
            self.sizes.append(max_workers)
            return real(max_workers, **kw)
        monkeypatch.setattr(threads, "ThreadPoolExecutor", pool)


def _og_frames(n):
    cols = tuple(Column(f"col{i}", 25, b"value-%02d" % i) for i in range(4))
    rec = encode_record(Record("I", 0x1000, schema="public", table="t", new_tuple=cols))
    return pa.array([encode_frame([rec] * 50)] * n, pa.binary())


def test_default_workers_follow_the_input_size():
    cores = threads.worker_count(None)
    assert cores >= 1
    assert threads.worker_count(None, 0) == 1
    assert threads.worker_count(None, threads.WORKER_MIN_BYTES - 1) == 1
    assert threads.worker_count(None, 2 * threads.WORKER_MIN_BYTES) == min(2, cores)
    assert threads.worker_count(None, 10**15) == cores
    assert threads.worker_count(3, 0) == 3       # a count given is taken as it is
    # outputs kept apart (no join): a smaller input pays for a second worker
    assert threads.PIECES_WORKER_MIN_BYTES < threads.WORKER_MIN_BYTES
    assert threads.worker_count(None, threads.PIECES_WORKER_MIN_BYTES - 1, joined=False) == 1
    assert threads.worker_count(None, 2 * threads.PIECES_WORKER_MIN_BYTES, joined=False) == min(2, cores)
    assert threads.worker_count(None, 2 * threads.PIECES_WORKER_MIN_BYTES) == 1
    values = pa.array([b"ab", None, b"cde"], pa.binary())
    assert threads.payload_bytes(values) == 5
    assert threads.payload_bytes(values.slice(1)) == 3
    assert threads.payload_bytes(pa.chunked_array([values, values])) == 10
    assert threads.payload_bytes(pa.table({"data": values.cast(pa.large_binary())})) == 5
    assert threads.payload_bytes([b"ab", None, b"cde"]) == 5


def test_small_inputs_stay_on_one_thread_by_default(monkeypatch):
    """Below ``WORKER_MIN_BYTES`` (``PIECES_WORKER_MIN_BYTES``) a payload per worker, no
    decoder starts a pool; above it, they do, and give what one worker gives."""
    archive = pq.read_table(sample_archive_path())
    values = pa.concat_arrays([archive.column("data").combine_chunks()] * 40)
    frames = _og_frames(400)
    table = decode_changes(values, workers=1).column("table")[0].as_py()
    schema = decode_changes(values, workers=1).column("schema")[0].as_py()
    calls = {
        "decode_batch": lambda w: decode_batch(values, workers=w),
        "decode_batch_pieces": lambda w: pa.concat_arrays([p for _, p in decode_batch_pieces(values, workers=w)[0]]),
        "decode_changes": lambda w: decode_changes(values, workers=w),
        "ChangeDecoder": lambda w: ChangeDecoder(workers=w).feed(values),
        "decode_table_changes": lambda w: decode_table_changes(values, f"{schema}.{table}", workers=w),
        "opengauss decode_batch": lambda w: og_decode_batch(frames, workers=w),
        "decode_changes opengauss": lambda w: decode_changes(frames, source="opengauss", workers=w),
    }
    want = {name: call(1) for name, call in calls.items()}
    spy = _PoolSpy(monkeypatch)
    for name, call in calls.items():
        assert call(None).equals(want[name]), name
        assert spy.sizes == [], f"{name} started threads for a small input"
    if threads.worker_count(None) < 2:
        return
    monkeypatch.setattr(threads, "MIN_PIECE_ROWS", 64)
    monkeypatch.setattr(threads, "WORKER_MIN_BYTES", 1)
    monkeypatch.setattr(threads, "PIECES_WORKER_MIN_BYTES", 1)
    for name, call in calls.items():
        assert call(None).equals(want[name]), name
        assert spy.sizes, f"{name} stayed on one thread for a large input"
        spy.sizes.clear()


def test_change_decoder_takes_workers_per_feed():
    with pytest.raises(ValueError, match="workers"):
        ChangeDecoder(workers=0)
    dec = ChangeDecoder()
    dec.feed(pq.read_table(sample_archive_path()))
    assert dec.workers == 1


def test_worker_min_bytes_from_the_environment():
    code = "from pgoutput_codec import threads; print(threads.WORKER_MIN_BYTES)"
    env = {**os.environ, "PGOUTPUT_CODEC_WORKER_MIN_MB": "10"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and int(out.stdout) == 10 << 20, out.stderr


_READ_SIZES = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from pgoutput_codec import threads
print(threads.WORKER_MIN_BYTES, threads.PIECES_WORKER_MIN_BYTES)
for w in caught:
    print(w.category.__name__, w.message)
"""


def _sizes_in_a_fresh_process(**variables):
    env = {k: v for k, v in os.environ.items() if k not in ("PGOUTPUT_CODEC_WORKER_MIN_MB",
                                                             "PGOUTPUT_CODEC_PIECES_WORKER_MIN_MB")}
    out = subprocess.run([sys.executable, "-c", _READ_SIZES], env={**env, **variables}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, *warned = out.stdout.splitlines()
    return tuple(int(v) for v in first.split()), warned


@pytest.mark.parametrize("name", ["PGOUTPUT_CODEC_WORKER_MIN_MB", "PGOUTPUT_CODEC_PIECES_WORKER_MIN_MB"])
@pytest.mark.parametrize("value", ["lots", "0", "-3", ""])
def test_a_bad_size_variable_warns_and_keeps_the_default(name, value):
    """A bad value must not break ``import pgoutput_codec`` (nor a Spark worker's)."""
    defaults, warned = _sizes_in_a_fresh_process()
    assert warned == []
    sizes, warned = _sizes_in_a_fresh_process(**{name: value})
    assert sizes == defaults
    assert len(warned) == 1 and warned[0].startswith("RuntimeWarning") and name in warned[0], warned
    assert repr(value) in warned[0]


def test_the_command_line_takes_the_size_rule_by_default(monkeypatch, tmp_path, capsys):
    """``decode`` and ``inspect`` without ``--jobs`` leave the thread count to the
    decoders' rule: an archive of a few MB is decoded on one thread."""
    from pgoutput_codec import cli
    t = pq.read_table(sample_archive_path())
    big = pa.concat_tables([t] * 40)
    big = big.set_column(0, "seq", pa.array(np.arange(big.num_rows, dtype=np.int64)))
    pq.write_table(big, tmp_path / "a.parquet")
    spy = _PoolSpy(monkeypatch)
    assert cli.main(["decode", str(tmp_path / "a.parquet"), str(tmp_path / "m.parquet")]) == 0
    assert cli.main(["inspect", str(tmp_path / "a.parquet")]) == 0
    assert spy.sizes == []
    if threads.worker_count(None) > 1:        # (the spy sees a pool where one is asked for)
        assert cli.main(["decode", str(tmp_path / "a.parquet"), str(tmp_path / "j.parquet"), "--jobs", "2"]) == 0
        assert spy.sizes
    with pytest.raises(SystemExit):
        cli.main(["decode", str(tmp_path / "a.parquet"), str(tmp_path / "x.parquet"), "--jobs", "0"])
    capsys.readouterr()
