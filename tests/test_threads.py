"""Several threads decoding and converting at once give what one thread gives.

The converters release the GIL and grow their output through the shared block cache
(``_memory``) while other threads decode with the GIL held: every output is compared
with the single-threaded one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pgoutput_codec import decode_batch, decode_changes
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
