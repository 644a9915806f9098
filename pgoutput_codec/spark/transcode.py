"""Spark: an archive DataFrame captured under another client encoding, rewritten as the
UTF-8 archive a UTF-8 session would have captured (:mod:`pgoutput_codec.transcode`), in
parallel.

A row change's values are rewritten by the state the session's earlier messages built:
inside a stream block its header carries an xid, and a binary value is text or not by
its column's type (its relation's last Relation, the Type messages). Those state rows
(R, Y, S, E: ~1% of an archive) are chosen by Spark itself by their tag byte and
collected to the driver with their order keys, like ``decode_changes``' pass 1; the
driver reads them into a :class:`~pgoutput_codec.transcode.Timeline` (the state as of
any key), shipped to the workers. Each partition then rewrites its rows with
``mapInArrow``, in order-key order within each Arrow batch, seeding its walk from the
timeline at its first row and again wherever a state row of the archive falls between
its rows: a partition may hold any rows of the archive (a repartition, files listed in
another order), and each row is read by the state as of its own key.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..transcode import STATE_TAGS, Timeline, Transcoder, is_utf8
from . import archiverows as RF
from .archiverows import KEY, order_key
from .shipping import check_workers, col, collect_arrow, to_workers

__all__ = ["transcode"]


class _TranscodeMapper:
    """Picklable ``mapInArrow`` body: each batch's payloads rewritten, the other columns
    kept."""

    def __init__(self, timeline_bc, payload, errors):
        self.timeline_bc, self.payload, self.errors = timeline_bc, payload, errors

    def __call__(self, batches):
        timeline = self.timeline_bc.value
        t = Transcoder(timeline.codec, envelope=timeline.envelope, errors=self.errors, timeline=timeline)
        for rb in batches:
            if rb.num_rows == 0:
                yield rb
                continue
            keys = rb.column(KEY).to_numpy(zero_copy_only=False)
            new = t.keyed(rb.column(self.payload), keys)
            i = rb.schema.get_field_index(self.payload)
            yield pa.RecordBatch.from_arrays([new if j == i else rb.column(j) for j in range(rb.num_columns)],
                                             schema=rb.schema)


def transcode(df: DataFrame, encoding: str, *, payload: str = "data", order_by=None, envelope: str = "auto",
              in_stream=None, registry=None, errors: str = "strict") -> DataFrame:
    """``df`` (an archive: a binary payload column and its arrival order) with its
    payloads rewritten from client encoding ``encoding`` to UTF-8, every other column
    kept: what :func:`~pgoutput_codec.transcode.transcode_payloads` gives the whole
    archive, row for row, in parallel. ``order_by``: the arrival-order column(s), as for
    :func:`decode_changes` (default: file order and row index). ``errors="strict"`` fails
    the job at the first payload it cannot rewrite, naming its order key, byte offset and
    message type; ``"keep"`` leaves such rows as sent (the decoders' ``mode`` then judges
    them). Runs one Spark job eagerly (the state rows to the driver)."""
    check_workers(df.sparkSession)
    if errors not in ("strict", "keep"):
        raise ValueError(f"errors must be 'strict' or 'keep', not {errors!r}")
    if is_utf8(encoding):
        return df
    if KEY in df.columns:
        raise ValueError(f"the DataFrame already has a column {KEY!r}")
    src = df.withColumn(KEY, order_key(df, order_by))
    rows = collect_arrow(src.where(RF.is_control(col(payload), envelope, STATE_TAGS)).select(payload, KEY))
    timeline = Timeline.build(rows.column(payload), rows.column(KEY), encoding, envelope=envelope,
                              in_stream=in_stream, registry=registry, errors=errors)
    bc = to_workers(df.sparkSession, timeline)
    out = src.mapInArrow(_TranscodeMapper(bc, payload, errors), src.schema)
    return out.drop(KEY).select(*[F.col(f"`{c}`") for c in df.columns])
