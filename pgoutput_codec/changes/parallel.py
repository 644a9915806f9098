"""``decode_changes``: a whole archive to change rows, on every core of the process.

The control rows are walked once (a :class:`~pgoutput_codec.changes.ControlPlan`, as
Spark's driver does); then pieces of the archive are decoded to change rows on a pool
of threads, each piece on its own (the Cython loops release the GIL), and the pieces'
rows joined in commit order. What the plan cannot do alike — empty transactions kept as
``op='C'`` rows, payloads the archive reader could not read, order keys not rising in
arrival order — and any error are left to the one-thread :class:`ChangeDecoder`, so the
result (or the exception) is always the one it gives.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..arrays import lsn_array, one_array, one_binary, order_keys, payload_sizes
from ..pgoutput.batch import PAYLOAD_ERROR, initial_stream_state
from .decoder import ChangeDecoder
from .checkpoint import Checkpoint
from ..errors import PgoutputCodecError
from .plan import ControlPlan, changes_of_pieces
from .tags import control_candidates
from .. import threads
from ..typecatalog.catalog import catalog_of, with_catalog
from ..threads import payload_bytes, piece_bounds, worker_count

__all__ = ["decode_changes", "changes_by_pieces"]


def decode_changes(input, *, source: str = "pgoutput", workers: int | None = None, **options) -> pa.Table:
    """Decode a whole archive into change rows (``schema.CHANGE_SCHEMA``), in commit order.

    ``input``: a binary array / list of payloads in arrival order, or a table shaped like
    ``pg_logical_slot_get_binary_changes`` output (``data``, optional ``lsn`` as text or
    int, ``xid``, ``seq``). Rows are taken in the order given — never re-sorted by
    ``lsn``: a change's LSN goes backwards when transactions interleave. Options: see
    :class:`ChangeDecoder`. ``workers``: threads decoding pieces of the archive at once
    (None: one per core this process may use, as many as the archive's size pays for:
    see :func:`~pgoutput_codec.threads.worker_count`; 1: this thread only); the rows are
    the same for any number. ``source="opengauss"`` reads openGauss/GaussDB frames instead
    (``style=`` 'b'/'t'/'j', ``exclude_users=``; see ``opengauss.changes``): its frames
    decoded on the threads, its transactions followed in this one. A table read from an
    archive file carrying a type catalog (its footer, ``pgoutput_codec.catalog``) gives
    rows carrying it in their schema metadata, which the table functions type with.
    """
    return with_catalog(_decoded(input, source, workers, options), catalog_of(input) if isinstance(input, pa.Table)
                        else None)


def _decoded(input, source, workers, options):
    if source == "opengauss":
        # (imported here: a pgoutput archive's decode, and every import of the package
        # that reaches this module, has no use for the openGauss readers)
        from ..opengauss.changes import decode_changes as opengauss_decode_changes
        if isinstance(input, pa.Table):
            input = input.column("data")
        return opengauss_decode_changes(input, workers=workers, **options)
    if source != "pgoutput":
        raise ValueError(f"source must be 'pgoutput' or 'opengauss', got {source!r}")
    workers = worker_count(workers, payload_bytes(input))
    if workers > 1:
        pieces = changes_by_pieces(input, workers, options)
        if pieces is not None:
            return pieces
    with ChangeDecoder(workers=workers, **options) as dec:
        return dec.feed(input)


def _columns(input):
    """(payloads, lsn, seq) of an input, as ``ChangeDecoder.feed`` reads it; None for
    one it reads otherwise (payloads the reader could not read)."""
    lsn = seq = None
    if isinstance(input, pa.Table):
        if PAYLOAD_ERROR in input.column_names and input.column(PAYLOAD_ERROR).null_count != len(input):
            return None
        lsn = input.column("lsn") if "lsn" in input.column_names else None
        seq = input.column("seq") if "seq" in input.column_names else None
        input = input.column("data")
    return one_binary(one_array(input)), lsn, seq


def changes_by_pieces(input, workers: int, options: dict):
    """The rows :class:`ChangeDecoder` gives, by pieces on ``workers`` threads; None
    where that decoder must run instead (see the module)."""
    if not options.get("skip_empty_xacts", True):
        return None
    cols = _columns(input)
    if cols is None:
        return None
    values, lsn, seq = cols
    n = len(values)
    if n < 2 * threads.MIN_PIECE_ROWS:
        return None
    if seq is None:
        if options.get("resume") is not None:
            return None          # (the decoder says why it needs them)
        keys = np.arange(n, dtype=np.int64)
    else:
        try:
            keys = order_keys(seq)
        except ValueError:
            return None
        if n > 1 and not (np.diff(keys) > 0).all():
            return None          # the plan orders by key, the decoder by arrival
    opts = dict(options)
    opts.pop("max_txn_in_memory_mb", None)
    opts.pop("spill_dir", None)
    budget = opts.pop("max_memory_mb", 1024)
    resume = opts.pop("resume", None)
    opts.setdefault("errors", "raise")
    opts["workers"] = workers
    # the change decoder's memory budget covers every worker's piece together
    piece_bytes = min(threads.PIECE_BYTES, max(1 << 20, int(budget * (1 << 20)) // (4 * workers)))
    lsn_arr = lsn_array(lsn, n)
    try:
        if resume is not None and keys.min() < Checkpoint.of(resume).from_key:
            return None          # (the decoder says why it needs them)
        mask = control_candidates(values)
        in_stream = None if resume is not None else initial_stream_state(values)
        plan = ControlPlan.build(values.filter(pa.array(mask)), keys[mask], in_stream=in_stream,
                                 lsn=lsn_arr.filter(pa.array(mask)), resume=resume, **opts)
        bounds = piece_bounds(payload_sizes(values), workers, piece_bytes=piece_bytes)
        return changes_of_pieces(plan, values, keys, lsn_arr, bounds, workers)
    except PgoutputCodecError:
        return None              # the decoder raises it, or gives what it gives in error
