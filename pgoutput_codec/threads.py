"""Decoding on all cores of one process: how many workers, where to cut, a thread pool.

The Cython loops release the GIL, so threads decode pieces of one input at once. The
decoders cut their input into pieces here, run them on a pool of threads, and join
the results in input order: a piece's result never depends on how the others were cut.
"""

from __future__ import annotations

import os
import queue
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

__all__ = ["worker_count", "usable_cores", "payload_bytes", "piece_bounds", "run_pieces", "prefetch", "PIECE_BYTES",
           "MIN_PIECE_ROWS", "HELD_PIECE_BYTES", "WORKER_MIN_BYTES", "PIECES_WORKER_MIN_BYTES"]

#: a piece holds at most this many payload bytes: what one worker has in flight (its
#: input slice and the output built from it) stays near this, however large the input
PIECE_BYTES = 32 << 20

#: the pieces of a decode whose pieces are all held until the last ends (``decode_batch``):
#: two a worker, however large (smaller ones bound nothing there, and each costs fresh
#: output buffers: 2 M messages in 10 pieces took 40% more CPU than in 4)
HELD_PIECE_BYTES = 1 << 62

#: fewer rows than this are not worth a thread (the pool's hand-off costs more)
MIN_PIECE_ROWS = 4096

#: payload bytes each worker must have, for the default (``workers=None``) to use it: below
#: this a second thread costs more than it gives back — its start, cutting the input,
#: joining the pieces' outputs, and above all the fresh memory each piece's output takes.
#: bench/parallel_bench.py measures where two workers start to pay (docs/benchmarks.md,
#: "Threads by size"); ``PGOUTPUT_CODEC_WORKER_MIN_MB`` sets it for another machine.
WORKER_MIN_BYTES = 1024 << 20

#: the same for a decoder that hands the pieces' outputs back as they are, without a join
#: (``decode_batch_pieces``, the openGauss ``decode_batch``): two workers pay there from
#: far smaller inputs (docs/benchmarks.md). ``PGOUTPUT_CODEC_PIECES_WORKER_MIN_MB`` sets it.
PIECES_WORKER_MIN_BYTES = 64 << 20


def _env_mb(name: str, default: int) -> int:
    """``name``'s value in MiB, as bytes; ``default`` when unset or not a positive
    integer. A bad value warns rather than raises: it is read when the package is
    imported, and an import that fails takes every decoder (and each Spark worker) down."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        warnings.warn(f"{name} must be a positive number of MiB, not {text!r}: "
                      f"{default >> 20} MiB is used", RuntimeWarning, stacklevel=2)
        return default
    return value << 20


WORKER_MIN_BYTES = _env_mb("PGOUTPUT_CODEC_WORKER_MIN_MB", WORKER_MIN_BYTES)
PIECES_WORKER_MIN_BYTES = _env_mb("PGOUTPUT_CODEC_PIECES_WORKER_MIN_MB", PIECES_WORKER_MIN_BYTES)

_local = threading.local()


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:      # (not on Linux)
        return os.cpu_count() or 1


def worker_count(workers, payload: int | None = None, *, joined: bool = True) -> int:
    """The threads to decode ``payload`` bytes on. ``workers``: a positive int, taken as
    it is, or None: one per core this process may run on, but no more than one per
    ``WORKER_MIN_BYTES`` of ``payload`` (``PIECES_WORKER_MIN_BYTES`` when not ``joined``:
    the caller keeps the pieces' outputs apart), so that the default is never slower
    than one worker. ``payload`` None: not known yet, every core."""
    if workers is None:
        cores = usable_cores()
        if payload is None:
            return cores
        per_worker = WORKER_MIN_BYTES if joined else PIECES_WORKER_MIN_BYTES
        return max(1, min(cores, int(payload) // per_worker))
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be None or a positive integer, not {workers!r}")
    return int(workers)


def payload_bytes(values) -> int:
    """The payload bytes of an input as the decoders take it: a binary array, a chunked
    one, a table with a ``data`` column, or a sequence of ``bytes``/None (read from the
    offsets alone: no payload is touched)."""
    if isinstance(values, pa.Table):
        values = values.column("data") if "data" in values.column_names else values.column(0)
    if isinstance(values, pa.ChunkedArray):
        return sum(payload_bytes(c) for c in values.chunks)
    if isinstance(values, pa.Array):
        typ = values.type
        if not len(values) or not (pa.types.is_binary(typ) or pa.types.is_large_binary(typ)
                                   or pa.types.is_string(typ) or pa.types.is_large_string(typ)):
            return values.nbytes if len(values) else 0
        width = np.int64 if pa.types.is_large_binary(typ) or pa.types.is_large_string(typ) else np.int32
        offs = np.frombuffer(values.buffers()[1], dtype=width)
        return int(offs[values.offset + len(values)] - offs[values.offset])
    return sum(len(v) for v in values if isinstance(v, (bytes, bytearray, memoryview)))


def piece_bounds(sizes: np.ndarray, workers: int, *, piece_bytes: int | None = None) -> np.ndarray:
    """Row bounds ``[0, …, n]`` cutting rows of ``sizes`` bytes into pieces: none above
    ``piece_bytes`` unless one row is (what one worker holds at once stays bounded), at
    least two per worker when there are several (so a slow piece does not hold the others
    up), none under ``MIN_PIECE_ROWS`` rows."""
    piece_bytes = piece_bytes or PIECE_BYTES
    min_rows = MIN_PIECE_ROWS
    n = len(sizes)
    if n < 2 * min_rows:
        return np.array([0, n], np.int64)
    total = int(sizes.sum())
    count = max(2 * workers if workers > 1 else 1, -(-total // piece_bytes))
    count = min(count, n // min_rows)
    if count <= 1:
        return np.array([0, n], np.int64)
    # equal bytes per piece (rows vary in size), cut on row boundaries
    ends = np.cumsum(sizes, dtype=np.int64)
    targets = (np.arange(1, count, dtype=np.int64) * total) // count
    cuts = np.searchsorted(ends, targets, side="left") + 1
    cuts = np.unique(np.clip(cuts, 1, n - 1))
    return np.concatenate([[0], cuts, [n]]).astype(np.int64)


def _in_worker() -> bool:
    return getattr(_local, "worker", False)


def _run(fn, item):
    _local.worker = True
    try:
        return fn(item)
    finally:
        _local.worker = False


def run_pieces(fn, items: list, workers: int) -> list:
    """``[fn(item) for item in items]``, on up to ``workers`` threads; the first error in
    item order is raised once every piece has ended. Pieces of a piece (a call from a
    worker) run in that worker: nested pools would run more threads than cores."""
    if workers <= 1 or len(items) <= 1 or _in_worker():
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="pgoutput-codec") as pool:
        futures = [pool.submit(_run, fn, item) for item in items]
        done = [(f.exception(), f) for f in futures]
    for err, _ in done:
        if err is not None:
            raise err
    return [f.result() for _, f in done]


_END = object()


def prefetch(items, depth: int = 2):
    """Iterate ``items`` with the next ``depth`` of them produced meanwhile on a thread
    of their own: reading the next batch of an archive (pyarrow releases the GIL) while
    this one is decoded. An error producing them is raised here, in its place; leaving
    the loop early stops the thread after the item it is on."""
    q = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce():
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put((item, None))
            q.put((_END, None))
        except BaseException as e:       # noqa: BLE001 — handed to the consumer
            q.put((_END, e))

    t = threading.Thread(target=produce, name="pgoutput-codec-prefetch", daemon=True)
    t.start()
    try:
        while True:
            item, err = q.get()
            if item is _END:
                if err is not None:
                    raise err
                return
            yield item
    finally:
        stop.set()
        while t.is_alive():          # unblock a producer waiting on a full queue
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        t.join()
